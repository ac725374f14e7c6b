"""Issue 46, the data holes a hostile audit found: the wheel's contents (item 1), bundles trusted for
times, sizes, media and source paths (items 3, 4, 8), huge subtitle tracks (7), unreadable search
packs (9), film ids with a newline (12), a mistyped --library (17) and a video given as text (18).
Each test is named after its item."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_hostile_input import SRT, _exported, _rebundle

import moviemem
from moviemem import Library, MovieMemError

ROOT = Path(moviemem.__file__).resolve().parent


def _tiny_jpeg() -> bytes:
    """A 4x4 JPEG (what the frames and faces stages write): an import reads its frame header (issue 62)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (90, 90, 90)).save(buf, "JPEG")
    return buf.getvalue()


JPEG = _tiny_jpeg()  # made once


# --- item 1: the built wheel has every module and plug-in, and nothing of the checkout's runs ----

WHEEL_CHECK = r"""
import importlib, json, pkgutil, sys
import moviemem
from moviemem.agents.registry import POLICIES, list_policies
from moviemem.backbones.registry import BACKBONES
from moviemem.eval.formats import ADAPTERS, FORMATS
from moviemem.eval.tasks import TASKS
from moviemem.ingest.registry import STAGES

modules = [m.name for m in pkgutil.walk_packages(moviemem.__path__, "moviemem.") if not m.name.endswith(".__main__")]
for name in modules:
    importlib.import_module(name)
plugins, failures = {}, {}
for registry in (POLICIES, BACKBONES, STAGES, FORMATS, ADAPTERS, TASKS):
    plugins[registry.kind] = sorted(registry.load_all())
    failures.update({f"{registry.kind} {k}": v for k, v in registry.failures.items()})
print(json.dumps({"file": moviemem.__file__, "modules": modules, "plugins": plugins, "failures": failures,
                  "policies": [p.name for p in list_policies()]}))
"""


