"""Seconds per ingest stage for a synthetic film (default 10 minutes), on this machine.

Usage: python bench/ingest_speed.py [--minutes 10] [--work DIR]
Ends with the line `total <seconds> s = <ratio>x real time` over frames, shots, segments,
transcript (ASR), clip and ocr, and the line `all default stages: ...`, the whole ingest's wall time
over the film's length with the load average before and after (target <= 0.2x on an idle machine);
also times a second, fully cached ingest (resume target: <10%).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from moviemem import Library
from moviemem.eval.ingest_quality import boundary_f1, word_error_rate
from moviemem.foundation.config import get_settings
from moviemem.synth import render

MEASURED = ["frames", "shots", "segments", "transcript", "clip", "ocr"]


def _secs(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--clip-random-weights", action="store_true",
                    help="run the clip stage with random open_clip weights (timing only; no weights ship offline)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="moviemem-bench-"))
    film_dir = work / f"synth-{args.minutes:g}m"
    if not (film_dir / "film.mp4").exists():
        t = time.perf_counter()
        render(film_dir, minutes=args.minutes, seed=7)
        print(f"render {time.perf_counter() - t:.1f} s (not counted)")
    lib_dir = work / "lib"
    shutil.rmtree(lib_dir, ignore_errors=True)
    settings = get_settings(library=lib_dir, clip_pretrained="random" if args.clip_random_weights else None)
    lib = Library(lib_dir, settings)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    film = lib.ingest(film_dir / "film.mp4", film_id="synth")
    wall = time.perf_counter() - t0
    duration = film.info.duration_s
    total = 0.0
    for s in film.stages():
        took = _secs(s.started_at, s.finished_at)
        counted = s.stage in MEASURED
        total += took if counted else 0.0
        note = f"  ({s.status}: {s.reason})" if s.status != "done" else ""
        print(f"{s.stage:<11} {took:7.1f} s{'' if counted else '  (not counted)'}{note}")
    t1 = time.perf_counter()
    lib.ingest(film_dir / "film.mp4", film_id="synth")
    again = time.perf_counter() - t1
    print(f"wall {wall:.1f} s for a {duration:.0f} s film; cached re-ingest {again:.2f} s = {100 * again / wall:.1f}% of the first")
    truth = json.loads((film_dir / "truth.json").read_text())
    shots = boundary_f1([(s.start, s.end) for s in film.shots()], truth["shots"], tolerance_s=0.5)
    print(f"shots: F1 {shots['f1']:.3f} at +-0.5 s (precision {shots['precision']:.3f}, recall {shots['recall']:.3f}, "
          f"{shots['predicted']} cuts found, {shots['truth']} in truth)")
    wer = word_error_rate([u["text"] for u in truth["utterances"]], [u.text for u in film.utterances()])
    print(f"asr: WER {wer:.3f} against the script ({settings.asr_model}); load average {os.getloadavg()[0]:.1f}")
    print(f"total {total:.1f} s = {total / duration:.3f}x real time")
    print(f"all default stages: {wall:.1f} s = {wall / duration:.3f}x real time; load average (1/5/15 min) before "
          f"{'/'.join(f'{x:.2f}' for x in load_before)}, after {os.getloadavg()[0]:.2f}, on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
