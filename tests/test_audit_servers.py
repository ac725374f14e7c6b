"""Issue 46, the servers and writers part (items 2, 5, 6, 10, 11, 13, 14, 15, 16): a long-running
MCP server sees other processes' writes, credentials stay out of judge output, MCP tools and
encoded echoes, the judge holds the run directory alone, report.md shows data as text, and
hostile requests get a clear error instead of a traceback."""

from __future__ import annotations

import base64
import functools
import http.client
import http.server
import json
import threading
from pathlib import Path

import anyio
import httpx
import pytest
from fake_servers import FakeOpenAI, FakeResponse
from mcp import Client

from moviemem import Library, MovieMemError
from moviemem.backbones import ScriptedBackbone
from moviemem.serve.mcp import build_server

OLD = "1\n00:00:01,000 --> 00:00:03,000\nThe lighthouse keeper waits for the boat.\n"
NEW = "1\n00:00:01,000 --> 00:00:03,000\nThe harbour master counts the nets.\n"
USER, PASSWORD = "alice", "hunter2pass"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # what an HTTP Basic header carries


def _session(server: object, steps):
    """Run `steps(client)` over one MCP connection (the server stays up between its calls)."""

    async def go():
        async with Client(server) as client:
            return await steps(client)

    return anyio.run(go)


def _error(result) -> str:
    assert result.is_error, result
    return result.content[0].text


def _credentialed(srv: FakeOpenAI) -> str:
    return "openai-compatible:" + srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@") + "#m"


def _leaks(text: str) -> list[str]:
    return [s for s in (PASSWORD, BASIC, BASIC.rstrip("=")) if s in text]


# --- item 2: a running MCP server sees deletes and replacements, and saves nothing stale ------------

def test_item2_running_mcp_server_sees_replace_and_delete_and_saves_no_stale_answer(tmp_path: Path, cli, lib_dir) -> None:
    (tmp_path / "old.srt").write_text(OLD)
    (tmp_path / "new.srt").write_text(NEW)
    (tmp_path / "p2.srt").write_text(NEW)
    assert cli("ingest", "--text", str(tmp_path / "old.srt"), "--film-id", "p1").code == 0
    assert cli("ingest", "--text", str(tmp_path / "p2.srt"), "--film-id", "p2").code == 0
    server = build_server(Library(lib_dir))  # one library object for the server's whole life, as `moviemem mcp`

    async def steps(client):
        seen = {}

        async def search(query: str):
            return await client.call_tool("search", {"film_id": "p1", "query": query, "k": 1})

        seen["before"] = (await search("lighthouse keeper")).structured_content["evidence"][0]["text"]
        await client.call_tool("list_films", {})
        # another process replaces p1's subtitles, then deletes p1
        assert cli("ingest", "--text", str(tmp_path / "new.srt"), "--film-id", "p1", "--replace").code == 0
        seen["replaced"] = (await search("harbour master")).structured_content["evidence"][0]["text"]
        seen["range"] = (await client.call_tool("read_range", {"film_id": "p1", "start": 0, "end": 3})
                         ).structured_content["evidence"]
        assert cli("delete", "p1").code == 0
        seen["films"] = (await client.call_tool("list_films", {})).structured_content["films"]
        seen["deleted"] = _error(await search("harbour master"))
        seen["overview"] = _error(await client.call_tool("film_overview", {"film_id": "p1"}))
        return seen

    seen = _session(server, steps)
    assert "The lighthouse keeper waits for the boat." in seen["before"]
    assert "The harbour master counts the nets." in seen["replaced"]
    assert len(seen["range"]) == 1 and "The harbour master counts the nets." in seen["range"][0]["text"]
    assert [f["film_id"] for f in seen["films"]] == ["p2"]
    assert "'p1' is not in the library" in seen["deleted"] and "'p1' is not in the library" in seen["overview"]
    # the server saved no answer from before the delete: the CLI, after it, still knows p1 is gone
    res = cli("search", "p1", "harbour", "--json")
    assert res.code == 2 and "not in the library" in res.err
    films = cli("films", "--json")
    assert [f["film_id"] for f in films.json()["films"]] == ["p2"]


# --- items 5, 10, 11: judge output is redacted and the judge writes alone ---------------------------

