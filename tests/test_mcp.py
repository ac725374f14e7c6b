"""`moviemem mcp`: the film memory as MCP tools, driven by the official SDK's client over stdio,
over streamable HTTP on 127.0.0.1 and in-process; argument checks come back as tool errors."""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import make_video
from events_rows import add_truth_events
from mcp import Client, StdioServerParameters
from PIL import Image

from moviemem import Library
from moviemem.foundation.config import get_settings
from moviemem.serve.mcp import HttpServer, build_server

SRT = ("1\n00:00:01,000 --> 00:00:02,500\nThe lighthouse keeper waits for the boat.\n\n"
       "2\n00:00:03,000 --> 00:00:05,000\nAnna rows the boat to the island.\n")
TRUTH = {"events": [
    {"id": "e1", "key": "wait", "description": "The keeper waits at the lighthouse.", "start": 1.0, "end": 2.5, "story_order": 0},
    {"id": "e2", "key": "storm", "description": "A storm breaks the boat's mast.", "start": 2.5, "end": 3.0, "story_order": 1},
    {"id": "e3", "key": "row", "description": "Anna rows to the island.", "start": 3.0, "end": 5.0, "story_order": 2},
], "relations": [{"src": "e1", "dst": "e2", "type": "before"}, {"src": "e2", "dst": "e3", "type": "causal"}]}
TOOLS = {"list_films", "film_overview", "scenes", "search", "read_range", "frames", "graph", "ask"}


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Library:
    """A 6 s video film (strip frames, subtitles, a 3-event graph) and a film without video."""
    root = tmp_path_factory.mktemp("mcp")
    srt = root / "clip.srt"
    srt.write_text(SRT)
    lib = Library(root / "lib", get_settings(library=root / "lib"))
    lib.ingest(make_video(root / "clip.mp4"), film_id="clip", title="Clip", subtitles=srt, stages=["frames", "transcript"])
    add_truth_events(lib, "clip", TRUTH)
    (root / "talk.srt").write_text("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n")
    lib.ingest_text(root / "talk.srt", film_id="talk", title="Talk")
    return lib


def call(server: object, name: str, args: dict | None = None):
    """One tool call through the SDK client (in-process server, URL or stdio parameters)."""

    async def go():
        async with Client(server) as client:
            return await client.call_tool(name, args or {})

    return anyio.run(go)


def error(result) -> str:
    assert result.is_error, result
    return result.content[0].text


def contract_calls(server: object) -> dict:
    """The two contract tools and a frame, over one connection."""

    async def go():
        async with Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            films = await client.call_tool("list_films", {})
            found = await client.call_tool("search", {"film_id": "clip", "query": "lighthouse boat", "k": 2,
                                                           "kinds": ["utterance"]})
            frames = await client.call_tool("frames", {"film_id": "clip", "times": [4.2]})
            bad = await client.call_tool("search", {"film_id": "nope", "query": "x"})
            return {"names": names, "films": films, "found": found, "frames": frames, "bad": bad}

    return anyio.run(go)


def check_contract(got: dict) -> None:
    assert TOOLS <= got["names"] and "ingest_text" not in got["names"]
    assert json.loads(got["films"].content[0].text) == {"films": [
        {"film_id": "clip", "title": "Clip", "duration_s": 6.0}, {"film_id": "talk", "title": "Talk", "duration_s": 7.0}]}
    ev = got["found"].structured_content["evidence"]
    assert len(ev) == 2 and ev[0]["id"] == "utterance:0" and ev[0]["text"] == "The lighthouse keeper waits for the boat."
    assert set(ev[0]) >= {"id", "kind", "start", "end", "text"} and (ev[0]["start"], ev[0]["end"]) == (1.0, 2.5)
    listing, image = got["frames"].content
    assert json.loads(listing.text) == {"frames": [{"requested": 4.2, "t": 4.0, "frame_idx": 96}]}
    assert image.mime_type == "image/jpeg" and Image.open(io.BytesIO(base64.b64decode(image.data))).size == (320, 240)
    assert "'nope' is not in the library" in error(got["bad"])


def test_stdio_transport(lib: Library) -> None:
    env = dict(os.environ)  # PYTHONPATH and MOVIEMEM_* as this test process has them
    params = StdioServerParameters(command=sys.executable, args=["-m", "moviemem.cli", "mcp", "--library", lib.path,
                                                                 "--backbone", "scripted"], env=env)
    check_contract(contract_calls(params))


def test_http_transport_and_cross_origin_refusal(lib: Library) -> None:
    with HttpServer(build_server(lib, backbones=["scripted"])) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        check_contract(contract_calls(srv.url))
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        head = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        for bad in ({"origin": "http://evil.example"}, {"host": "evil.example"}, {"origin": "null"},
                    {"host": f"rebind.example:{srv.port}", "origin": f"http://127.0.0.1:{srv.port}"}):
            r = httpx.post(srv.url, json=body, headers={**head, **bad})
            assert r.status_code == 403, (bad, r.status_code)
        ok = httpx.post(srv.url, json=body, headers={**head, "origin": f"http://localhost:{srv.port}"})
        assert ok.status_code != 403


