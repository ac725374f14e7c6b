"""Issue 62, item 1: no credential leaves the process, whatever field of a reply it arrives in and
wherever a cut falls. A loopback upstream (fake_servers.EchoAuthOpenAI) echoes the Authorization header
it was sent through each field a reply has (text, finish_reason, tool-call names and arguments, error
bodies of 401, 400 and 500 with the echo at every offset around describe()'s 300-character cut), and
every way out is searched for the key, the password, the Basic header's base64 and any run of
FRAGMENT characters of them: the backbone's reply and errors, `ask` (plain, --json, the archival
policy's tool loop), the MCP `ask` tool, the gateway `serve` runs (whole and streamed), and `bench`
(its stdout, stderr and every file of its run folder, report.md included) and the replay cache."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fake_servers import EchoAuthOpenAI
from mcp import Client

from moviemem import Library

FRAGMENT = 6  # the README's promise: no run of six characters of a secret is shown
KEY = "sk-test-SECRETk9Qz7Lw2Xv4Rb8TnJ5"
USER, PASSWORD = "alice", "pw-Hq3Zx8Vc5NmW"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SECRETS = (KEY, PASSWORD, BASIC.rstrip("="))
SRT = ("1\n00:00:01,000 --> 00:00:03,000\nThe lighthouse keeper waits for the boat.\n\n"
       "2\n00:00:04,000 --> 00:00:06,000\nAnna rows out at dawn.\n")
FIELDS: list[str | int] = ["text", "empty", "tool_name", "tool_arguments", 401, 400, 500]
STATUSES = (401, 400, 500)
# describe() keeps 300 characters of "Error code: 401 - {'error': {'message': '" (41) + the body's message, whose
# echo ("Bearer KEY KEY" or "Basic BASE64 alice:PASSWORD", under 75 characters) starts `offset` characters in:
# from 180 to 260 every secret in it starts before the cut and ends after it at one offset or another
OFFSETS = range(180, 261)
ACROSS_CUT = 240  # an offset that puts the key (Bearer) and the Basic value (Basic) across the cut


def _leaks(text: str) -> list[str]:
    """Every run of FRAGMENT characters of a secret found in `text`."""
    return sorted({s[i:i + FRAGMENT] for s in SECRETS for i in range(len(s) - FRAGMENT + 1) if s[i:i + FRAGMENT] in text})


def _assert_clean(what: str, text: str) -> None:
    assert not _leaks(text), f"{what} shows {_leaks(text)}: {text[:3000]}"


@pytest.fixture(autouse=True)
def _quick_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """One attempt per call (a 500 is not retried for seconds) and the key in the environment (conftest
    forgets the credentials a test registers)."""
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)
    monkeypatch.setenv("MOVIEMEM_BACKBONE_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("MOVIEMEM_BACKBONE_RETRY_INITIAL_S", "0")


@pytest.fixture
def upstream() -> Iterator[EchoAuthOpenAI]:
    with EchoAuthOpenAI() as srv:
        yield srv


def _specs(srv: EchoAuthOpenAI) -> dict[str, str]:
    """The upstream behind a URL with user:password (the SDK sends them as a Basic header) and without
    (the key goes as a Bearer token)."""
    return {"basic": "openai-compatible:" + srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@") + "#m",
            "bearer": f"openai-compatible:{srv.base_url}#m"}


def _reply_text(reply: Any) -> str:
    return json.dumps({"text": reply.text, "error": reply.error, "raw": reply.raw, "finish": reply.finish_reason,
                       "model": reply.model, "data": reply.data,
                       "calls": [[c.id, c.name, c.arguments, c.signature] for c in reply.tool_calls]})


def test_the_echo_is_real(upstream: EchoAuthOpenAI) -> None:
    """Each spec sends the credential this test looks for, and the fake echoes it back."""
    from moviemem.backbones import load
    from moviemem.backbones.types import Request

    specs = _specs(upstream)
    for spec in specs.values():
        load(spec, cache=False).send(Request.build("Who waits?"))
    sent = [r.headers["authorization"] for r in upstream.calls("chat")]
    assert sent == [f"Basic {BASIC}", f"Bearer {KEY}"]


@pytest.mark.parametrize("how", ["basic", "bearer"])
def test_every_field_and_every_offset_of_a_reply_is_scrubbed(upstream: EchoAuthOpenAI, how: str) -> None:
    """A backbone's reply and errors, field by field, with error bodies cut at every offset."""
    from moviemem.backbones import load
    from moviemem.backbones.types import Request
    from moviemem.foundation.errors import MovieMemError

    bb = load(_specs(upstream)[how], cache=False)
    request = Request.build("Who waits?", tools=[{"name": EchoAuthOpenAI.TOOL, "parameters": {"type": "object"}}])
    # the error line is made alike for the three statuses (raised for 401, an invalid reply for 400 and 500):
    # every offset is tried once, the statuses in turn
    cases = [(field, 0) for field in FIELDS if isinstance(field, str)] + [(STATUSES[o % 3], o) for o in OFFSETS]
    for field, offset in cases:
        upstream.field, upstream.offset = field, offset
        try:
            shown = _reply_text(bb.send(request))
        except MovieMemError as exc:
            shown = str(exc)
        _assert_clean(f"{field} at {offset}", shown)
    upstream.field = "empty"
    empty = bb.send(Request.build("Who?"))
    assert empty.invalid and (empty.error or "").endswith(" ***)")  # the error quotes the scrubbed reason


