"""`moviemem synth`: a synthetic film whose ground truth is known exactly.

Tests and the demo need a film where every shot, line, on-screen text, event and relation is
known, so each ingest stage and policy can be scored without a human annotator. The script
(script.py) fixes the plot and the timeline; render.py turns it into picture and sound;
questions.py writes the questions. The same seed gives byte-identical truth and benchmark files.

Files written into OUT_DIR: film.mp4, truth.json, captions.srt, mcq.jsonl, claims.jsonl,
relations.jsonl. Everything is built in a temporary folder next to OUT_DIR and moved in at the
end (truth.json last), so a killed render never leaves a half-written file under a final name.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..memory.schema import check_film_id
from . import questions
from .render import SR, H, Voicer, W, encode, paint_shots, require_tools
from .script import build_script
from .timeline import Measure, Timeline, estimate_seconds, layout

MIN_MINUTES = 2.5  # the plot needs 2.2 min at any seed (words-per-minute estimate); real voices vary a little
MAX_MINUTES = 600.0
# film.mp4 first and truth.json last: truth.json present means the set is complete.
FILES = ("film.mp4", "captions.srt", "mcq.jsonl", "claims.jsonl", "relations.jsonl", "truth.json")
Progress = Callable[[str, int, int], None]  # (step, done, total)


def check_minutes(minutes: float) -> float:
    if not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
        raise MovieMemError(f"--minutes must be a positive number, not {minutes!r}")
    if minutes < MIN_MINUTES:
        raise MovieMemError(f"--minutes {minutes:g} is too short: the synthetic film needs at least {MIN_MINUTES:g} minutes")
    if minutes > MAX_MINUTES:
        raise MovieMemError(f"--minutes {minutes:g} is too long: the synthetic film is at most {MAX_MINUTES:g} minutes")
    return float(minutes)


def plan(minutes: float = 3.0, seed: int = 7, measure: Measure = estimate_seconds) -> Timeline:
    """The timed script. With the default `measure` (a words-per-minute estimate) nothing is
    synthesized; `render` passes the real speech lengths."""
    return layout(build_script(int(seed)), check_minutes(minutes), measure)


def _r(x: float) -> float:
    return round(x, 3)


def truth(tl: Timeline, film_id: str) -> dict[str, Any]:
    """Ground truth on the film's clock; story_order ranks events in story time."""
    s = tl.script
    names = {role: c.name for role, c in s.cast.items()}
    shots = tl.shots
    scenes = []
    for i, sc in enumerate(tl.scenes):
        idx = [j for j, ts in enumerate(shots) if ts.scene == i]
        scenes.append({"idx": i, "key": sc.key, "start": shots[idx[0]].start, "end": shots[idx[-1]].end,
                       "place": s.places[sc.place].name, "time_of_day": sc.time, "flashback": sc.flashback,
                       "core": sc.core, "shots": [idx[0], idx[-1]]})
    return {
        "film_id": film_id,
        "title": s.title,
        "seed": s.seed,
        "fps": tl.fps,
        "width": W,
        "height": H,
        "sample_rate": SR,
        "duration_s": _r(tl.duration),
        "shots": [[ts.start, ts.end] for ts in shots],
        "scenes": scenes,
        "characters": [{"name": c.name, "role": c.role, "voice": c.voice, "coat": c.coat} for c in s.cast.values()],
        "utterances": [{"start": ln.start, "end": ln.end, "speaker": names[ln.speaker], "text": ln.text}
                       for ts in shots for ln in ts.lines],
        "onscreen": [{"start": ts.start, "end": ts.end, "text": " ".join(ts.shot.text), "kind": ts.shot.kind}
                     for ts in shots if ts.shot.text],
        "events": [{"id": tl.event_ids[k], "key": k, "description": d, "start": _r(tl.event_spans[k][0]),
                    "end": _r(tl.event_spans[k][1]), "story_order": tl.story_order[k]} for k, d in tl.events.items()],
        "relations": [{"src": tl.event_ids[a], "dst": tl.event_ids[b], "type": t} for a, b, t in s.relations],
    }


def _srt_time(t: float) -> str:
    ms = round(t * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def captions_srt(tl: Timeline) -> str:
    """One cue per shot with its stage direction: a stand-in for captioner output."""
    cues = [f"{n}\n{_srt_time(ts.start)} --> {_srt_time(ts.end)}\n{ts.shot.desc}\n"
            for n, ts in enumerate(tl.shots, 1)]
    return "\n".join(cues)


def documents(tl: Timeline, film_id: str) -> dict[str, str]:
    """Every text file of the render, by file name (deterministic: sorted keys, rounded floats)."""
    check_film_id(film_id)
    seed = tl.script.seed

    def jsonl(rows: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)

    return {
        "truth.json": json.dumps(truth(tl, film_id), sort_keys=True, indent=1, ensure_ascii=False) + "\n",
        "captions.srt": captions_srt(tl),
        "mcq.jsonl": jsonl(questions.mcq(tl, film_id, seed)),
        "claims.jsonl": jsonl(questions.claims(tl, film_id, seed)),
        "relations.jsonl": jsonl(questions.relations(tl, film_id)),
    }


def render(out_dir: Path, minutes: float = 3.0, seed: int = 7, film_id: str = "synth",
           progress: Progress | None = None) -> dict[str, Path]:
    """Render the film and its truth and benchmark files into `out_dir`; returns name -> path.

    `progress(step, done, total)` is called with step "voices", "stills" or "encode".
    """
    check_film_id(film_id)
    check_minutes(minutes)
    require_tools()
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.synth-", dir=out_dir.resolve().parent))
    except OSError as exc:
        raise MovieMemError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    try:
        voicer = Voicer(work / "voices")
        measured = 0

        def measure(voice: str, text: str) -> float:
            nonlocal measured
            measured += 1
            if progress and measured % 25 == 0:
                progress("voices", measured, 0)
            return voicer.measure(voice, text)

        tl = plan(minutes, seed, measure)
        for name, text in documents(tl, film_id).items():
            (work / name).write_text(text, encoding="utf-8")
        (work / "stills").mkdir()
        stills = paint_shots(tl, work / "stills", (lambda d, t: progress("stills", d, t)) if progress else None)
        encode(tl, stills, voicer, work / "film.mp4", (lambda d, t: progress("encode", d, t)) if progress else None)
        written = {}
        for name in FILES:
            os.replace(work / name, out_dir / name)
            written[name] = out_dir / name
        return written
    except OSError as exc:
        raise MovieMemError(f"cannot write the synthetic film to {out_dir}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()  # a failed render leaves no empty folder behind