def test_tools_answer_from_the_memory(lib: Library) -> None:
    srv = build_server(lib, backbones=["scripted"])
    over = call(srv, "film_overview", {"film_id": "clip"}).structured_content
    assert over["duration_s"] == 6.0 and over["counts"]["utterances"] == 2 and over["counts"]["events"] == 3
    read = call(srv, "read_range", {"film_id": "clip", "start": 2.0, "end": 6.0}).structured_content
    assert [e["id"] for e in read["evidence"]] == ["utterance:0", "utterance:1"] and not read["truncated"]
    assert [e["id"] for e in call(srv, "read_range", {"film_id": "clip", "start": 2.6, "end": 6.0, "kinds": ["event"]})
            .structured_content["evidence"]] == ["event:e2", "event:e3"]
    # until hides what is shown later; a window keeps only what overlaps it
    early = call(srv, "search", {"film_id": "clip", "query": "Anna, the keeper and the boat", "until": 2.6}).structured_content
    assert {e["id"] for e in early["evidence"]} == {"utterance:0", "event:e1"}
    late = call(srv, "search", {"film_id": "clip", "query": "boat", "start": 3.0, "end": 6.0, "kinds": ["utterance"]})
    assert [e["id"] for e in late.structured_content["evidence"]] == ["utterance:1"]
    g = call(srv, "graph", {"film_id": "clip", "op": "causes", "event": "e3"}).structured_content
    assert [e["id"] for e in g["events"]] == ["e2"]
    assert [e["id"] for e in call(srv, "graph", {"film_id": "clip", "op": "chain", "event": "e2", "target": "e3"})
            .structured_content["events"]] == ["e2", "e3"]
    assert [e["id"] for e in call(srv, "graph", {"film_id": "clip", "op": "story_order"}).structured_content["events"]] \
        == ["e1", "e2", "e3"]
    # the table of contents: scenes in screen order, those over by `until`, those overlapping a window
    sc = call(srv, "scenes", {"film_id": "talk"}).structured_content
    assert sc["total"] == 1 and sc["scenes"][0]["scene"] == 1 and "Williams" in sc["scenes"][0]["summary"]
    assert call(srv, "scenes", {"film_id": "talk", "until": 6.0}).structured_content["total"] == 0
    assert call(srv, "scenes", {"film_id": "talk", "start": 0.0, "end": 4.0}).structured_content["scenes"] == []
    ans = call(srv, "ask", {"film_id": "clip", "question": "Where does Anna row?", "policy": "subtitles"}).structured_content
    assert ans["policy"] == "subtitles" and ans["backbone"] == "scripted" and not ans["invalid"]
    assert {e["id"] for e in ans["evidence"]} == {"utterance:0", "utterance:1"} and "trace" not in ans


