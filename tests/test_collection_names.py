"""import-collection: MF² films by the release's names (--release) and by choice (--films); every file an
import reads capped and every malformed one a one-line error (issues 61 item 7, 62 item 5 and Low)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem import Library, MovieMemError
from moviemem.backbones import ScriptedBackbone
from moviemem.foundation import limits

SRT = "1\n00:00:05,000 --> 00:00:07,000\nWhere is the bomb?\n\n2\n00:01:10,000 --> 00:01:12,500\nOn the bus.\n"
# the release's prompt_utils.py as it is shaped: imports, a literal film list, code that must never run
PROMPT_UTILS = '''from typing import Any
import random

MOVIES_DICT = {
    6: {"title": "Sabotage (Hitchcock)", "year": 1936},
    51: {"title": "A Bucket of Blood", "year": 1959},
    7: {"title": "Murder By Contract", "year": 1958},
}

open(__file__ + ".ran", "w").write("executed")


def get_movie_title(movie_id: int) -> str:
    return MOVIES_DICT[movie_id]["title"]
'''


def _mf2(root: Path, numbers: tuple[int, ...] = (6, 7, 51)) -> Path:
    (root / "transcripts").mkdir(parents=True)
    (root / "synopsis").mkdir()
    for n in numbers:
        (root / "transcripts" / f"{n}.srt").write_text(SRT)
        (root / "synopsis" / f"{n}.synopsis").write_text(f"Synopsis of film {n}.")
    return root


def _release(root: Path, text: str = PROMPT_UTILS) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "prompt_utils.py").write_text(text)
    return root


def _one_line_error(r, *fragments: str) -> None:
    assert r.code == 2, (r.out, r.err)
    said = [line for line in r.err.strip().splitlines() if not line.startswith("[")]  # progress lines aside
    assert len(said) == 1 and said[0].startswith("error: ") and "Traceback" not in r.err, r.err
    for f in fragments:
        assert f in r.err, r.err


# --- issue 61 item 7: names from the release, films by choice -------------------------------------------


def test_release_names_the_films_and_films_picks_them(tmp_path: Path, cli) -> None:
    root, release = _mf2(tmp_path / "mf2"), _release(tmp_path / "release")
    r = cli("import-collection", "mf2", str(root), "--release", str(release), "--films", "51,6", "--json")
    assert r.code == 0, r.err
    got = [(f["film_id"], f["title"], f["year"]) for f in r.json()["films"]]
    assert got == [("mf2-6", "Sabotage (Hitchcock)", 1936), ("mf2-51", "A Bucket of Blood", 1959)]  # release order
    assert not (release / "templates" / "prompt_utils.py.ran").exists()  # read as data, never run
    assert {f.film_id for f in Library(tmp_path / "lib").films()} == {"mf2-6", "mf2-51"}
    # a film id is a name too, and the closed-book prompt (with_title) names the film as the release does
    r = cli("import-collection", "mf2", str(root), "--release", str(release), "--films", "mf2-7", "--json")
    assert [f["title"] for f in r.json()["films"]] == ["Murder By Contract"]
    backbone = ScriptedBackbone(["TRUE"])
    Library(tmp_path / "lib").film("mf2-6").ask("A bomb is on the bus.", kind="claim", policy="closed-book",
                                               backbone=backbone, with_title=True)
    sent = "\n".join(m.text for req in backbone.calls for m in req.messages)
    assert "the film Sabotage (Hitchcock) (1936)" in sent


def test_without_a_release_metadata_csv_still_names_films(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "metadata.csv").write_text("id,title,year\n6,Sabotage,1936\n")
    r = cli("import-collection", "mf2", str(root), "--films", "6,7", "--json")
    assert r.code == 0, r.err
    assert [(f["title"], f["year"]) for f in r.json()["films"]] == [("Sabotage", 1936), ("MF² film 7", None)]
    # with both, the release's list names the films it holds
    r = cli("import-collection", "mf2", str(root), "--films", "6", "--release", str(_release(tmp_path / "rel")), "--json")
    assert r.json()["films"][0]["title"] == "Sabotage (Hitchcock)"


@pytest.mark.parametrize("films, says", [
    ("6,99", "--films: 99 is not a film of"),
    ("99,mf2-100", "--films: 99, mf2-100 are not a film of"),
    ("6,,7", "--films takes the release's film numbers separated by commas"),
    ("", "--films takes the release's film numbers"),
])
def test_unknown_or_malformed_films_are_one_line_and_import_nothing(tmp_path: Path, cli, lib_dir: Path,
                                                                    films: str, says: str) -> None:
    root = _mf2(tmp_path / "mf2")
    _one_line_error(cli("import-collection", "mf2", str(root), "--films", films), says)
    assert not lib_dir.exists() or not Library(lib_dir).films()


@pytest.mark.parametrize("text, says", [
    (None, "is not the MF² release: no templates/prompt_utils.py"),
    ("MOVIES_DICT = load()\n", "has no MOVIES_DICT of literal film titles"),
    ("MOVIES_DICT = {6: {'title': 'Sabotage', 'year': 1936}\n", "cannot be read as Python source"),
    ("MOVIES_DICT = {6: {'title': ['Sabotage'], 'year': 1936}}\n", "the title is not text"),
    ("MOVIES_DICT = {7: {'title': 'Murder By Contract', 'year': 1958}}\n", "film 6 of"),
    ("MOVIES_DICT = " + "[" * 100_000 + "]" * 100_000 + "\n", "cannot be read as Python source"),
])
def test_a_release_that_cannot_name_the_films_is_one_line(tmp_path: Path, cli, text: str | None, says: str) -> None:
    root, release = _mf2(tmp_path / "mf2"), tmp_path / "release"
    if text is None:
        (release / "templates").mkdir(parents=True)
    else:
        _release(release, text)
    _one_line_error(cli("import-collection", "mf2", str(root), "--release", str(release), "--films", "6,7"), says)


def test_release_is_refused_for_movie101_and_when_not_a_folder(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    _one_line_error(cli("import-collection", "mf2", str(root), "--release", str(tmp_path / "nowhere")), "is not a folder")
    (tmp_path / "m101" / "narration").mkdir(parents=True)
    (tmp_path / "m101" / "narration" / "1.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    _one_line_error(cli("import-collection", "movie101", str(tmp_path / "m101"), "--release", str(tmp_path)),
                    "--release names the MF² release")


def test_the_protocol_and_the_importer_read_one_film_list(tmp_path: Path) -> None:
    """`--protocol mf2:` (agents/mf2_release.py) and the importer read MOVIES_DICT with one reader."""
    from moviemem.agents import mf2_release
    from moviemem.foundation import pysource
    from moviemem.ingest import collections

    assert mf2_release.movies_dict is pysource.movies_dict is collections.movies_dict
    release = _release(tmp_path / "release")
    assert pysource.movies_dict(release)[6] == {"title": "Sabotage (Hitchcock)", "year": 1936}


SHARED_RELEASE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mf2"


@pytest.mark.skipif(not (SHARED_RELEASE / "release" / "templates" / "prompt_utils.py").is_file(),
                    reason="no copy of the MF² release in ../shared/datasets/mf2 (a fresh clone has none)")
def test_the_real_release_names_its_films() -> None:
    from moviemem.ingest.collections import items

    got = items("mf2", SHARED_RELEASE, release=SHARED_RELEASE / "release", films=["6", "51"])
    assert [(it.film_id, it.title, it.year) for it in got] == [("mf2-6", "Sabotage (Hitchcock)", 1936),
                                                               ("mf2-51", "A Bucket of Blood", 1959)]


# --- issue 62 item 5: every file an import reads is capped before it is read -----------------------------


def _sparse(path: Path, size: int) -> Path:
    """A file whose stat says `size` bytes without the disk holding them: refused before any read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)
    return path


