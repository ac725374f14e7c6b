"""Issue 54, a hostile audit of main (items 1, 2, 3, 7, 8, 9 and the low ones): echoed credentials,
config files that redirect data, untrusted bundles, symlinks out of a collection, damaged search
packs, bounds that sizes and settings slipped past, slow clients and stray file types."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fake_servers import FakeOpenAI, Recorded
from mcp import Client
from test_audit_data import _edit_table
from test_hostile_input import _exported

from moviemem import Library

SRT = ("1\n00:00:01,000 --> 00:00:03,000\nThe lighthouse keeper waits for the boat.\n\n"
       "2\n00:00:04,000 --> 00:00:06,000\nAnna rows out at dawn.\n")
KEY = "sk-test-SECRET-0123456789"
USER, PASSWORD = "alice", "hunter2pass"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class EchoAuth(FakeOpenAI):
    """Answers every chat call with the Authorization header it was sent and the key, padded so that
    the key straddles a trace's 2,000-character cut."""

    def _echo(self, rec: Recorded) -> dict[str, Any]:
        return self.completion("x" * 1990 + f" {KEY} {rec.headers.get('authorization')} key={KEY}")


def _leaks(text: str) -> list[str]:
    return [s for s in (KEY, KEY[:10], PASSWORD, BASIC, BASIC.rstrip("=")) if s in text]


def _files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


# --- item 1: an echoed key or URL password reaches no user, client or file --------------------------

def test_item1_echoed_credentials_are_scrubbed_from_every_channel(tmp_path: Path, cli, lib_dir, monkeypatch) -> None:
    from moviemem.backbones import start_gateway
    from moviemem.serve.mcp import build_server

    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)
    (tmp_path / "a.srt").write_text(SRT)
    assert cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a").code == 0
    with EchoAuth() as srv:
        spec = "openai-compatible:" + srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@") + "#m"
        shown = [cli("ask", "a", "Who waits?", "--kind", "open", "--policy", "closed-book", "--backbone", spec, "--json")]
        shown.append(cli("ask", "a", "Who waits?", "--kind", "open", "--policy", "closed-book", "--backbone", spec))
        assert srv.calls("chat")[0].headers["authorization"] in (f"Basic {BASIC}", f"Bearer {KEY}")  # the echo is real

        async def steps(client: Client) -> Any:
            return await client.call_tool("ask", {"film_id": "a", "question": "Who waits?", "backbone": spec,
                                                  "policy": "closed-book", "kind": "open"})

        async def go() -> Any:
            async with Client(build_server(Library(lib_dir), backbones=[spec])) as client:
                return await steps(client)

        mcp_reply = anyio.run(go)
        bench = tmp_path / "b.jsonl"
        bench.write_text(json.dumps({"id": "o1", "film_id": "a", "question": "Who waits?", "reference": "The keeper."}) + "\n")
        shown.append(cli("bench", str(bench), "--policies", "closed-book", "--backbones", spec, "--out", str(tmp_path / "run"),
                         "--json"))
        assert shown[-1].code == 0, shown[-1].err
        with start_gateway(spec, embedder=None) as gw:
            model = httpx.get(f"{gw.base_url}/models", timeout=30).json()["data"][0]["id"]
            served = httpx.post(f"{gw.base_url}/chat/completions", timeout=30,
                                json={"model": model, "messages": [{"role": "user", "content": "Who?"}]}).text
    texts = [*(r.out + r.err for r in shown), json.dumps(mcp_reply.model_dump(mode="json")), served,
             *(p.read_bytes().decode("utf-8", "replace") for p in _files(lib_dir, tmp_path / "run"))]
    assert "***" in shown[0].out and "***" in served
    for text in texts:
        assert not _leaks(text), _leaks(text)


# --- item 2: a moviemem.toml in the current folder redirects nothing -------------------------------

def test_item2_a_config_file_in_the_working_folder_is_not_read(tmp_path: Path, cli, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)
    (tmp_path / "a.srt").write_text(SRT)
    with FakeOpenAI() as srv:
        (tmp_path / "moviemem.toml").write_text(f'backbone = "openai-compatible:{srv.base_url}#m"\nsegment_target_s = 5\n')
        monkeypatch.chdir(tmp_path)
        r = cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a")
        assert r.code == 0, r.err
        assert srv.requests == [] and "settings from" not in r.err