def test_item1_the_built_wheel_installs_and_imports_every_module_and_plugin(tmp_path: Path) -> None:
    """Build the wheel from a copy of the checkout (with a run's output, test data and egg-info in
    it, as a user's has), install it alone into a fresh virtual environment that sees this one's
    dependencies (a .pth line: no editable moviemem comes with them) and import everything."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*_cache", "build", "dist",
                                                              "*.egg-info"))  # build/ comes back below, stale
    for junk in ("out/run.json", "tests/data/truth.json", "moviemem.egg-info/SOURCES.txt",
                 "build/lib/moviemem/renamed_long_ago.py"):  # an earlier build's leftover
        (src / junk).parent.mkdir(parents=True, exist_ok=True)
        (src / junk).write_text("{}")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(src)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = wheels.glob("moviemem-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.split("/")[1] for n in names if n.startswith("moviemem/") and n.count("/") > 1}
    assert {"agents", "backbones", "memory", "cli"} <= shipped and not shipped & {"out", "tests", "bench", "scripts", "docs"}
    assert "moviemem/agents/policies/hybrid.py" in names and "moviemem/backbones/prices.toml" in names
    assert not [n for n in names if "egg-info" in n or n == "moviemem/setup.py" or n.endswith(".json")], names
    assert "moviemem/renamed_long_ago.py" not in names  # built from the tree, not from what build/ held

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # a plain path line: the .pth files over there (the editable install of this checkout) are not run
    (Path(purelib) / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([str(python), "-c", WHEEL_CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["file"].startswith(purelib), got["file"]  # the wheel's copy, not this checkout
    assert not got["failures"], got["failures"]
    assert "moviemem.agents.policies.hybrid" in got["modules"] and "hybrid" in got["policies"]
    assert {"hybrid", "subtitles", "end-to-end"} <= set(got["plugins"]["policy"]) and got["plugins"]["stage"]
    cli = subprocess.run([str(venv / "bin" / "moviemem"), "policies", "--json"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert cli.returncode == 0 and "hybrid" in cli.stdout, cli.stderr


# --- items 3, 4 and 8: a bundle is data, checked like every other input ---------------------------

def _edit_table(good: Path, dst: Path, table: str, edit, *, manifest_edit=None, add: dict | None = None) -> Path:
    """A copy of bundle `good` whose `table` rows went through `edit(rows)` (a list of dicts)."""
    with tarfile.open(good) as tar:
        data = pq.read_table(io.BytesIO(tar.extractfile(f"tables/{table}.parquet").read()))
    rows = data.to_pylist()
    edit(rows)
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=data.schema), buf)
    return _rebundle(good, dst, manifest_edit=manifest_edit, add={f"tables/{table}.parquet": buf.getvalue(), **(add or {})})


def _set(field: str, value):
    def edit(rows):
        rows[0][field] = value
    return edit


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("table, edit, why", [
    ("films", _set("duration_s", 1e12), "row 0: duration_s 1000000000000.0 is not a time in seconds between 0 and 172800"),
    ("films", _set("duration_s", INF), "row 0: duration_s inf is not a time"),
    ("films", _set("fps", NAN), "row 0: fps nan is not a finite number"),
    ("utterances", _set("start", NAN), "row 0: start nan is not a time"),
    ("utterances", _set("end", 1.0), "row 0: end 1.0 is before its start 5.0"),
    ("utterances", _set("words", '[{"start": NaN, "word": "x"}]'), "row 0: words is not valid JSON (NaN is not a JSON number)"),
    ("utterances", _set("words", '[{"start": 1e999}]'), "row 0: words is not valid JSON (1e999 is not a finite"),
    ("utterances", _set("vector", [NAN] * 384), "row 0: vector holds a value that is not a finite number"),
])
def test_item3_every_time_in_a_bundle_passes_the_cue_check(tmp_path: Path, cli, table: str, edit, why: str) -> None:
    bundle = _edit_table(_exported(tmp_path), tmp_path / "bad.tar", table, edit)
    r = cli("import", str(bundle))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert f"table {table!r} has a bad row ({why}" in r.err, r.err
    assert cli("films", "--json").json() == {"films": []}


def test_item3_json_output_never_holds_nan_or_infinity(tmp_path: Path, cli, lib_dir: Path) -> None:
    """Rows no check saw (a library written by older code, or edited) print as an error, never as `Infinity`."""
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "a").code == 0
    Library(lib_dir).store.table("films").update(where="film_id = 'a'", values={"duration_s": INF})
    r = cli("films", "--json")
    assert r.code == 2 and "Infinity" not in r.out and "not finite (NaN or Infinity)" in r.err, (r.out, r.err)

    # the MCP server's replies go through the same check: a tool error and a resource error, never Infinity
    import anyio
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    from moviemem.serve.mcp import build_server

    server = build_server(Library(lib_dir))
    with pytest.raises(ToolError, match="not finite"):
        anyio.run(server.call_tool, "list_films", {})
    with pytest.raises(ResourceError, match="not finite"):
        anyio.run(server.read_resource, "moviemem://films")

    # the check walks a reply's nesting rather than serialising it a second time
    from moviemem.foundation.numbers import check_finite

    check_finite({"films": [{"id": "a", "spans": [(0.0, 1.5)], "note": None}]})
    with pytest.raises(MovieMemError, match="not finite"):
        check_finite({"films": [{"id": "a", "spans": [(0.0, NAN)]}]})


def _gzipped_bundle(good: Path, dst: Path, extra: dict[str, int], *, manifest_edit=None) -> Path:
    """`good` as a .tar.gz with members of `extra[name]` zero bytes, streamed (never held in memory)."""
    with tarfile.open(good) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isreg()}
    manifest = json.loads(members.pop("manifest.json"))
    if manifest_edit:
        manifest_edit(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()

    class Zeros(io.RawIOBase):
        def __init__(self, n: int):
            self.left = n

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n

    with gzip.open(dst, "wb", compresslevel=6) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, size in extra.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BufferedReader(Zeros(size)))
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dst


def test_item4_a_gzip_bomb_fails_while_it_unpacks(tmp_path: Path, cli, lib_dir: Path, monkeypatch) -> None:
    """A still named by the manifest, 64 MB of zeros that gzip to 64 KB: refused after 17 MB are
    unpacked (20 times what was read, plus 16 MB), holding a megabyte at a time."""
    import tracemalloc

    from moviemem.memory import bundle as bundle_mod

    good = _exported(tmp_path)
    bomb = _gzipped_bundle(good, tmp_path / "bomb.tar.gz", {"media/media/a/frames/0000001.jpg": 64 * 2**20},
                           manifest_edit=lambda m: m["media"].append("media/a/frames/0000001.jpg"))
    assert bomb.stat().st_size < 2**17
    tracemalloc.start()
    try:
        with pytest.raises(MovieMemError, match=r"bomb.tar.gz: [\d,]+ compressed bytes unpack to over [\d,]+ \(more "
                                                r"than 20 times: a compression bomb"):
            Library(lib_dir).import_bundle(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak
    assert cli("films", "--json").json() == {"films": []}
    plain = _gzipped_bundle(good, tmp_path / "ok.tar.gz", {})  # a gzipped export imports
    assert Library(lib_dir).import_bundle(plain).utterances()[0].text == "Where is Williams?"
    monkeypatch.setattr(bundle_mod, "MAX_BUNDLE_BYTES", 2**20)  # the unpacked total, counted while it unpacks
    with pytest.raises(MovieMemError, match="it unpacks to more than"):
        Library(lib_dir).import_bundle(_gzipped_bundle(good, tmp_path / "big.tar.gz", {"pad": 2 * 2**20}))


def _one_frame() -> tuple[bytes, Callable[[dict[str, Any]], None]]:
    """A frames table of one row whose still is media/a/frames/0000001.jpg, and the manifest edit that
    declares the table and the still: what a bundle with one still adds."""
    frame = {"frame_idx": 1, "t": 1.0, "pools": [64], "strip": True, "image": "media/a/frames/0000001.jpg"}
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"film_id": "a", "run_id": "r", **frame}]), buf)

    def with_frames(m: dict[str, Any]) -> None:
        m["tables"]["frames"] = {"file": "tables/frames.parquet", "rows": 1, "vector_dim": None}
        m["media"].append(frame["image"])

    return buf.getvalue(), with_frames


def test_item4_only_jpeg_stills_that_rows_use_are_imported(tmp_path: Path, cli, monkeypatch) -> None:
    from moviemem.memory import bundle as bundle_mod

    good = _exported(tmp_path)
    frames, with_frames = _one_frame()

    def unused(m):
        m["media"].append("media/a/frames/0000002.jpg")

    cases = {
        "a still no row uses": (_rebundle(good, tmp_path / "1.tar", manifest_edit=unused,
                                          add={"media/media/a/frames/0000002.jpg": JPEG}),
                                "media 'media/a/frames/0000002.jpg' is no image of any row"),
        "a still that is no JPEG": (_rebundle(good, tmp_path / "2.tar", manifest_edit=with_frames,
                                              add={"tables/frames.parquet": frames,
                                                   "media/media/a/frames/0000001.jpg": b"#!/bin/sh\n" * 100}),
                                    "media 'media/a/frames/0000001.jpg' is not a JPEG still"),
    }
    for what, (bundle, message) in cases.items():
        r = cli("import", str(bundle))
        assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, (what, r.err)
        assert cli("films", "--json").json() == {"films": []}, what
    ok = _rebundle(good, tmp_path / "3.tar", manifest_edit=with_frames,
                   add={"tables/frames.parquet": frames, "media/media/a/frames/0000001.jpg": JPEG})
    assert cli("import", str(ok)).code == 0
    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 3)
    r = cli("import", str(ok), "--film-id", "b")
    assert r.code == 2 and "holds more than 3 members" in r.err


def test_item8_an_imported_film_has_no_source_outside_the_library(tmp_path: Path, cli, lib_dir: Path) -> None:
    """A bundle naming a local file as the film's video: the end-to-end policy must never send it."""
    secret = tmp_path / "private.mp4"
    secret.write_bytes(b"\x00\x00\x00\x20ftypisom private bytes")

    def video_here(rows):
        rows[0].update(source_path=str(secret), has_video=True)

    bundle = _edit_table(_exported(tmp_path), tmp_path / "b.tar", "films", video_here)
    assert cli("import", str(bundle)).code == 0
    assert Library(lib_dir).film("a").info.source_path == ""
    r = cli("ask", "a", "Who is asked about?", "--option", "Williams", "--option", "Nobody", "--backbone", "scripted:A",
            "--policy", "end-to-end[video=true]", "--json")
    assert r.code == 2 and "'a' was imported from a bundle, which holds no video" in r.err, (r.out, r.err)
    assert str(secret) not in r.out + r.err


