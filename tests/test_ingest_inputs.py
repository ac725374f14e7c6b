"""Bad input gets one line on stderr, exit 2, and leaves no film row and no files behind;
odd but valid input ingests fine."""

from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path

import pytest
from conftest import ffmpeg, make_video

from moviemem.memory.store import MemoryStore


def _assert_clean_refusal(res, lib_dir: Path) -> None:
    assert res.code == 2, res.err
    lines = [ln for ln in res.err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.err
    assert res.out == ""
    store = MemoryStore(lib_dir)
    assert store.film_rows() == []
    assert store.table("stages") is None or store.query("stages").num_rows == 0
    assert not (lib_dir / "media").exists() or not any((lib_dir / "media").iterdir())


def _truncated(tmp_path: Path, faststart: bool) -> Path:
    full = tmp_path / ("fs.mp4" if faststart else "full.mp4")
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=24:duration=20", "-c:v", "libx264", "-pix_fmt", "yuv420p",
           *(["-movflags", "+faststart"] if faststart else []), str(full))
    cut = tmp_path / ("cut-fs.mp4" if faststart else "cut.mp4")
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    return cut


@pytest.mark.parametrize("case", ["missing", "directory", "empty", "text", "truncated", "truncated-faststart",
                                  "audio-only", "one-pixel"])
def test_bad_video_is_refused_cleanly(case: str, tmp_path: Path, cli, lib_dir: Path) -> None:
    if case == "missing":
        path = tmp_path / "nope.mp4"
    elif case == "directory":
        path = tmp_path / "adir.mp4"
        path.mkdir()
    elif case == "empty":
        path = tmp_path / "empty.mp4"
        path.touch()
    elif case == "text":
        path = tmp_path / "notes.mp4"
        path.write_text("this is not a video\n" * 50)
    elif case.startswith("truncated"):
        path = _truncated(tmp_path, faststart=case.endswith("faststart"))
    elif case == "audio-only":
        path = tmp_path / "sound.mp4"
        ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-c:a", "aac", str(path))
    else:
        path = tmp_path / "dot.mp4"
        ffmpeg("-f", "lavfi", "-i", "color=c=red:size=16x16:rate=10:duration=2", "-vf", "scale=1:1", "-c:v", "libx264rgb", str(path))
    res = cli("ingest", str(path), "--stages", "frames")
    _assert_clean_refusal(res, lib_dir)


@pytest.mark.parametrize("film_id", ["../evil", "has space", "UPPER", "-dash-first", "x" * 65, ""])
def test_bad_film_id_is_refused(film_id: str, video: Path, cli, lib_dir: Path) -> None:
    res = cli("ingest", str(video), "--film-id", film_id, "--stages", "frames")
    _assert_clean_refusal(res, lib_dir)
    assert "film id" in res.err


def test_subtitles_that_are_not_srt_or_vtt_are_refused(video: Path, tmp_path: Path, cli, lib_dir: Path) -> None:
    bad = tmp_path / "subs.srt"
    bad.write_text("just some prose\nwithout any cue timing\n")
    res = cli("ingest", str(video), "--subtitles", str(bad), "--stages", "transcript")
    _assert_clean_refusal(res, lib_dir)
    narration = tmp_path / "narr.txt"
    narration.write_text("0:0:1|0:0:2|[Anna] walks in.\n")
    res = cli("ingest", str(video), "--subtitles", str(narration), "--stages", "transcript")
    _assert_clean_refusal(res, lib_dir)


def test_subtitles_past_the_end_are_clipped_with_a_warning(video: Path, tmp_path: Path, cli) -> None:
    srt = tmp_path / "s.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,500\nHello there.\n\n2\n00:00:05,000 --> 00:00:09,000\n"
                   "Running long.\n\n3\n00:00:20,000 --> 00:00:21,000\nAfter the end.\n")
    res = cli("ingest", str(video), "--subtitles", str(srt), "--stages", "transcript", "--json")
    assert res.code == 0, res.err
    assert "clipped" in res.err and "dropped" in res.err
    summary = res.json()
    assert summary["counts"]["utterances"] == 2
    from moviemem import Library

    lib = Library(tmp_path / "lib")
    rows = lib.film("clip").utterances()
    assert [r.text for r in rows] == ["Hello there.", "Running long."]
    assert rows[-1].end == pytest.approx(6.0, abs=0.05) and rows[0].source == "subtitles"
    assert len(rows[0].vector) == 384