def test_item2_the_users_own_config_is_read_and_named_on_stderr(tmp_path: Path, monkeypatch) -> None:
    from moviemem.foundation.config import get_settings

    own = tmp_path / "xdg" / "moviemem" / "moviemem.toml"
    own.parent.mkdir(parents=True)
    own.write_text("segment_target_s = 30\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert get_settings().segment_target_s == 30
    named = tmp_path / "named.toml"
    named.write_text("segment_target_s = 45\n")
    monkeypatch.setenv("MOVIEMEM_CONFIG", str(named))
    assert get_settings().segment_target_s == 45  # a file named explicitly wins over the user's own


def test_item2_config_option_names_the_file_and_a_missing_one_is_an_error(tmp_path: Path, cli, monkeypatch) -> None:
    monkeypatch.setenv("MOVIEMEM_CONFIG", "")  # restored after the test: --config sets it for the process
    conf = tmp_path / "c.toml"
    conf.write_text("segment_target_s = 45\n")
    (tmp_path / "a.srt").write_text(SRT)
    assert cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a").code == 0
    r = cli("--config", str(conf), "films")
    assert r.code == 0 and f"moviemem: settings from {conf}" in r.err
    missing = tmp_path / "missing.toml"
    r = cli("--config", str(missing), "films")
    assert r.code == 2 and r.err.strip() == f"error: the config file {missing} (MOVIEMEM_CONFIG or --config) is not a file"


# --- item 3: an imported table's row references are checked against the table they index ----------

@pytest.mark.parametrize("table, edit, says", [
    ("passages", lambda rows: rows[0].update(last_row=10**12), "passages row 0 points at utterances 0..1000000000000"),
    ("passages", lambda rows: rows[0].update(first_row=3, last_row=2), "passages row 0 points at utterances 3..2"),
    ("passages", lambda rows: rows[0].update(source="frames"), "passages row 0 has the unknown source 'frames'"),
])
def test_item3_a_bundle_row_pointing_outside_its_table_is_refused(tmp_path: Path, cli, table, edit, says) -> None:
    bundle = _edit_table(_exported(tmp_path), tmp_path / "bad.tar", table, edit)
    r = cli("import", str(bundle))
    assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert cli("films", "--json").json() == {"films": []}
    assert cli("import", str(tmp_path / "a.tar")).code == 0  # the untouched bundle imports


# --- item 7: import-collection reads nothing that resolves outside its folder -----------------------

def _mf2(root: Path) -> Path:
    (root / "transcripts").mkdir(parents=True)
    (root / "synopsis").mkdir()
    (root / "transcripts" / "1.srt").write_text(SRT)
    return root


@pytest.mark.parametrize("link", ["synopsis/1.synopsis", "metadata.csv", "transcripts/2.srt"])
def test_item7_import_collection_refuses_a_link_out_of_its_folder(tmp_path: Path, cli, link: str) -> None:
    private = tmp_path / "private.txt"
    private.write_text("id,title\n1,PRIVATE-NOTES\n" if link.endswith(".csv") else "PRIVATE-NOTES\n" if "syn" in link else SRT)
    root = _mf2(tmp_path / "mf2")
    (root / link).symlink_to(private)
    r = cli("import-collection", "mf2", str(root))
    assert r.code == 2 and r.err.strip() == f"error: {root / link} leads outside {root} (a link out of the release folder); it is not read"
    assert cli("films", "--json").json() == {"films": []}
    (root / link).unlink()
    assert cli("import-collection", "mf2", str(root)).code == 0


# --- item 9 and a low item: cues are counted as parsed; BOMs and --encoding --------------------------

def test_item9_json_cues_are_counted_after_parsing(tmp_path: Path, monkeypatch) -> None:
    from moviemem import MovieMemError
    from moviemem.ingest import texttracks

    monkeypatch.setattr(texttracks, "MAX_CUES", 5)
    track = tmp_path / "cues.json"
    track.write_text("[" + ",".join(f'{{"\\u0073tart": {i}, "end": {i}.5, "text": "hi"}}' for i in range(6)) + "]")
    assert track.read_text().count('"start"') == 0
    with pytest.raises(MovieMemError, match="holds 6 cues; a text track holds at most 5"):
        texttracks.load_track(track)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_text_track_with_a_byte_order_mark_is_read(tmp_path: Path, codec: str) -> None:
    import codecs

    from moviemem.ingest.texttracks import load_track

    bom = {"utf-16": b"", "utf-32": b"", "utf-16-be": codecs.BOM_UTF16_BE, "utf-8-sig": b""}[codec]
    track = tmp_path / "a.srt"
    track.write_bytes(bom + SRT.replace("Anna", "Anna é").encode(codec))  # utf-16/32 write their own mark
    assert [c.text for c in load_track(track).cues] == ["The lighthouse keeper waits for the boat.", "Anna é rows out at dawn."]


def test_import_collection_takes_an_encoding_and_names_a_bad_file(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "transcripts" / "2.srt").write_bytes(SRT.replace("Anna", "Ren\xe9e").encode("cp1252"))
    r = cli("import-collection", "mf2", str(root))
    # one error line, last; a progress line before it names the film imported before the bad one (issue 61)
    errors = [line for line in r.err.strip().splitlines() if line.startswith("error:")]
    assert r.code == 2 and len(errors) == 1 and r.err.strip().splitlines()[-1] == errors[0]
    assert str(root / "transcripts" / "2.srt") in errors[0] and "--encoding cp1252" in errors[0]
    r = cli("import-collection", "mf2", str(root), "--encoding", "cp1252", "--json")
    assert r.code == 0, r.err
    assert {f["film_id"] for f in r.json()["films"]} == {"mf2-1", "mf2-2"}


@pytest.mark.parametrize("variable, value, says", [
    ("MOVIEMEM_SEGMENT_TARGET_S", "1e-300", "segment_target_s .*greater than or equal to 1"),
    ("MOVIEMEM_STRIP_FPS", "1e-300", "strip_fps .*greater than or equal to 0.001"),
    ("MOVIEMEM_FRAME_MAX_SIDE", "16384", "frame_max_side .*less than or equal to 4096"),
])
def test_item9_a_numeric_setting_outside_its_sane_range_is_one_line(tmp_path: Path, cli, monkeypatch, variable: str,
                                                                    value: str, says: str) -> None:
    import re

    monkeypatch.setenv(variable, value)
    (tmp_path / "a.srt").write_text(SRT)
    r = cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a", "--backbone", "scripted:A")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and re.search(says, r.err), r.err


def test_item9_a_backbone_timeout_below_a_second_is_refused(monkeypatch) -> None:
    from moviemem.backbones.settings import get_backbone_settings
    from moviemem.foundation.errors import SettingsInvalidError

    monkeypatch.setenv("MOVIEMEM_BACKBONE_TIMEOUT_S", "1e-300")
    with pytest.raises(SettingsInvalidError, match="backbone_timeout_s .*greater than or equal to 1"):
        get_backbone_settings()


# --- item 8: a damaged search pack is bypassed and rewritten, never trusted --------------------------

def test_item8_a_search_pack_with_any_flipped_byte_is_bypassed_and_rewritten(tmp_path: Path, monkeypatch, caplog) -> None:
    import logging
    import random

    from moviemem.memory import search, vector_pack
    from moviemem.retrievers.text import TextRetriever

    (tmp_path / "a.srt").write_text(SRT)
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(tmp_path / "a.srt", film_id="a")
    (pack,) = (film.store.media_dir("a") / vector_pack.FOLDER).glob("utterances-*.arrow")
    columns = search.TEXT_TABLES["utterances"].columns
    good = pack.read_bytes()
    assert vector_pack.read(pack, columns) is not None
    for seed in range(8):
        rng = random.Random(seed)
        for _ in range(20):
            flipped = bytearray(good)
            flipped[rng.randrange(len(good))] ^= rng.randrange(1, 256)
            pack.write_bytes(bytes(flipped))
            assert vector_pack.read(pack, columns) is None  # every flip is caught: none is read as data
    expected = [h.id for h in TextRetriever("vector", ["utterance"]).retrieve(lib.film("a"), "keeper boat", k=2)]
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x40
    pack.write_bytes(bytes(flipped))
    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())  # as in a new process
    with caplog.at_level(logging.WARNING, logger="moviemem.memory.vector_pack"):
        got = [h.id for h in TextRetriever("vector", ["utterance"]).retrieve(lib.film("a"), "keeper boat", k=2)]
    assert got == expected and "checksum does not match" in caplog.text and "bypassed" in caplog.text
    assert vector_pack.read(pack, columns) is not None  # rewritten from LanceDB


