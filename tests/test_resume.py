"""Kill -9 at five moments of an ingest, rerun, and get exactly what a clean run gets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_video

from moviemem.memory.store import MemoryStore
from moviemem.memory.view import FilmMemory

TABLES = ["films", "frames", "clip", "shots", "segments", "utterances", "captions", "onscreen"]
KILL_IN = ["frames", "shots", "transcript", "clip", "ocr"]


def _srt(path: Path, n: int, what: str) -> Path:
    path.write_text("".join(f"{i}\n00:00:{2 * i:02d},000 --> 00:00:{2 * i + 1:02d},500\n{what} {i}.\n\n"
                            for i in range(1, n + 1)))
    return path


def _ingest(video: Path, lib: Path, subs: Path, caps: Path) -> subprocess.Popen:
    # 32 frames, not 256: CLIP with random weights is most of an ingest, and resuming needs no more
    env = dict(os.environ, MOVIEMEM_CLIP_PRETRAINED="random", MOVIEMEM_FRAME_POOLS="[16, 32]")
    cmd = [sys.executable, "-c", "from moviemem.cli import main; main()", "ingest", str(video), "--film-id", "k",
           "--subtitles", str(subs), "--captions", str(caps), "--library", str(lib)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _raw_counts(lib: Path) -> dict[str, int]:
    store = MemoryStore(lib)
    return {t: store.query(t).num_rows for t in TABLES} | {"stages": len(store.stage_rows("k"))}


def _kill_during(proc: subprocess.Popen, lib: Path, stage: str, delay_s: float) -> str:
    """SIGKILL `proc` `delay_s` after `stage` starts running; returns the stage running at the kill."""
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        if (lib / "stages.lance").exists():
            running = {r.stage for r in MemoryStore(lib).stage_rows("k") if r.status == "running"}
            if stage in running:
                time.sleep(delay_s)
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if not (lib / "stages.lance").exists():
        return "nothing"
    rows = MemoryStore(lib).stage_rows("k")
    done = {r.stage for r in rows if r.status in ("done", "skipped")}
    return next((s for s in KILL_IN if s not in done), "after the last stage")


@pytest.mark.slow
def test_sigkill_at_five_moments_then_rerun_equals_clean(tmp_path: Path) -> None:
    colours = ("red", "blue", "green", "yellow", "white", "black")
    video = make_video(tmp_path / "k.mp4", seconds=24, colours=colours)
    subs, caps = _srt(tmp_path / "s.srt", 10, "Anna speaks line"), _srt(tmp_path / "c.srt", 10, "A red room, shot")

    clean_lib = tmp_path / "clean"
    proc = _ingest(video, clean_lib, subs, caps)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    clean = FilmMemory(MemoryStore(clean_lib), "k")
    want, want_raw = clean.summary()["counts"], _raw_counts(clean_lib)
    assert want["frames"] > 0 and want["shots"] >= 4 and want["utterances"] == 10 and want["captions"] == 10

    # One library, killed once inside each of five stages in pipeline order: every run resumes what the
    # kill before it left (sweeping its leftovers) and is killed further on, so each kill's state is
    # resumed once, and the last run must end exactly where the clean run did.
    lib = tmp_path / "lib"
    hit: list[str] = []
    for stage in KILL_IN:
        hit.append(_kill_during(_ingest(video, lib, subs, caps), lib, stage, delay_s=0.1))
        if (lib / "films.lance").exists() and MemoryStore(lib).film_row("k") is not None:
            seen = FilmMemory(MemoryStore(lib), "k")
            for table, n in seen.summary()["counts"].items():  # visible state is whole, never partial
                assert n in (0, want[table]), (table, n)
    proc = _ingest(video, lib, subs, caps)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    film = FilmMemory(MemoryStore(lib), "k")
    assert film.summary()["counts"] == want
    assert _raw_counts(lib) == want_raw  # nothing duplicated, leftovers swept
    assert len(list((lib / "media" / "k" / "frames").iterdir())) == 1  # images of killed runs removed
    # the kills landed inside different stages (a very short stage may end before its kill)
    assert len(set(hit) & set(KILL_IN)) >= 4, hit