def test_video_without_audio_skips_asr(tmp_path: Path, cli) -> None:
    path = make_video(tmp_path / "silent.mp4", audio=False)
    res = cli("ingest", str(path), "--stages", "transcript", "--json")
    assert res.code == 0, res.err
    stages = {s["stage"]: s for s in res.json()["stages"]}
    assert stages["transcript"]["status"] == "skipped" and stages["transcript"]["reason"] == "no audio track"


def test_a_video_without_words_gets_scenes_from_its_shots(tmp_path: Path, cli) -> None:
    path = make_video(tmp_path / "silent.mp4", seconds=6.0, audio=False)  # three colours cut hard: three shots
    res = cli("ingest", str(path), "--film-id", "silent", "--json")
    assert res.code == 0, res.err
    assert res.json()["counts"]["shots"] >= 2 and res.json()["counts"]["utterances"] == 0
    data = cli("scenes", "silent", "--json").json()
    assert data["scenes"] and all(s["how"] == "pictures" and s["characters"] == [] for s in data["scenes"])
    assert all(s["summary"].endswith("shots, no words; no face seen.") or "1 shot," in s["summary"]
               for s in data["scenes"])
    assert "with no words, told by their shots and faces" in data["note"]


def test_non_ascii_path_and_default_slug(tmp_path: Path, cli) -> None:
    d = tmp_path / "Films été"
    d.mkdir()
    path = make_video(d / "Ĺa Nuit – Été (1961).mp4")
    res = cli("ingest", str(path), "--stages", "frames", "--json")
    assert res.code == 0, res.err
    assert res.json()["film_id"] == "la-nuit-ete-1961"
    assert res.json()["pools"] == {"64": 64, "128": 128, "256": 144}


def test_variable_frame_rate_video_ingests(tmp_path: Path, cli) -> None:
    cfr = make_video(tmp_path / "cfr.mp4", seconds=6)
    vfr = tmp_path / "vfr.mp4"
    # drop every other frame in the first half: timestamps become irregular
    ffmpeg("-i", str(cfr), "-vf", "select='if(lt(t,3),not(mod(n,2)),1)'", "-fps_mode", "vfr", "-c:v", "libx264",
           "-c:a", "copy", str(vfr))
    res = cli("ingest", str(vfr), "--film-id", "vfr", "--stages", "frames", "--json")
    assert res.code == 0, res.err
    from moviemem import Library

    frames = Library(tmp_path / "lib").film("vfr").frames(strip=True)
    assert [round(f.t) for f in frames] == [0, 2, 4]
    assert all(Path(f.image).is_file() for f in frames)


def _ingest_in_process(args: tuple[str, str, str]) -> int:
    from moviemem.cli import main

    video, lib, _ = args
    try:
        main(["ingest", video, "--film-id", "same", "--stages", "frames", "--library", lib])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_two_concurrent_ingests_do_not_duplicate(tmp_path: Path, lib_dir: Path) -> None:
    path = make_video(tmp_path / "c.mp4", seconds=8)
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        codes = pool.map(_ingest_in_process, [(str(path), str(lib_dir), "a"), (str(path), str(lib_dir), "b")])
    assert codes == [0, 0]
    store = MemoryStore(lib_dir)
    assert len(store.film_rows()) == 1
    frames = store.query("frames")
    assert frames.num_rows == len(set(frames.column("frame_idx").to_pylist()))
    stages = [r.stage for r in store.stage_rows("same")]
    assert sorted(stages) == ["frames", "probe"]
    shutil.rmtree(lib_dir)