# --- low items: slow clients are dropped; --port 0 names the port; exports replace only files ---------

def _slow_clients(port: int) -> list:
    import socket

    partial = [b"", b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1", b"POST /v1/chat/completions HTTP/1.1\r\n"
               b"Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mo"]
    socks = []
    for data in partial * 2:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(data)
        socks.append(s)
    return socks


def _dropped(socks: list, within_s: float) -> bool:
    import time

    deadline = time.monotonic() + within_s
    for s in socks:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            while s.recv(4096):  # an answer (a 408, say) and then the close count as dropped too
                pass
        except TimeoutError:
            return False
        finally:
            s.close()
    return True


def test_slow_clients_are_dropped_by_the_gateway_and_others_answered(monkeypatch) -> None:
    import time

    from moviemem.backbones import ScriptedBackbone, start_gateway
    from moviemem.foundation.slowclients import DeadlineProtocol

    assert DeadlineProtocol.request_s <= 30
    monkeypatch.setattr(DeadlineProtocol, "request_s", 1.0)  # shortened here to keep the test quick
    with start_gateway(ScriptedBackbone(["hi"], cycle=True), None) as gw:
        socks = _slow_clients(int(gw.url.rsplit(":", 1)[1]))
        t0 = time.monotonic()
        assert httpx.get(f"{gw.base_url}/models", timeout=5).status_code == 200
        assert time.monotonic() - t0 < 0.5  # a normal client is answered at once
        assert _dropped(socks, within_s=3.0)