def _open_run(tmp_path: Path) -> Path:
    from moviemem.agents.types import Answer
    from moviemem.backbones import user
    from moviemem.eval.formats import Benchmark, validate_rows
    from moviemem.eval.runner import run_bench

    def answerer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        return Answer(choice=None, text="because", confidence=None, invalid=False, policy=policy,
                      backbone=backbone.name, usage=reply.usage)

    rows = [(i + 1, {"id": f"o{i}", "film_id": "f", "question": f"Q{i}: why?", "reference": f"Because {i}."})
            for i in range(2)]
    run_bench(Benchmark("open", validate_rows(rows, "open", "o.jsonl"), "o.jsonl"), ["p"],
              [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run", answerer=answerer)
    return tmp_path / "run"


def test_item5_judge_output_has_no_url_credentials_or_echoed_keys(tmp_path: Path, cli, monkeypatch) -> None:
    key = "sk-judge-0123456789abcdef"
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", key)
    run = _open_run(tmp_path)
    with FakeOpenAI() as srv:
        # replies that are not the JSON scores: recorded as failed with their raw text, which echoes the key
        srv.push(*[FakeOpenAI.completion(f"no scores, but your key is {key} and you are {USER}:{PASSWORD}")] * 2)
        r = cli("judge", str(run), "--backbone", _credentialed(srv), "--cache", str(tmp_path / "cache"), "--json",
                library=False)
        assert r.code == 0, r.err
        rep = cli("report", str(run), "--no-inspector", library=False)
        assert rep.code == 0, rep.err
    rows = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["failed"] and "***" in row["raw"] for row in rows)
    assert rows[0]["judge"].startswith("openai-compatible:http://***@127.0.0.1")
    for text in [r.out, r.err, rep.out, rep.err, (run / "judge.jsonl").read_text(), (run / "report.md").read_text()]:
        assert not _leaks(text) and key not in text
    assert "http://***@127.0.0.1" in (run / "report.md").read_text()  # the judge table names the judge, redacted


def test_item11_judge_holds_the_run_directory_as_its_only_writer(tmp_path: Path) -> None:
    from filelock import FileLock

    from moviemem.eval.judge import RUBRICS, judge_run
    from moviemem.eval.log import JUDGE

    run = _open_run(tmp_path)
    judge = ScriptedBackbone([json.dumps({c: 3 for c in RUBRICS["open"]})], cycle=True, name="grader")
    with FileLock(str(run / ".writer.lock")):  # a bench or another judge holds the directory
        with pytest.raises(MovieMemError, match="another bench or judge is writing to"):
            judge_run(run, judge)
        assert judge.calls == [] and not (run / JUDGE).exists()
    # two judges at once: one judges, the other is refused, and nothing is judged twice
    started, results = threading.Barrier(2), []

    def one() -> None:
        started.wait()
        try:
            results.append(judge_run(run, ScriptedBackbone(_slow_scores, name="grader")))
        except MovieMemError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(type(r).__name__ for r in results) == ["dict", "str"], results
    assert "another bench or judge is writing to" in next(r for r in results if isinstance(r, str))
    assert len((run / JUDGE).read_text().splitlines()) == 2  # one judgement per answer


def _slow_scores(request) -> str:
    import time

    from moviemem.eval.judge import RUBRICS

    time.sleep(0.2)  # long enough for the other judge to try while this one writes
    return json.dumps({c: 3 for c in RUBRICS["open"]})


def test_item10_basic_auth_echo_is_redacted_in_results_inspector_cache_and_stderr(tmp_path: Path, cli) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(OLD)
    assert cli("ingest", "--text", str(srt), "--film-id", "a").code == 0
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(json.dumps({"id": f"q{i}", "film_id": "a", "question": "Who waits?",
                                         "options": ["The keeper", "Anna"], "answer": "A"}) + "\n" for i in range(2)))
    run = tmp_path / "run"
    with FakeOpenAI() as srv:
        srv.push(FakeOpenAI.completion(f'{{"answer": "A"}} (you sent Authorization: Basic {BASIC})'),
                 FakeResponse(400, {"error": {"message": f"bad request from Basic {BASIC}"}}))
        r = cli("bench", str(bench), "--policies", "closed-book", "--backbones", _credentialed(srv), "--out", str(run),
                "--cache", str(tmp_path / "cache"), "--json")
        assert r.code == 0, r.err
        assert srv.calls("chat")[0].headers["authorization"] == f"Basic {BASIC}"  # the echo is real
        rep = cli("report", str(run), library=False)
        assert rep.code == 0, rep.err
    written = [p for p in [*run.rglob("*"), *(tmp_path / "cache").rglob("*")] if p.is_file()]
    assert {"results.jsonl", "index.html"} <= {p.name for p in written} and any(p.suffix == ".sqlite" for p in written)
    assert "Basic ***" in (run / "results.jsonl").read_text()
    for text in [r.out, r.err, rep.out, rep.err, *(p.read_bytes().decode("utf-8", "replace") for p in written)]:
        assert not _leaks(text), _leaks(text)


def test_item10_every_encoded_form_of_a_known_secret_is_redacted() -> None:
    from urllib.parse import quote

    from moviemem.backbones.retry import redact

    secret = 'p@ss/wo"rd+?>'
    for form in (secret, base64.b64encode(secret.encode()).decode(), base64.urlsafe_b64encode(secret.encode()).decode(),
                 quote(secret, safe=""), json.dumps(secret)[1:-1]):
        assert form not in redact(f"echo: {form}.", [secret]) and "***" in redact(f"echo: {form}.", [secret])