@pytest.mark.parametrize("name, cap, what", [
    ("synopsis/6.synopsis", limits.MAX_SYNOPSIS_BYTES, "synopsis"),
    ("metadata.csv", limits.MAX_METADATA_BYTES, "metadata.csv"),
    ("transcripts/7.srt", limits.MAX_TRACK_BYTES, "subtitle or text track"),
])
def test_an_mf2_file_over_its_cap_is_refused_unread(tmp_path: Path, cli, lib_dir: Path, name: str, cap: int,
                                                    what: str) -> None:
    root = _mf2(tmp_path / "mf2")
    _sparse(root / name, cap + 1)
    r = cli("import-collection", "mf2", str(root))
    _one_line_error(r, str(root / name), f"is more than any {what} holds")
    assert not lib_dir.exists() or not Library(lib_dir).films()


def test_a_release_file_and_a_movie101_meta_file_over_their_caps_are_refused(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    release = _release(tmp_path / "release")
    _sparse(release / "templates" / "prompt_utils.py", limits.MAX_SOURCE_BYTES + 1)
    _one_line_error(cli("import-collection", "mf2", str(root), "--release", str(release)), "is more than any")
    m101 = tmp_path / "m101"
    (m101 / "narration").mkdir(parents=True)
    (m101 / "narration" / "1.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    _sparse(m101 / "meta" / "1.json", limits.MAX_META_JSON_BYTES + 1)
    _one_line_error(cli("import-collection", "movie101", str(m101)), "is more than any Movie101 meta file holds")


READERS = ["ingest/collections.py", "ingest/texttracks.py", "eval/formats.py", "foundation/pysource.py",
           "agents/mf2_release.py", "agents/policies/mf2_release.py"]


@pytest.mark.parametrize("module", READERS)
def test_importers_read_files_only_under_a_cap(module: str) -> None:
    """The class, not the case: a module that reads outside files opens none itself; each read goes
    through foundation/limits.py (read_capped, check_size), where the caps are."""
    import ast

    import moviemem

    tree = ast.parse((Path(moviemem.__file__).parent / module).read_text())
    opens = [f"line {n.lineno}: {ast.unparse(n.func)}" for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (isinstance(n.func, ast.Attribute) and n.func.attr in ("read_text", "read_bytes", "open")
                  or isinstance(n.func, ast.Name) and n.func.id == "open")]
    assert not opens, f"{module} reads a file without a cap: {opens}"


def test_read_capped_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(MovieMemError, match="not a regular file"):
        limits.read_capped(fifo, 100, "synopsis")  # would block forever if it were opened


# --- issue 62 Low: tracebacks that become one-line errors ----------------------------------------------


def test_a_metadata_field_over_the_csv_limit_is_one_line(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "metadata.csv").write_text("id,title,year\n6,\"" + "x" * (limits.MAX_CSV_FIELD_CHARS + 1) + "\",1936\n")
    _one_line_error(cli("import-collection", "mf2", str(root)), str(root / "metadata.csv"), "field larger than field limit")


def test_a_title_too_long_to_show_is_one_line(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "metadata.csv").write_text("id,title,year\n6," + "x" * (limits.MAX_TITLE_CHARS + 1) + ",1936\n")
    _one_line_error(cli("import-collection", "mf2", str(root)), "line 2: a title of 501 characters")


def test_a_cp1252_metadata_csv_takes_the_encoding(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "metadata.csv").write_bytes("id,title,year\n6,La Femme de l'\xe9picier,1936\n".encode("cp1252"))
    _one_line_error(cli("import-collection", "mf2", str(root)), str(root / "metadata.csv"), "--encoding cp1252")
    r = cli("import-collection", "mf2", str(root), "--encoding", "cp1252", "--films", "6", "--json")
    assert r.code == 0, r.err
    assert r.json()["films"][0]["title"] == "La Femme de l'\xe9picier"


def test_a_cp1252_synopsis_takes_the_encoding_and_is_not_mangled(tmp_path: Path, cli) -> None:
    root = _mf2(tmp_path / "mf2")
    (root / "synopsis" / "6.synopsis").write_bytes("Ren\xe9e finds the bomb.".encode("cp1252"))
    _one_line_error(cli("import-collection", "mf2", str(root)), str(root / "synopsis" / "6.synopsis"))
    assert cli("import-collection", "mf2", str(root), "--encoding", "cp1252", "--films", "6").code == 0
    assert Library(tmp_path / "lib").film("mf2-6").meta()["synopsis"] == "Ren\xe9e finds the bomb."


@pytest.mark.parametrize("meta, says", [
    ([{"title": "x"}], "expected a JSON object of the film's title, year and cast, not a list"),
    ({"title": 5}, "the title is not text"),
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
])
def test_a_malformed_movie101_meta_file_is_one_line(tmp_path: Path, cli, meta: object, says: str) -> None:
    m101 = tmp_path / "m101"
    (m101 / "narration").mkdir(parents=True)
    (m101 / "meta").mkdir()
    (m101 / "narration" / "1.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    (m101 / "meta" / "1.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    _one_line_error(cli("import-collection", "movie101", str(m101)), str(m101 / "meta" / "1.json"), says)


@pytest.mark.parametrize("cues, says", [
    ([{"start": 1, "end": 2, "text": "Anna rows.", "characters": 5}], "holds no valid cue"),
    ([{"start": 1, "end": 2, "text": "Anna rows.", "characters": [5]}], "holds no valid cue"),
    ([{"start": 10**400, "end": 2, "text": "Anna rows."}], "holds no valid cue"),
    ([["start", 1]], "holds no valid cue"),
])
def test_a_malformed_json_cue_is_skipped_and_an_empty_track_one_line(tmp_path: Path, cli, cues: list, says: str) -> None:
    track = tmp_path / "cues.json"
    track.write_text(json.dumps(cues))
    _one_line_error(cli("ingest", "--text", str(track)), says)
    track.write_text(json.dumps([*cues, {"start": 3, "end": 4, "text": "[Ben] waits.", "characters": ["Ben"]}]))
    from moviemem.ingest.texttracks import load_track

    got = load_track(track)
    assert [(c.text, c.characters) for c in got.cues] == [("Ben waits.", ["Ben"])]
    assert "skipped 1 malformed item(s) at index 0" in got.warnings[0]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '[{"start": ' + "1" * 5000 + ', "end": 2, "text": "x"}]'])
def test_json_cues_nested_too_deep_or_a_number_too_long_are_one_line(tmp_path: Path, cli, text: str) -> None:
    track = tmp_path / "cues.json"
    track.write_text(text)
    _one_line_error(cli("ingest", "--text", str(track)), str(track), "invalid JSON")


def test_a_movie101_hour_of_too_many_digits_is_a_malformed_line(tmp_path: Path) -> None:
    from moviemem.ingest.texttracks import load_track

    track = tmp_path / "n.txt"
    track.write_text("9" * 5000 + ":0:1|0:0:5|too long\n0:0:1|0:0:5|[Anna] opens the door.\n")
    got = load_track(track, fmt="movie101")
    assert [c.text for c in got.cues] == ["Anna opens the door."] and "malformed line(s): 1" in got.warnings[0]


@pytest.mark.parametrize("encoding", ["rot13", "base64", "zlib", "no-such-codec"])
def test_only_text_encodings_are_taken(tmp_path: Path, cli, lib_dir: Path, encoding: str) -> None:
    root = _mf2(tmp_path / "mf2")
    r = cli("import-collection", "mf2", str(root), "--encoding", encoding)
    _one_line_error(r, repr(encoding))
    assert not lib_dir.exists()  # refused before the library is made
    track = root / "transcripts" / "6.srt"
    _one_line_error(cli("ingest", "--text", str(track), "--encoding", encoding), repr(encoding))


# --- a bundle's manifest: capped and parsed to a one-line error ------------------------------------------


def _bundle(path: Path, manifest: bytes) -> Path:
    """An uncompressed tar holding only a manifest.json."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return path


@pytest.mark.parametrize("manifest, says", [
    (b"[" * 100_000 + b"]" * 100_000, "no valid manifest.json"),
    (b"{}" + b" " * (limits.MAX_MANIFEST_BYTES - 1), f"its manifest.json holds {limits.MAX_MANIFEST_BYTES + 1:,} bytes"),
])
def test_a_bundle_manifest_nested_too_deep_or_too_large_is_one_line(tmp_path: Path, cli, manifest: bytes,
                                                                      says: str) -> None:
    bundle = _bundle(tmp_path / "b.tar", manifest)
    _one_line_error(cli("import", str(bundle)), "cannot import", says)