def test_slow_clients_are_dropped_by_the_inspector(tmp_path: Path, monkeypatch) -> None:
    import functools
    import http.server
    import threading

    from moviemem.cli.bench import InspectorFiles

    (tmp_path / "index.html").write_text("<p>run</p>")
    assert InspectorFiles.timeout is not None and InspectorFiles.timeout <= 30  # the bound the server runs with
    monkeypatch.setattr(InspectorFiles, "timeout", 1)  # shortened here to keep the test quick
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(InspectorFiles, directory=str(tmp_path)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        socks = _slow_clients(httpd.server_address[1])
        assert httpx.get(f"http://127.0.0.1:{httpd.server_address[1]}/index.html", timeout=5).text == "<p>run</p>"
        assert _dropped(socks, within_s=3.0)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_export_never_replaces_what_is_not_a_regular_file(tmp_path: Path, cli) -> None:
    import os

    (tmp_path / "a.srt").write_text(SRT)
    assert cli("ingest", "--text", str(tmp_path / "a.srt"), "--film-id", "a").code == 0
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.tar"
    link.symlink_to(tmp_path / "elsewhere.tar")
    for target in (fifo, link):
        r = cli("export", "a", str(target))
        assert r.code == 2 and r.err.strip() == f"error: {target} is not a regular file; an export replaces only a file (give a .tar file path)"
    assert fifo.exists() and not fifo.is_file() and link.is_symlink() and not (tmp_path / "elsewhere.tar").exists()
    assert cli("export", "a", str(tmp_path / "a.tar")).code == 0


def _announced_port(cmd: list[str], pattern: str, timeout_s: float = 60.0) -> tuple[Any, int]:
    """Start a server command, read its stderr until the announced URL, return (process, port)."""
    import re
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "moviemem.cli", *cmd], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    deadline = time.monotonic() + timeout_s
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(pattern, line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError(f"{cmd} announced no address")


def test_port_0_prints_the_port_the_system_gave(tmp_path: Path) -> None:
    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.formats import Benchmark, validate_rows
    from moviemem.eval.runner import run_bench

    rows = [(1, {"id": "q0", "film_id": "f", "question": "Q?", "options": ["a", "b"], "answer": "A"})]
    run = tmp_path / "run"

    def answer(film_id, query, policy, backbone):
        from moviemem.agents.types import Answer

        return Answer(choice="A", text="a", confidence=None, invalid=False, policy=policy, backbone=backbone.name)

    run_bench(Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl"), ["p"],
              [ScriptedBackbone(["A"], cycle=True)], run, answerer=answer)
    for cmd, pattern, path in (
            (["inspect", str(run), "--port", "0"], r"http://127\.0\.0\.1:(\d+)/index\.html", "/index.html"),
            (["serve", "--backbone", "local-small", "--port", "0"], r"http://127\.0\.0\.1:(\d+)/v1", "/v1/models")):
        proc, port = _announced_port(cmd, pattern)
        try:
            assert port > 0
            assert httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10).status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=30)