# --- item 7: a track's cues are bounded, and each costs little ----------------------------------

def test_item7_a_track_of_too_many_cues_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    from moviemem.ingest.texttracks import MAX_CUES, load_track

    big = tmp_path / "big.srt"
    big.write_text("".join(f"{i + 1}\n00:00:{i % 60:02d},000 --> 00:00:{i % 60:02d},500\nx\n\n" for i in range(MAX_CUES + 1)))
    with pytest.raises(MovieMemError, match=f"big.srt holds {MAX_CUES + 1:,} cues; a text track holds at most {MAX_CUES:,}"):
        load_track(big)
    cues = tmp_path / "cues.json"
    cues.write_text(json.dumps([{"start": 1, "end": 2, "text": "x"}] * (MAX_CUES + 1)))
    with pytest.raises(MovieMemError, match="holds 20,001 cues"):
        load_track(cues)


def test_item7_a_track_without_pauses_is_cut_into_scenes_in_little_memory() -> None:
    """20,000 lines and no pause: cutting a min_s piece at a time copied the lines at every cut
    (525 MB, two minutes); on index ranges it is a few MB."""
    import tracemalloc

    from moviemem.graph.scenes import TextLine, split_at_gaps

    lines = [TextLine(8.5 * i, 8.5 * i + 8.0, "dialogue", f"line {i}", f"utterances:{i}") for i in range(20_000)]
    tracemalloc.start()
    try:
        parts = split_at_gaps(lines, min_s=45, max_s=240, pause_s=12)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak
    assert sum(len(p[2]) for p in parts) == len(lines) and all(p[1] - p[0] <= 240 for p in parts)
    assert [ln.ref for p in parts for ln in p[2]] == [ln.ref for ln in lines]


