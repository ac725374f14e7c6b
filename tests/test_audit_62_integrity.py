"""Issue 62, the integrity items: every imported reference checked against the rows that exist and no
retrieval loop over a range it did not read (item 2), imports of one id serialised under the film's
lock (3), the inspector serving only its own regular files and written from scratch (4), doctor
checking each offline model's identity and loading the default backbone (6), and the low items:
decompression-bomb stills, ace's candidate bound, `serve --embedder`, damaged doctor records."""

from __future__ import annotations

import functools
import hashlib
import http.client
import http.server
import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from filelock import FileLock
from racing import race
from test_audit_data import _edit_table, _one_frame
from test_hostile_input import SRT, _exported, _rebundle

from moviemem import Library, MovieMemError

# --- item 2: a passage range no longer than its table; retrieval walks the rows that exist ----------


def test_item2_a_passage_spanning_more_indices_than_its_table_has_rows_is_refused(tmp_path: Path, cli) -> None:
    """The audit's bundle: one more utterance at idx 10**12 and a passage over 0..10**12; both ends exist."""
    good = _exported(tmp_path)

    def far_line(rows):
        rows.append({**rows[0], "idx": 10**12})

    step = _edit_table(good, tmp_path / "step.tar", "utterances", far_line)
    bad = _edit_table(step, tmp_path / "bad.tar", "passages", lambda rows: rows[0].update(last_row=10**12))
    r = cli("import", str(bad))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "passages row 0 spans utterances 0..1000000000000, more indices than the bundle's 2 utterances rows" in r.err
    assert cli("films", "--json").json() == {"films": []}
    assert cli("import", str(step)).code == 0  # the far line alone, with the passage over its own row, is fine


@pytest.mark.timeout(30)
def test_item2_packing_walks_the_rows_a_span_holds_not_the_integers_between_its_ends() -> None:
    """A span over 0..10**12 with three rows in it costs three rows of work (it spun for ever)."""
    from moviemem.retrievers.packing import Lines, fit_budget
    from moviemem.retrievers.types import Evidence

    lines = Lines(None)  # type: ignore[arg-type]  # the rows are given here, not read from a film
    lines._rows["utterance"] = {0: (0.0, 1.0, "Where is Williams?"), 1: (2.0, 3.0, "In the desk."),
                                10**12: (4.0, 5.0, "Far away.")}
    hit = Evidence("passage", "a", 0.0, 5.0, "Where is Williams?", id="passage:0", rows=("utterance", 0, 10**12))
    near = Evidence("utterance", "a", 2.0, 3.0, "In the desk.", id="utterance:1", rows=("utterance", 1, 1))
    shown = fit_budget([near, hit], 1000, lines, core_share=0.5, rings=2)
    assert [e.text for e in shown] == ["Where is Williams?\nIn the desk.\nFar away."]
    assert lines.within("utterance", 1, 10**13) == [1, 10**12] and lines.within("utterance", 2, 10**12 - 1) == []


# --- item 3: two imports of one bundle under one id: one wins, the other is refused ------------------


def test_item3_an_import_checks_the_id_as_of_when_it_holds_the_lock(tmp_path: Path, lib_dir: Path) -> None:
    """A store that read the library before another import finished (its tables stay at that version)
    must still see that film once it holds the lock."""
    from moviemem.memory.bundle import import_film
    from moviemem.memory.schema import ROW_MODELS
    from moviemem.memory.store import MemoryStore

    bundle = _exported(tmp_path)
    (tmp_path / "o.srt").write_text(SRT)
    Library(lib_dir).ingest_text(tmp_path / "o.srt", film_id="other")  # the tables exist before both imports
    early = MemoryStore(str(lib_dir))
    for table in ROW_MODELS:
        early.table(table)  # what an import reads before taking the lock (its vector check) opens them
    assert import_film(MemoryStore(str(lib_dir)), bundle, film_id="k") == "k"
    with pytest.raises(MovieMemError, match="film 'k' is already in the library"):
        import_film(early, bundle, film_id="k")
    films = [f.film_id for f in MemoryStore(str(lib_dir)).film_rows()]
    assert sorted(films) == ["k", "other"]


def test_item3_two_processes_importing_one_bundle_under_one_id_one_fails(tmp_path: Path, lib_dir: Path) -> None:
    bundle = _exported(tmp_path)
    (tmp_path / "o.srt").write_text(SRT)
    lib = Library(lib_dir)
    lib.ingest_text(tmp_path / "o.srt", film_id="other")
    held = FileLock(str(lib.store.locks_dir() / "k.lock"))
    held.acquire()  # both read the library, then wait on the lock: the race, every time
    args = ["import", str(bundle), "--film-id", "k", "--library", str(lib_dir)]
    codes, texts = race(held, [("a", args), ("b", args)], "being written by another process", tmp_path)
    codes = sorted(codes)
    assert codes == [0, 2], texts
    assert any("film 'k' is already in the library" in t for t in texts), texts
    again = Library(lib_dir)
    assert sorted(f.film_id for f in again.store.film_rows()) == ["k", "other"]
    assert [u.text for u in again.film("k").utterances()] == ["Where is Williams?"]  # not doubled


