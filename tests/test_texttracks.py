"""Text tracks: SRT, WebVTT, Movie101 narration and JSON, good and malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem import MovieMemError
from moviemem.ingest.texttracks import clip_to, load_track, split_characters


def test_srt_with_tags_and_a_malformed_cue(tmp_path: Path) -> None:
    p = tmp_path / "a.srt"
    p.write_text("1\n00:00:01,000 --> 00:00:02,000\n<i>Hello</i> there.\n\n"
                 "2\n00:00:03,000 -> 00:00:04,000\nbroken arrow\n\n"
                 "3\n00:00:05,000 --> 00:00:06,500\nTwo\nlines.\n")
    track = load_track(p)
    assert track.format == "srt"
    assert [(c.start, c.end, c.text) for c in track.cues] == [(1.0, 2.0, "Hello there."), (5.0, 6.5, "Two lines.")]
    assert track.warnings == [f"{p}: skipped 1 malformed cue(s) at line(s) 6"]


def test_srt_timing_line_that_does_not_parse_is_reported_with_its_line(tmp_path: Path) -> None:
    p = tmp_path / "b.srt"
    p.write_text("1\n00:00:01,000 --> 00:00:02,000\nGood.\n\n2\n00:00:xx,000 --> 00:00:04,000\nBad.\n")
    track = load_track(p)
    assert [c.text for c in track.cues] == ["Good."]
    assert any("line(s) 6" in w for w in track.warnings)


def test_cues_that_end_before_they_start_are_skipped_and_instants_kept(tmp_path: Path) -> None:
    srt = tmp_path / "t.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\nFine.\n\n2\n00:00:05,000 --> 00:00:03,000\nBackwards.\n\n"
                   "3\n00:00:07,000 --> 00:00:07,000\nShoot!\n")
    track = load_track(srt)
    assert [(c.start, c.end, c.text) for c in track.cues] == [(1.0, 2.0, "Fine."), (7.0, 7.0, "Shoot!")]
    assert track.warnings == [f"{srt}: skipped 1 cue(s) that end before they start, at line(s) 6"]
    js = tmp_path / "t.json"
    js.write_text(json.dumps([{"start": 4, "end": 2, "text": "Backwards."}, {"start": 7, "end": 7, "text": "Shoot!"}]))
    track = load_track(js)
    assert [(c.start, c.end) for c in track.cues] == [(7.0, 7.0)] and "index 0" in track.warnings[0]


def test_vtt(tmp_path: Path) -> None:
    p = tmp_path / "a.vtt"
    p.write_text("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nWhat is it?\n\n00:01:00.250 --> 00:01:02.000\n- Nothing.\n")
    track = load_track(p)
    assert track.format == "vtt" and [c.start for c in track.cues] == [1.0, 60.25]
    bad = tmp_path / "b.vtt"
    bad.write_text("00:00:01.000 --> 00:00:02.000\nno header\n")
    with pytest.raises(MovieMemError, match="WEBVTT"):
        load_track(bad)


def test_movie101_lines_keep_character_tags(tmp_path: Path) -> None:
    p = tmp_path / "n.txt"
    p.write_text("0:3:33|0:3:40|[Cheng Yong] drove a van.\nnot a cue line\n0:3:48|0:3:53|[Cheng Yong] meets [Lv].\n"
                 "0:1:00|0:1:05|Earlier.\n")
    track = load_track(p)
    assert track.format == "movie101"
    assert track.cues[0].start == 60.0  # sorted
    assert any("out of order" in w for w in track.warnings) and any("malformed line(s): 2" in w for w in track.warnings)
    assert track.cues[-1].characters == ["Cheng Yong", "Lv"] and track.cues[-1].text == "Cheng Yong meets Lv."


def test_json_cues(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps([{"start": 1, "end": 2, "text": "A [Tom] cue"}, {"start": 3, "text": "no end"}]))
    track = load_track(p)
    assert [c.characters for c in track.cues] == [["Tom"]] and "index 1" in track.warnings[0]


def test_encoding_problem_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "latin.srt"
    p.write_bytes("1\n00:00:01,000 --> 00:00:02,000\nCaf\u00e9 au lait.\n".encode("latin-1"))
    with pytest.raises(MovieMemError, match="line 3 is not valid utf-8"):
        load_track(p)
    assert load_track(p, encoding="latin-1").cues[0].text == "Café au lait."


@pytest.mark.parametrize("content", ["", "plain prose, no cues at all\n", "[1, 2, 3]"])
def test_files_without_cues_are_refused(tmp_path: Path, content: str) -> None:
    p = tmp_path / "x.txt"
    p.write_text(content)
    with pytest.raises(MovieMemError):
        load_track(p)


def test_clip_to_duration(tmp_path: Path) -> None:
    p = tmp_path / "a.srt"
    p.write_text("1\n00:00:01,000 --> 00:00:09,000\nLong.\n\n2\n00:00:12,000 --> 00:00:13,000\nLate.\n")
    clipped = clip_to(load_track(p), 5.0)
    assert [(c.start, c.end) for c in clipped.cues] == [(1.0, 5.0)]
    assert "1 cue(s) clipped and 1 dropped" in clipped.warnings[-1]


def test_split_characters() -> None:
    assert split_characters("[Anna] and [Tom] go; [Anna] waves.") == ("Anna and Tom go; Anna waves.", ["Anna", "Tom"])