# --- item 9: a search pack that cannot be read is rebuilt ----------------------------------------

def test_item9_a_search_pack_of_another_schema_is_treated_as_missing_and_rewritten(tmp_path: Path, cli, lib_dir: Path,
                                                                                    monkeypatch) -> None:
    import pyarrow.ipc as ipc

    from moviemem.memory import search

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "a").code == 0
    import hashlib

    from moviemem.memory.vector_pack import DIGEST

    (pack,) = (lib_dir / "media" / "a" / "search").glob("utterances-*.arrow")
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, pa.schema([("idx", pa.int64())])) as writer:
        writer.write_table(pa.table({"idx": [1]}))
    body = sink.getvalue().to_pybytes()
    pack.write_bytes(body + hashlib.sha256(body).digest())  # a sound pack (its checksum holds) of another schema
    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())  # a new process: nothing cached
    r = cli("search", "a", "Williams", "--kinds", "utterance", "--json")
    assert r.code == 0, r.err
    assert [e["text"] for e in r.json()["evidence"]] == ["Where is Williams?"]
    rewritten = pack.read_bytes()[:-DIGEST]  # the Arrow file before its checksum
    assert "codes" in ipc.open_file(pa.BufferReader(rewritten)).schema.names  # rewritten from LanceDB


# --- item 12: film ids are matched whole -----------------------------------------------------------

def test_item12_a_film_id_ending_in_a_newline_is_refused(tmp_path: Path, cli, lib_dir: Path) -> None:
    from moviemem.memory.schema import check_film_id

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    r = cli("ingest", "--text", str(srt), "--film-id", "nl\n")
    assert r.code == 2 and "invalid film id 'nl\\n'" in r.err
    assert not (lib_dir / "media").exists() or not any("\n" in p.name for p in (lib_dir / "media").iterdir())
    with pytest.raises(MovieMemError, match="invalid film id"):
        check_film_id("a\n")
    assert check_film_id("a-1_b") == "a-1_b"


# --- item 17: reading a library that does not exist is an error ------------------------------------

@pytest.mark.parametrize("args", [("films",), ("films", "--json"), ("show", "a"), ("search", "a", "x"), ("scenes", "a"),
                                  ("characters", "a"), ("graph", "a"), ("delete", "a"), ("export", "a", "out.tar"),
                                  ("ask", "a", "Who?", "--backbone", "scripted:A")])
def test_item17_a_read_command_on_a_library_that_does_not_exist_fails(tmp_path: Path, cli, args: tuple[str, ...]) -> None:
    typo = tmp_path / "typo"
    r = cli(*args, "--library", str(typo), library=False)
    assert r.code == 2 and r.err.strip() == f"error: no library at {typo} (ingest a film first, or pass --library DIR)"
    assert not typo.exists()


def test_item17_ingest_and_import_make_a_new_library(tmp_path: Path, cli) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--library", str(tmp_path / "new"), library=False).code == 0
    bundle = Library(tmp_path / "new").export("a", tmp_path / "a.tar")
    assert cli("import", str(bundle), "--library", str(tmp_path / "other"), library=False).code == 0
    assert [f["film_id"] for f in cli("films", "--json", "--library", str(tmp_path / "other"), library=False).json()["films"]] == ["a"]


# --- item 18: a file that is no text track is named as such ----------------------------------------

def test_item18_a_video_given_as_text_is_not_a_text_track(tmp_path: Path, cli) -> None:
    film = tmp_path / "film.mp4"
    film.write_bytes(b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41" + bytes(range(256)) * 40)
    r = cli("ingest", "--text", str(film))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert f"{film} is not a subtitle or text track: it holds binary data" in r.err and "--encoding" not in r.err
    wide = tmp_path / "wide.srt"  # UTF-16 has NUL bytes and is text: its byte-order mark says so (issue 54)
    wide.write_bytes(SRT.encode("utf-16"))
    assert cli("ingest", "--text", str(wide)).code == 0
