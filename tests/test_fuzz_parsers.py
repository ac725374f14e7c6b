"""Property-based fuzzing of every parser of files from outside (issue 62: close the class).

Each parser gets generated input, well-formed, nearly well-formed and garbage, and must either return
what its contract promises or refuse with a one-line MovieMemError: never another exception (a
traceback), never a cue outside the film's time bounds or over its caps.

Budget: MOVIEMEM_FUZZ_EXAMPLES examples per test (default 25, so the file runs in seconds in
`make test`); for a long run, e.g. `MOVIEMEM_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q
tests/test_fuzz_parsers.py`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import string
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moviemem.foundation.errors import MovieMemError
from moviemem.foundation.limits import MAX_CUE_CHARS, MAX_CUES, MAX_TITLE_CHARS
from moviemem.foundation.timefmt import MAX_FILM_S

EXAMPLES = int(os.environ.get("MOVIEMEM_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
T = TypeVar("T")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Path]]:
    """A fresh empty folder per example (hypothesis calls the test many times with one fixture value)."""
    base = tmp_path_factory.mktemp("fuzz")
    count = iter(range(10**9))

    def fresh() -> Path:
        folder = base / str(next(count))
        folder.mkdir()
        return folder

    yield fresh
    shutil.rmtree(base, ignore_errors=True)


def refused_or(call: Callable[[], T], *, one_line: bool = True) -> T | None:
    """What `call` returns, or None when it refuses with a MovieMemError (of one line unless `one_line` is
    False: a benchmark's errors are a line per bad item); any other exception fails the test."""
    try:
        return call()
    except MovieMemError as exc:
        assert not one_line or "\n" not in str(exc).strip(), str(exc)
        return None


# ----------------------------------------------------------------------------- building blocks

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
                         st.sampled_from([10**400, -1, 1e308, "", "[Anna]", "\u2028", "00:00:01"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)
words = st.text(alphabet=string.ascii_letters + " []-é\u00a0<>{}\\'\"", max_size=40)
digits = st.one_of(st.integers(0, 99).map(str), st.text(alphabet="0123456789٣", min_size=1, max_size=6),
                   st.sampled_from(["9" * 5000, "", "-1", "1.5"]))


def _stamp(sep: str) -> st.SearchStrategy[str]:
    return st.builds(lambda h, m, s, ms: f"{h}:{m}:{s}{sep}{ms}", digits, digits, digits, digits)


def _blocks(sep: str) -> st.SearchStrategy[str]:
    block = st.builds(lambda n, a, arrow, b, text: f"{n}\n{a} {arrow} {b}\n{text}\n", st.integers(-2, 5000),
                      _stamp(sep), st.sampled_from(["-->", "->", "--> ", "—>"]), _stamp(sep), words)
    return st.lists(st.one_of(block, words, st.just("")), max_size=12).map("\n".join)


def _check_track(track: Any) -> None:
    """What every parsed track promises the stages that read it."""
    assert track.cues and len(track.cues) <= MAX_CUES
    for cue in track.cues:
        assert 0.0 <= cue.start <= cue.end <= MAX_FILM_S
        assert isinstance(cue.text, str) and len(cue.text) <= MAX_CUE_CHARS
        assert all(isinstance(c, str) for c in cue.characters)
    assert all(a.start <= b.start for a, b in zip(track.cues, track.cues[1:]))


def _load(path: Path, data: bytes | str, fmt: str | None = None, encoding: str | None = None) -> Any:
    from moviemem.ingest.texttracks import load_track

    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    track = refused_or(lambda: load_track(path, fmt, encoding))
    if track is not None:
        _check_track(track)
    return track


# ----------------------------------------------------------------------------- text tracks


VALID_SRT = ("1\n00:00:05,000 --> 00:00:07,000\n[Anna] Where is <i>Williams</i>?\n\n"
             "2\n00:01:10,000 --> 00:01:12,500\nHe is in the desk.\n- And you?\n\n3\n00:02:30,000 --> 00:02:31,000\nQuiet!\n")


def _mutated(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (position, characters cut, characters put) edit applied in turn."""
    for at, cut, put in edits:
        at %= len(text) + 1
        text = text[:at] + put + text[at + cut:]
    return text


edits = st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 4), st.text(alphabet=":,.->\n 0123456789{}\\<", max_size=4)),
                 max_size=6)


@FUZZ
@given(text=st.one_of(_blocks(","), edits.map(lambda e: _mutated(VALID_SRT, e))))
def test_srt(scratch: Callable[[], Path], text: str) -> None:
    _load(scratch() / "t.srt", text)


@FUZZ
@given(text=st.one_of(_blocks("."), edits.map(lambda e: _mutated(VALID_SRT.replace(",", "."), e))),
       header=st.sampled_from(["WEBVTT\n\n", "WEBVTT - x\n\n", "", "\ufeffWEBVTT\n\n"]))
def test_vtt(scratch: Callable[[], Path], text: str, header: str) -> None:
    _load(scratch() / "t.vtt", header + text)


cue = st.fixed_dictionaries({}, optional={"start": json_scalars, "end": json_scalars, "text": json_values,
                                           "characters": json_values})
cue_lists = st.one_of(st.lists(st.one_of(cue, json_values), max_size=8), json_values)


@FUZZ
@given(cues=cue_lists, nested=st.integers(0, 3))
def test_json_cues(scratch: Callable[[], Path], cues: Any, nested: int) -> None:
    text = json.dumps(cues) if nested < 3 else "[" * 50_000 + json.dumps(cues) + "]" * 50_000
    _load(scratch() / "t.json", text)


narration_line = st.builds(lambda a, b, c, d, e, f, text: f"{a}:{b}:{c}|{d}:{e}:{f}|{text}",
                           digits, digits, digits, digits, digits, digits, words)


@FUZZ
@given(lines=st.lists(st.one_of(narration_line, words), max_size=10))
def test_movie101_narration(scratch: Callable[[], Path], lines: list[str]) -> None:
    _load(scratch() / "n.txt", "\n".join(lines), fmt="movie101")


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".srt", ".vtt", ".json", ".txt", ".dat"]),
       encoding=st.sampled_from([None, "cp1252", "utf-16", "latin-1", "idna", "punycode", "unicode_escape", "utf-7"]))
def test_any_bytes_as_a_track(scratch: Callable[[], Path], data: bytes, suffix: str, encoding: str | None) -> None:
    _load(scratch() / f"t{suffix}", data, encoding=encoding)


@FUZZ
@given(name=st.one_of(st.sampled_from(["rot13", "base64", "zlib", "hex", "utf-8", "cp1252", "utf-16", "idna",
                                       "punycode", "unicode_escape", "uu", "bz2", "quopri"]), st.text(max_size=12)))
def test_an_encoding_name_is_a_text_encoding_or_refused(name: str) -> None:
    from moviemem.ingest.texttracks import text_encoding

    if refused_or(lambda: text_encoding(name)) is not None:
        assert b"".decode(name) == ""  # a taken name turns bytes into text (rot13 and base64 raise LookupError)


# ----------------------------------------------------------------------------- collections


def _mf2_root(folder: Path, numbers: tuple[str, ...] = ("6", "51")) -> Path:
    (folder / "transcripts").mkdir(parents=True)
    (folder / "synopsis").mkdir()
    for n in numbers:
        (folder / "transcripts" / f"{n}.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello.\n")
    return folder


def _check_items(got: list[Any] | None) -> None:
    for it in got or []:
        assert isinstance(it.title, str) and 0 < len(it.title) <= MAX_TITLE_CHARS
        assert it.year is None or 1850 <= it.year <= 2100
        assert isinstance(it.meta.get("synopsis", ""), str)


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


csv_cells = st.one_of(st.text(max_size=20), st.sampled_from(["6", "51", "1936", "x" * 140_000, "\x00", '"']))
metadata = st.one_of(
    st.lists(st.lists(csv_cells, max_size=4), max_size=5).map(lambda rows: _csv([["id", "title", "year"], *rows])),
    st.text(max_size=200))


@FUZZ
@given(meta=metadata, encoding=st.sampled_from([None, "cp1252", "utf-16"]), films=st.sampled_from([None, ["6"]]))
def test_mf2_metadata_csv(scratch: Callable[[], Path], meta: str, encoding: str | None, films: list[str] | None) -> None:
    from moviemem.ingest.collections import items

    root = _mf2_root(scratch())
    (root / "metadata.csv").write_bytes(meta.encode("utf-8", "surrogatepass"))
    _check_items(refused_or(lambda: items("mf2", root, encoding=encoding, films=films)))


@FUZZ
@given(data=st.binary(max_size=200), encoding=st.sampled_from([None, "cp1252"]))
def test_mf2_synopsis(scratch: Callable[[], Path], data: bytes, encoding: str | None) -> None:
    from moviemem.ingest.collections import items

    root = _mf2_root(scratch())
    (root / "synopsis" / "6.synopsis").write_bytes(data)
    _check_items(refused_or(lambda: items("mf2", root, encoding=encoding)))


film_entry = st.one_of(st.fixed_dictionaries({"title": st.one_of(st.text(max_size=30), st.integers(), st.just("t" * 600)),
                                              "year": st.one_of(st.integers(), st.text(max_size=6))}),
                       st.integers(), st.text(max_size=5))
movies = st.dictionaries(st.one_of(st.sampled_from([6, 51]), st.integers(), st.text(max_size=3)), film_entry, max_size=4)
prompt_utils = st.one_of(movies.map(lambda d: f"import random\nMOVIES_DICT = {d!r}\n"),
                         st.text(alphabet="MOVIES_DICT={}[]():,'\"0123456789 ab\n", max_size=80))


@FUZZ
@given(source=prompt_utils, films=st.sampled_from([None, ["6"], ["51", "6"]]))
def test_mf2_release_film_list(scratch: Callable[[], Path], source: str, films: list[str] | None) -> None:
    from moviemem.foundation.pysource import movies_dict
    from moviemem.ingest.collections import items

    folder = scratch()
    root, release = _mf2_root(folder / "mf2"), folder / "release"
    (release / "templates").mkdir(parents=True)
    (release / "templates" / "prompt_utils.py").write_text(source)
    table = refused_or(lambda: movies_dict(release))
    assert table is None or all(isinstance(k, int) and {"title", "year"} <= set(v) for k, v in table.items())
    _check_items(refused_or(lambda: items("mf2", root, release=release, films=films)))


@FUZZ
@given(meta=json_values, nested=st.booleans())
def test_movie101_meta(scratch: Callable[[], Path], meta: Any, nested: bool) -> None:
    from moviemem.ingest.collections import items

    root = scratch()
    (root / "narration").mkdir()
    (root / "meta").mkdir()
    (root / "narration" / "7.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    (root / "meta" / "7.json").write_text("[" * 100_000 + "]" * 100_000 if nested else json.dumps(meta))
    _check_items(refused_or(lambda: items("movie101", root)))


# ----------------------------------------------------------------------------- benchmark files


@FUZZ
@given(rows=st.lists(st.lists(csv_cells, min_size=0, max_size=5), max_size=5),
       header=st.sampled_from([["movie_id", "claim_id", "true_claim", "false_claim", "granularity"],
                               ["film_id", "fact", "fib"], ["x"]]),
       raw=st.one_of(st.none(), st.binary(max_size=100)))
def test_mf2_claim_pairs_csv(scratch: Callable[[], Path], rows: list[list[str]], header: list[str],
                             raw: bytes | None) -> None:
    from moviemem.eval.formats import load_benchmark

    path = scratch() / "pairs.csv"
    path.write_bytes(raw if raw is not None else _csv([header, *rows]).encode("utf-8", "surrogatepass"))
    got = refused_or(lambda: load_benchmark(path), one_line=False)
    assert got is None or (got.items and all(it.film_id.startswith("mf2-") for it in got.items))


@FUZZ
@given(lines=st.lists(st.one_of(json_values.map(json.dumps), st.text(max_size=30),
                                st.just('{"id": ' + "1" * 5000 + "}"), st.just("[" * 100_000)), max_size=5))
def test_benchmark_jsonl(scratch: Callable[[], Path], lines: list[str]) -> None:
    from moviemem.eval.formats import load_benchmark

    path = scratch() / "b.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    refused_or(lambda: load_benchmark(path), one_line=False)


@FUZZ
@given(data=json_values, nested=st.booleans())
def test_moviecore_json(scratch: Callable[[], Path], data: Any, nested: bool) -> None:
    from moviemem.eval.formats import load_benchmark

    path = scratch() / "m.json"
    path.write_text("[" * 100_000 + "]" * 100_000 if nested else json.dumps(data))
    refused_or(lambda: load_benchmark(path), one_line=False)


@FUZZ
@given(lines=st.lists(st.one_of(narration_line, words), max_size=6))
def test_movie101_benchmark(scratch: Callable[[], Path], lines: list[str]) -> None:
    from moviemem.eval.formats import load_benchmark

    path = scratch() / "n.txt"
    path.write_text("\n".join(lines))
    refused_or(lambda: load_benchmark(path, "movie101"), one_line=False)


# ----------------------------------------------------------------------------- a bundle's manifest


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from moviemem import Library

    return Library(tmp_path_factory.mktemp("fuzz-lib") / "lib")


manifests = st.one_of(json_values, st.fixed_dictionaries(
    {"format": st.sampled_from(["moviemem-film", "x"]), "version": st.sampled_from([1, 2, "1"])},
    optional={"film_id": json_scalars, "tables": json_values, "media": json_values}))


@FUZZ
@given(manifest=manifests, nested=st.booleans())
def test_bundle_manifest(scratch: Callable[[], Path], library: Any, manifest: Any, nested: bool) -> None:
    import tarfile

    data = b"[" * 100_000 + b"]" * 100_000 if nested else json.dumps(manifest).encode()
    path = scratch() / "b.tar"
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert refused_or(lambda: library.import_bundle(path)) is None  # no table: never a film