def test_ask_reports_progress_while_the_policy_works(lib: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer sends each step as an MCP progress notification, and the step under way again while a
    long one lasts, so a client that restarts its time limit on progress keeps waiting; the tool's
    description says answers take minutes (issue 48: an open question died at the client's 60 s)."""
    from moviemem.serve import film_tools
    from moviemem.serve import mcp as mcp_server

    srv = build_server(lib, backbones=["scripted"])
    args = {"film_id": "clip", "question": "Where does Anna row?", "policy": "subtitles"}

    def ask() -> tuple[object, object, list[tuple[float, str | None]]]:
        got: list[tuple[float, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            got.append((done, message))

        async def go():
            async with Client(srv) as client:
                tool = next(t for t in (await client.list_tools()).tools if t.name == "ask")
                return tool, await client.call_tool("ask", args, progress_callback=progress)

        tool, result = anyio.run(go)
        return tool, result, got

    tool, result, got = ask()
    assert not result.is_error and "minutes" in tool.description and "ctx" not in tool.input_schema["properties"]
    assert [n for n, _ in got] == list(range(1, len(got) + 1))  # progress only grows
    assert any(m and m.startswith("reading prompt subtitles (about ") for _, m in got), got
    real = film_tools.ask
    monkeypatch.setattr(mcp_server, "PROGRESS_EVERY_S", 0.1)
    monkeypatch.setattr(film_tools, "ask", lambda *a, **kw: (time.sleep(0.8), real(*a, **kw))[1])  # a slow first step
    _, result, got = ask()
    assert not result.is_error and any(m and m.startswith("answering (") and m.endswith(" s so far)") for _, m in got), got


@pytest.mark.parametrize(("tool", "args", "message"), [
    ("film_overview", {"film_id": "../../etc"}, "invalid film id"),
    ("film_overview", {"film_id": "missing"}, "'missing' is not in the library"),
    ("search", {"film_id": "clip", "query": "x", "k": 0}, "k must be between 1 and 100"),
    ("search", {"film_id": "clip", "query": "x", "k": 101}, "k must be between 1 and 100"),
    ("search", {"film_id": "clip", "query": "   "}, "query is empty"),
    ("search", {"film_id": "clip", "query": "x" * 2001}, "at most 2000"),
    ("search", {"film_id": "clip", "query": "x", "kinds": ["frame"]}, "unknown kind 'frame'"),
    ("search", {"film_id": "clip", "query": "x", "start": 4.0, "end": 2.0}, "empty time window"),
    ("search", {"film_id": "clip", "query": "x", "end": 1e300}, "outside the film"),
    ("search", {"film_id": "clip", "query": "x", "until": 0}, "outside the film"),
    ("read_range", {"film_id": "clip", "start": -3, "end": 2}, "outside the film"),
    ("scenes", {"film_id": "talk", "start": 4.0, "end": 2.0}, "empty time window"),
    ("scenes", {"film_id": "talk", "until": 1e300}, "outside the film"),
    ("frames", {"film_id": "clip", "times": list(range(9))}, "at most 8 frames"),
    ("frames", {"film_id": "clip", "times": []}, "1 or more times"),
    ("frames", {"film_id": "talk", "times": [1.0]}, "has no stored frames"),
    ("graph", {"film_id": "clip", "op": "causes"}, "needs event"),
    ("graph", {"film_id": "clip", "op": "causes", "event": "e9"}, "no event 'e9'"),
    ("graph", {"film_id": "talk", "op": "flashbacks", "until": 99.0}, "outside the film"),
    ("ask", {"film_id": "clip", "question": "Why?", "backbone": "llamacpp:/etc/passwd"}, "is not offered by this server"),
    ("ask", {"film_id": "clip", "question": "Why?", "policy": "nope"}, "unknown policy 'nope'"),
])
def test_bad_arguments_are_tool_errors(lib: Library, tool: str, args: dict, message: str) -> None:
    assert message in error(call(build_server(lib, backbones=["scripted"]), tool, args))


def test_frames_read_only_files_inside_the_library(lib: Library, tmp_path: Path) -> None:
    """A frame row pointing outside the library (a tampered or foreign table) is refused, not read."""
    from moviemem.memory.schema import FrameRow

    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"not for clients")
    other = Library(tmp_path / "copy", lib.settings)
    other.import_bundle(lib.export("clip", tmp_path / "clip.tar"))
    rows = other.store.rows("frames")
    other.store.delete("frames", "film_id = 'clip'")
    escape = os.path.relpath(outside, other.store.root)
    assert escape.startswith("..")
    other.store.append([FrameRow(**{**r.model_dump(), "image": escape}) for r in rows])
    assert "not a file inside the library" in error(call(build_server(other), "frames", {"film_id": "clip", "times": [1.0]}))


def test_no_write_tool_unless_allowed_and_ingest_stays_in_its_folder(lib: Library, tmp_path: Path) -> None:
    srv = build_server(Library(tmp_path / "lib", lib.settings))
    assert "ingest_text" not in {t.name for t in anyio.run(_tools, srv)} and "ask" not in {t.name for t in anyio.run(_tools, srv)}
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.srt").write_text(SRT)
    (tmp_path / "outside.srt").write_text(SRT)
    writable = build_server(Library(tmp_path / "lib", lib.settings), allow_ingest=True, ingest_dir=inbox)
    assert "../outside.srt" in error(call(writable, "ingest_text", {"path": "../outside.srt"}))
    assert "is not a file under" in error(call(writable, "ingest_text", {"path": str(tmp_path / "outside.srt")}))
    made = call(writable, "ingest_text", {"path": "a.srt", "film_id": "a", "title": "A"}).structured_content
    assert made == {"film_id": "a", "title": "A", "duration_s": 5.0}
    assert call(writable, "list_films").structured_content["films"][0]["film_id"] == "a"


async def _tools(server: object) -> list:
    async with Client(server) as client:
        return (await client.list_tools()).tools


def test_cli_refuses_a_missing_library(cli, lib: Library, tmp_path: Path) -> None:
    res = cli("mcp", "--library", str(tmp_path / "nowhere"), library=False)
    assert res.code == 2 and "no library at" in res.err
    res = cli("mcp", "--library", lib.path, "--ingest-dir", str(tmp_path), library=False)
    assert res.code == 2 and "--ingest-dir needs --allow-ingest" in res.err


def test_resources_and_prompts(lib: Library) -> None:
    srv = build_server(lib)

    async def go():
        async with Client(srv) as client:
            films = await client.read_resource("moviemem://films")
            one = await client.read_resource("moviemem://films/clip")
            prompt = await client.get_prompt("mcq", {"film_id": "clip", "question": "Who rows?", "options": "Anna|Bob"})
            try:
                await client.read_resource("moviemem://films/nope")
                missing = None
            except Exception as exc:  # noqa: BLE001 - the SDK raises its protocol error here
                missing = str(exc)
            return films, one, prompt, missing

    films, one, prompt, missing = anyio.run(go)
    assert [f["film_id"] for f in json.loads(films.contents[0].text)["films"]] == ["clip", "talk"]
    assert json.loads(one.contents[0].text)["counts"]["events"] == 3
    text = prompt.messages[0].content.text
    assert "A. Anna\nB. Bob" in text and "film clip" in text
    assert missing is not None and "'nope' is not in the library" in missing
