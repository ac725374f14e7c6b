"""Films without video: memory from subtitles, narration or JSON cues; collection importers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem import Library, MovieMemError

SRT = "1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n\n2\n00:01:10,000 --> 00:01:12,500\nHe is in the desk.\n\n" \
      "3\n00:02:30,000 --> 00:02:31,000\nQuiet!\n"


def test_srt_as_a_film_without_video(tmp_path: Path, cli) -> None:
    srt = tmp_path / "front.srt"
    srt.write_text(SRT)
    res = cli("ingest", "--text", str(srt), "--film-id", "front-page", "--title", "The Front Page", "--year", "1931", "--json")
    assert res.code == 0, res.err
    s = res.json()
    assert s["has_video"] is False and s["duration_s"] == 151.0 and s["title"] == "The Front Page"
    assert s["counts"]["utterances"] == 3 and s["counts"]["segments"] == 3  # fixed 60 s windows: 0-60, 60-120, 120-151
    stages = {x["stage"]: x for x in s["stages"]}
    for name in ("frames", "shots", "clip", "ocr"):
        assert (stages[name]["status"], stages[name]["reason"]) == ("skipped", "no video")
    assert stages["transcript"]["status"] == "done"


def test_narration_as_captions_with_duration(tmp_path: Path) -> None:
    narr = tmp_path / "n.txt"
    narr.write_text("0:0:10|0:0:20|[Cheng Yong] drives a van.\n0:1:0|0:1:30|[Cheng Yong] feeds [Father].\n")
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(narr, film_id="dying", as_="captions", duration_s=300)
    caps = film.captions()
    assert [c.characters for c in caps] == [["Cheng Yong"], ["Cheng Yong", "Father"]]
    assert caps[0].kind == "imported" and len(caps[0].vector) == 384
    assert film.info.duration_s == 300 and film.utterances() == []
    assert {s.stage: s.reason for s in film.stages()}["transcript"].startswith("no dialogue track")
    assert len(film.segments()) == 5


def test_vtt_and_json_text_films_and_bad_ones(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    vtt = tmp_path / "a.vtt"
    vtt.write_text("WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nHello.\n")
    assert len(lib.ingest_text(vtt).utterances()) == 1
    js = tmp_path / "b.json"
    js.write_text(json.dumps([{"start": 0, "end": 2, "text": "One."}, {"start": 2, "end": 4, "text": "Two."}]))
    assert [u.text for u in lib.ingest_text(js, as_="captions").captions()] == ["One.", "Two."]
    bad = tmp_path / "c.srt"
    bad.write_text("no cues here\n")
    with pytest.raises(MovieMemError):
        lib.ingest_text(bad)
    with pytest.raises(MovieMemError):
        lib.ingest_text(vtt, film_id="x", duration_s=-1)
    assert sorted(f.film_id for f in lib.films()) == ["a", "b"]


def _write_mf2(root: Path) -> None:
    (root / "transcripts").mkdir(parents=True)
    (root / "synopsis").mkdir()
    for n in (1, 2, 10):
        (root / "transcripts" / f"{n}.srt").write_text(SRT)
        (root / "synopsis" / f"{n}.synopsis").write_text(f"Synopsis of film {n}: the reporters hide Williams.")
    (root / "metadata.csv").write_text("id,title,year\n1,The Front Page,1931\n2,His Girl Friday,1940\n")


def _write_movie101(root: Path) -> None:
    (root / "narration").mkdir(parents=True)
    (root / "meta").mkdir()
    (root / "narration" / "123.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    (root / "meta" / "123.json").write_text(json.dumps({"id": "123", "title": "我不是药神", "year": "2018", "intro": "..."}))


def test_import_collections(tmp_path: Path, cli) -> None:
    _write_mf2(tmp_path / "mf2")
    _write_movie101(tmp_path / "m101")
    res = cli("import-collection", "mf2", str(tmp_path / "mf2"), "--json")
    assert res.code == 0, res.err
    films = res.json()["films"]
    assert [f["film_id"] for f in films] == ["mf2-1", "mf2-2", "mf2-10"]
    assert (films[0]["title"], films[0]["year"]) == ("The Front Page", 1931) and films[2]["year"] is None
    lib = Library(tmp_path / "lib")
    meta = lib.film("mf2-1").meta()
    assert meta["synopsis"].startswith("Synopsis of film 1") and meta["collection"] == "mf2"
    # the synopsis is metadata only: no table row carries it
    assert all("Synopsis" not in u.text for u in lib.film("mf2-1").utterances())
    res = cli("import-collection", "movie101", str(tmp_path / "m101"), "--json")
    f = res.json()["films"][0]
    assert (f["film_id"], f["title"], f["year"], f["captions"]) == ("movie101-123", "我不是药神", 2018, 1)
    again = cli("import-collection", "mf2", str(tmp_path / "mf2"), "--json")  # resumable: cached
    assert again.code == 0 and len(again.json()["films"]) == 3
    assert cli("import-collection", "mf2", str(tmp_path / "m101")).code == 2
    assert cli("import-collection", "nope", str(tmp_path)).code == 2