def test_scrub_takes_every_fragment_and_no_ordinary_word() -> None:
    from moviemem.foundation import secrets

    secrets.register(KEY)
    secrets.register_url(f"http://{USER}:{PASSWORD}@host/v1")
    for cut in range(len(KEY) - FRAGMENT + 1):
        for piece in (KEY[:len(KEY) - cut], KEY[cut:], KEY[cut // 2:len(KEY) - cut // 2]):
            if len(piece) >= FRAGMENT:
                _assert_clean(f"piece {piece}", secrets.scrub(f"error: {piece}..."))
    text = "alice: the keeper waits; passwords, keys and tests run together"
    assert secrets.scrub(text) == text  # the user name and ordinary words stay
    assert secrets.scrub(f"Basic {BASIC} {USER}:{PASSWORD}") == "Basic *** ***"


def test_the_gateway_scrubs_every_reply_and_error_body(upstream: EchoAuthOpenAI) -> None:
    """`serve`: whole and streamed replies, and the 400/502 bodies of upstream failures at every offset."""
    from moviemem.backbones import start_gateway

    for how, spec in _specs(upstream).items():
        with start_gateway(spec, embedder=None) as gw:
            model = httpx.get(f"{gw.base_url}/models", timeout=30).json()["data"][0]["id"]
            for field in FIELDS:
                for offset in (ACROSS_CUT - 25, ACROSS_CUT, ACROSS_CUT + 15) if isinstance(field, int) else [0]:
                    upstream.field, upstream.offset = field, offset
                    for stream in (False, True) if isinstance(field, str) else (False,):  # an error is never streamed
                        body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "Who?"}]}
                        r = httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=30)
                        _assert_clean(f"serve {how} {field} at {offset} (stream {stream}): {r.status_code}", r.text)
            assert r.status_code == 502  # the last, an upstream 500, is the gateway's upstream error