# --- item 6: the MCP ask tool never shows URL credentials -----------------------------------------

def test_item6_mcp_ask_description_and_errors_hide_url_credentials(tmp_path: Path, cli, lib_dir) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(OLD)
    assert cli("ingest", "--text", str(srt), "--film-id", "a").code == 0
    spec = f"openai-compatible:http://{USER}:{PASSWORD}@127.0.0.1:9/v1#m"
    server = build_server(Library(lib_dir), backbones=[spec, "scripted:A"])

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool("ask", {"film_id": "a", "question": "Who?", "backbone": "nope"})
        own = await client.call_tool("ask", {"film_id": "a", "question": "Who?", "backbone": "scripted:A",
                                            "policy": "closed-book"})
        return tools["ask"], refused, own

    ask, refused, own = _session(server, steps)
    shown = json.dumps(ask.model_dump(mode="json"))
    assert PASSWORD not in shown and USER not in shown and "openai-compatible:http://***@127.0.0.1:9/v1#m" in shown
    message = _error(refused)
    assert "is not offered by this server" in message and PASSWORD not in message and USER not in message
    assert not own.is_error  # the other backbones are still offered by their names


# --- item 13: report.md shows HTML from the data as text -------------------------------------------

def test_item13_report_md_escapes_html_from_the_data(tmp_path: Path) -> None:
    from moviemem.agents.types import Answer
    from moviemem.eval.formats import Benchmark, validate_rows
    from moviemem.eval.report import write_report
    from moviemem.eval.runner import run_bench

    def answerer(film_id, query, policy, backbone):
        return Answer(choice="A", text="A", confidence=None, invalid=False, policy=policy, backbone=backbone.name)

    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": "<i>Who</i>?", "options": ["x", "y"], "answer": "A",
                     "category": cat}) for i, cat in enumerate(["<b>cat</b>", "<script>alert(1)</script>"])]
    run_bench(Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl"), ["p"],
              [ScriptedBackbone(["A"], cycle=True, name="<img src=x onerror=alert(1)>")], tmp_path / "run",
              answerer=answerer)
    report = write_report(tmp_path / "run", inspector=False)["report"].read_text()
    assert "&lt;b&gt;cat&lt;/b&gt;" in report and "&lt;script&gt;" in report
    assert "<b>" not in report and "<script>" not in report and "<img" not in report


# --- item 14: the gateway answers absurd JSON with 400 ----------------------------------------------

@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000,
                                  json.dumps({"messages": [{"role": "user", "content": "hi"}]})[:-1].encode()
                                  + b', "max_tokens": 1e400}',
                                  b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'])
def test_item14_gateway_answers_deep_nesting_and_infinite_numbers_with_400(body: bytes, caplog) -> None:
    from moviemem.backbones.gateway import start_gateway

    backbone = ScriptedBackbone(["B"], cycle=True)
    with start_gateway(backbone, None) as gw:
        r = httpx.post(f"{gw.base_url}/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text
    assert backbone.calls == [] and "Traceback" not in caplog.text


# --- item 15: a NUL byte in a path is a clear error, never a traceback ------------------------------

def test_item15_mcp_ingest_path_with_nul_byte_is_a_tool_error(tmp_path: Path, lib_dir, capfd) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    server = build_server(Library(lib_dir), allow_ingest=True, ingest_dir=inbox)

    async def steps(client):
        return await client.call_tool("ingest_text", {"path": "a\x00.srt"})

    message = _error(_session(server, steps))
    assert message.endswith("ingest_text: path holds a NUL byte; no file is named so")  # not a bare "Error executing tool"
    assert "Traceback" not in capfd.readouterr().err


def test_item15_inspector_answers_a_nul_byte_path_without_a_traceback(tmp_path: Path, capfd) -> None:
    from moviemem.cli.bench import InspectorFiles

    (tmp_path / "index.html").write_text("<p>ok</p>")
    handler = functools.partial(InspectorFiles, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=10)
        conn.request("GET", "/%00")
        status = conn.getresponse().status
        conn.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert status in (400, 404)
    assert "Traceback" not in capfd.readouterr().err


# --- item 16: MCP errors never name another film's source --------------------------------------------

def test_item16_mcp_error_does_not_reveal_another_films_source_path(tmp_path: Path, lib_dir) -> None:
    private = tmp_path / "private" / "secret-film-name.srt"
    private.parent.mkdir()
    private.write_text(OLD)
    Library(lib_dir).ingest_text(private, film_id="taken")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "mine.srt").write_text(NEW)
    server = build_server(Library(lib_dir), allow_ingest=True, ingest_dir=inbox)

    async def steps(client):
        return await client.call_tool("ingest_text", {"path": "mine.srt", "film_id": "taken"})

    message = _error(_session(server, steps))
    assert "already holds another source" in message
    assert "secret-film-name" not in message and str(private.parent) not in message