# --- item 4: the inspector serves only regular files inside its folder; report writes it afresh -----


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def test_item4_the_inspector_serves_no_link_out_of_its_folder_and_no_listing(tmp_path: Path) -> None:
    from moviemem.cli.bench import InspectorFiles

    served = tmp_path / "inspector"
    (served / "items").mkdir(parents=True)
    (served / "index.html").write_text("<p>run</p>")
    (served / "items" / "1.html").write_text("<p>item</p>")
    secret = tmp_path / "secret.txt"
    secret.write_text("PRIVATE")
    (served / "root").symlink_to("/")
    (served / "leak.txt").symlink_to(secret)
    (served / "alias.html").symlink_to(served / "index.html")  # a link that stays inside is a file of the folder
    (served / "empty").mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(InspectorFiles, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        assert _get(port, "/index.html") == (200, b"<p>run</p>") and _get(port, "/items/1.html")[0] == 200
        assert _get(port, "/alias.html") == (200, b"<p>run</p>")
        assert _get(port, "/")[0] == 200  # the folder's own index.html
        for path in ("/root/etc/hostname", "/root/", "/root", "/leak.txt", "/items/", "/empty/", "/missing.html"):
            status, body = _get(port, path)
            assert status == 404 and b"PRIVATE" not in body and b"Directory listing" not in body, (path, status)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _bomb_jpeg(width: int = 30000, height: int = 30000) -> bytes:
    """16x16 pixels of JPEG data whose frame header claims `width` x `height` (30000x30000)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (9, 9, 9)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


def _run(tmp_path: Path, frame: Path) -> Path:
    from moviemem.agents.types import Answer
    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.formats import Benchmark, validate_rows
    from moviemem.eval.runner import run_bench
    from moviemem.retrievers.types import Evidence

    lib = Library(tmp_path / "lib")
    (tmp_path / "f0.srt").write_text(SRT)
    lib.ingest_text(tmp_path / "f0.srt", film_id="f0")
    rows = [(1, {"id": "q0", "film_id": "f0", "question": "Where is Williams?", "options": ["Desk", "Attic"], "answer": "A"})]

    def answer(film_id, query, policy, backbone):
        ev = [Evidence("frame", film_id, 5.0, 5.0, "", frame=str(frame), score=0.5, retriever="frames", id="frame:1")]
        return Answer(choice="A", text="A", confidence=0.9, invalid=False, policy=policy, backbone=backbone.name,
                      evidence=ev)

    run = tmp_path / "run"
    run_bench(Benchmark("mcq", validate_rows(rows, "mcq", "b.jsonl"), "b.jsonl", "jsonl"), ["p"],
              [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer, library=lib)
    return run


def test_item4_report_rewrites_the_inspector_folder_and_a_bomb_still_is_no_thumbnail(tmp_path: Path) -> None:
    from moviemem.eval.report import write_report

    frame = tmp_path / "lib" / "media" / "f0" / "frames" / "bomb.jpg"
    frame.parent.mkdir(parents=True)
    frame.write_bytes(_bomb_jpeg())
    run = _run(tmp_path, frame)
    planted = run / "inspector"
    (planted / "thumbs").mkdir(parents=True)
    (planted / "root").symlink_to("/")
    (planted / "thumbs" / "old.jpg").write_text("planted")
    index = write_report(run)["inspector"]  # raised DecompressionBombError while making the thumbnail
    assert index == planted / "index.html" and index.is_file()
    assert not (planted / "root").is_symlink() and not (planted / "thumbs" / "old.jpg").exists()
    assert list((planted / "thumbs").iterdir()) == []  # the bomb made no thumbnail
    (run / "inspector").rename(run / "elsewhere")
    (run / "inspector").symlink_to(tmp_path / "lib")  # the folder itself a link: replaced, not followed
    write_report(run)
    assert not (run / "inspector").is_symlink() and (tmp_path / "lib" / "films.lance").is_dir()


def test_low_a_bomb_still_shows_as_nothing_in_a_notebook(tmp_path: Path) -> None:
    from moviemem.agents.display import still

    bomb = tmp_path / "bomb.jpg"
    bomb.write_bytes(_bomb_jpeg())
    assert still(bomb) == ""


def test_low_a_bundled_still_whose_header_claims_a_huge_picture_is_refused(tmp_path: Path, cli) -> None:
    good = _exported(tmp_path)
    frames, with_frames = _one_frame()

    bad = _rebundle(good, tmp_path / "bomb.tar", manifest_edit=with_frames,
                    add={"tables/frames.parquet": frames, "media/media/a/frames/0000001.jpg": _bomb_jpeg()})
    r = cli("import", str(bad))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "media 'media/a/frames/0000001.jpg' claims over 178,956,970 pixels; a still has at most 8192 a side" in r.err
    assert cli("films", "--json").json() == {"films": []}
    wide = _rebundle(good, tmp_path / "wide.tar", manifest_edit=with_frames,  # under PIL's limit, over the cap
                     add={"tables/frames.parquet": frames, "media/media/a/frames/0000001.jpg": _bomb_jpeg(9000, 16)})
    r = cli("import", str(wide))
    assert r.code == 2 and "claims 9000x16 pixels; a still has at most 8192 a side" in r.err, r.err


# --- item 6: doctor checks each model's identity and loads the default backbone --------------------


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch):
    """A prepared offline model `fake` (1 MB) under a models folder of its own; (settings, its file)."""
    from moviemem.foundation.config import get_settings
    from moviemem.models import offline

    data = os.urandom(2**20)
    model = offline.OfflineModel(name="fake", description="a test model", packages=(), files=(),
                                 checked_file="model.gguf", sha256=hashlib.sha256(data).hexdigest())
    monkeypatch.setattr(offline, "MODELS", {"fake": model})
    settings = get_settings(models_dir=tmp_path / "models")
    dest = settings.models_path / "fake"
    dest.mkdir(parents=True)
    (dest / "model.gguf").write_bytes(data)
    (dest / offline.MARKER).write_text(json.dumps({"sha256": model.sha256, "size": len(data)}))  # an older marker
    return settings, dest / "model.gguf"


def test_item6_doctor_fails_a_model_zeroed_in_place_even_with_its_old_times(fake_model) -> None:
    from moviemem.doctor.checks import check_models

    settings, path = fake_model
    (first,) = check_models(settings)
    assert first.ok is True and first.detail.startswith("hashed: matches its SHA-256"), first
    (second,) = check_models(settings)
    assert second.ok is True and "unchanged since" in second.detail, second
    before = path.stat()
    with path.open("r+b") as f:  # zeroed in place: same size, same inode
        f.write(b"\0" * before.st_size)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and its modification time put back
    (broken,) = check_models(settings)
    assert broken.ok is False and "does not match its SHA-256" in broken.detail, broken
    assert "moviemem models prepare fake --verify" in broken.fix


def test_item6_prepare_records_the_stamp_so_the_first_doctor_hashes_nothing(fake_model, monkeypatch) -> None:
    from moviemem.models import offline

    settings, path = fake_model
    assert offline.identity("fake", settings) == "hashed"
    monkeypatch.setattr(offline, "sha256_of", lambda p: pytest.fail("hashed again with an unchanged stamp"))
    assert offline.identity("fake", settings) == "stamp"
    with pytest.raises(pytest.fail.Exception):
        offline.identity("fake", settings, rehash=True)  # --verify hashes whatever the stamp says


def test_item6_a_marker_or_build_record_that_is_a_json_list_fails_its_check(fake_model, tmp_path: Path, monkeypatch) -> None:
    from moviemem.doctor import checks
    from moviemem.models import offline

    settings, path = fake_model
    (path.parent / offline.MARKER).write_text("[1, 2]")
    (bad,) = checks.check_models(settings)
    assert bad.ok is False and "not prepared" in bad.detail
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    record = tmp_path / checks.BUILD_RECORD
    for damaged in ("[1, 2]", '{"features": "avx2 fma", "level": "x86-64-v3", "key": "k"}', '{"features": [1]}'):
        record.write_text(damaged)
        found = checks.check_llama_build(frozenset({"avx2", "fma"}))
        assert found.ok is False and "is damaged" in found.detail and found.fix == "make setup", (damaged, found)
    record.write_text('{"features": ["avx2", "fma"], "level": "x86-64-v3", "key": "k"}')
    assert checks.check_llama_build(frozenset({"avx2", "fma"})).ok is True


def test_item6_the_llama_check_loads_the_default_backbone_too(monkeypatch) -> None:
    from moviemem.doctor import checks

    loaded: list[str] = []
    monkeypatch.setattr(checks, "check_llama_build", lambda: checks.Check("llama.cpp build", True, "fine"))
    monkeypatch.setattr(checks, "check_llama_runs", lambda spec: loaded.append(spec) or checks.Check(spec, True, "ok"))
    checks.run_checks(["llama"])
    assert loaded == ["local", "local-small"]
    loaded.clear()
    checks.run_checks(["llama"], backbone="local")
    assert loaded == ["local"]


# --- low items: ace's bound, serve's embedder -------------------------------------------------------


def test_low_ace_candidates_have_an_upper_bound(cli) -> None:
    from moviemem.agents import get_policy

    with pytest.raises(MovieMemError, match="ace takes 2 to 16 candidates, not 100000000"):
        get_policy("ace", candidates=100_000_000)
    assert get_policy("ace", candidates=16).settings.candidates == 16  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["nonsense", "local", "qwen2.5-coder-1.5b"])
def test_low_serve_refuses_an_unknown_embedder_in_one_line(cli, name: str) -> None:
    r = cli("serve", "--embedder", name, "--port", "0", library=False)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert f"unknown embedder {name!r}" in r.err


def test_low_serve_embedder_none_serves_no_embeddings(cli, monkeypatch) -> None:
    import moviemem.backbones as backbones

    got: dict[str, object] = {}
    monkeypatch.setattr(backbones, "serve", lambda backbone, embedder, *a, **k: got.update(embedder=embedder))
    assert cli("serve", "--embedder", "none", "--port", "0", library=False).code == 0
    assert got == {"embedder": None}