def test_ask_mcp_and_bench_show_no_secret(tmp_path: Path, cli, lib_dir: Path, upstream: EchoAuthOpenAI,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """`ask` (plain and --json, closed-book and the archival tool loop), the MCP ask tool, and `bench`
    with its run folder and report: every output and every file written is searched."""
    from moviemem.serve.mcp import build_server

    (tmp_path / "a.srt").write_text(SRT)
    assert cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a").code == 0
    shown: dict[str, str] = {}
    caplog.set_level(logging.WARNING)
    upstream.offset = ACROSS_CUT
    specs = _specs(upstream)
    for n, (field, how) in enumerate([(f, h) for f in ("text", "empty", *STATUSES) for h in specs]):
        upstream.field = field  # a new question each time: no reply comes from the replay cache
        r = cli("ask", "a", f"Who waits ({n})?", "--kind", "open", "--policy", "closed-book", "--backbone", specs[how],
                *(["--json"] if n % 4 < 2 else []))  # each field, plain and --json, over the two specs
        shown[f"ask {how} {field} json={n % 4 < 2}"] = r.out + r.err
    for how, spec in specs.items():
        upstream.field = ["tool_name", "tool_arguments", "text"]
        r = cli("ask", "a", f"Who rows ({how})?", "--kind", "open", "--policy", "archival", "--backbone", spec, "--json")
        shown[f"ask archival {how}"] = r.out + r.err
        assert r.code == 0 and "unknown tool '" in r.out, r.out + r.err  # the loop ran and met the echoed name

    async def mcp_ask(spec: str, fields: list[str | int]) -> list[str]:
        async with Client(build_server(Library(lib_dir), backbones=[spec])) as client:
            replies = []
            for i, field in enumerate(fields):
                upstream.field = field
                reply = await client.call_tool("ask", {"film_id": "a", "question": f"Who ({i}, {spec})?", "kind": "open",
                                                       "policy": "closed-book"})
                replies.append(json.dumps(reply.model_dump(mode="json")))
            return replies

    for how, spec in specs.items():
        fields: list[str | int] = [401, "text", 400]
        shown.update({f"mcp {how} {f}": text for f, text in zip(fields, anyio.run(mcp_ask, spec, fields))})
        assert '"is_error": true' in shown[f"mcp {how} 401"], shown[f"mcp {how} 401"]

    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"o{i}", "film_id": "a", "question": f"Who waits, {i}?",
                                         "reference": "The keeper."}) + "\n" for i in range(5)))
    for how, spec in specs.items():
        run = tmp_path / f"run-{how}"
        upstream.field = ["text", "empty", 400, 500, "tool_name"]
        r = cli("bench", str(items), "--policies", "closed-book", "--backbones", spec, "--out", str(run), "--json")
        shown[f"bench {how}"] = r.out + r.err
        assert r.code == 0, r.err
        rep = cli("report", str(run), library=False)
        assert rep.code == 0 and (run / "report.md").is_file(), rep.err
        shown[f"report {how}"] = rep.out + rep.err
    upstream.field = 401
    items.write_text(json.dumps({"id": "r", "film_id": "a", "question": "Who rows?", "reference": "Anna."}) + "\n")
    r = cli("bench", str(items), "--policies", "closed-book", "--backbones", specs["bearer"], "--out",
            str(tmp_path / "run-401"), "--json")
    shown["bench 401"] = r.out + r.err
    assert r.code == 0 and "HTTP 401" in (tmp_path / "run-401" / "results.jsonl").read_text(), r.err  # an invalid item
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"results.jsonl", "run.json", "report.md"} <= {p.name for p in files}
    shown.update({str(p): p.read_bytes().decode("utf-8", "replace") for p in files})
    shown["log"] = caplog.text
    for what, text in shown.items():
        _assert_clean(what, text)
    assert "***" in shown["ask basic text json=True"] and "***" in shown["mcp bearer 401"]  # the echoes did arrive


def test_a_finaliser_that_logs_inside_the_scrubber_does_not_wait_on_itself() -> None:
    """The garbage collector can run a finaliser while scrub holds its lock on this thread (google-genai's Client
    closing its HTTP pool logs a debug line, and the log record is scrubbed): that inner scrub must not block."""
    import threading

    from moviemem.foundation import secrets

    secrets.register("sk-finaliser-secret-123456")
    got: list[str] = []

    def inner() -> None:
        with secrets._lock:  # noqa: SLF001 - the lock a finaliser would find held
            got.append(secrets.scrub("key sk-finaliser-secret-123456 in a log line"))

    t = threading.Thread(target=inner, daemon=True)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive() and got == ["key *** in a log line"]
