"""The synthetic film's timeline: its script laid out on the film's clock, frame-exact.

Pure given a `measure` of speech length, so the truth can be planned and tested without rendering:
short films drop optional lines, long ones get filler scenes, and the slack is spread over the shots.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..foundation.errors import MovieMemError
from .script import RATE_WPM, Character, Scene, Script, Shot, filler_scene, voice_options

FPS = 24
LEAD_S, GAP_S, TAIL_S = 0.35, 0.4, 0.45  # silence before, between and after lines in a shot
FILL_UNTIL = 0.85  # add filler scenes until the natural length reaches this share of the target
Measure = Callable[[str, str], float]  # (voice, text) -> seconds of speech


@dataclass(frozen=True)
class TimedLine:
    speaker: str
    voice: str
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class TimedShot:
    scene: int  # index into Timeline.scenes
    shot: Shot
    start: float
    end: float
    lines: tuple[TimedLine, ...]


@dataclass
class Timeline:
    """The script laid out on the film's clock (screen time), frame-exact shot boundaries."""

    script: Script
    fps: int
    duration: float
    scenes: list[Scene]
    shots: list[TimedShot]
    events: dict[str, str]  # key -> description, screen order of first appearance
    event_ids: dict[str, str] = field(default_factory=dict)  # key -> "e001"...
    event_spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    story_order: dict[str, int] = field(default_factory=dict)

    def scene_span(self, index: int) -> tuple[float, float]:
        shots = [s for s in self.shots if s.scene == index]
        return shots[0].start, shots[-1].end

    def scene_index(self, key: str) -> int:
        return next(i for i, s in enumerate(self.scenes) if s.key == key)


def estimate_seconds(voice: str, text: str) -> float:
    """Speech length without synthesis (tests, planning), fitted to espeak-ng at RATE_WPM and
    scaled by the voice's own speed."""
    speed = voice_options(voice).speed or RATE_WPM
    return round(0.35 + 0.33 * len(text.split()) * RATE_WPM / speed, 3)


def _natural(shot: Shot, cast: dict[str, Character], measure: Measure) -> float:
    if not shot.lines:
        return shot.hold
    speech = sum(measure(cast[ln.speaker].voice, ln.text) for ln in shot.lines)
    return max(shot.hold, LEAD_S + speech + GAP_S * (len(shot.lines) - 1) + TAIL_S)


def _frames(seconds: float, fps: int) -> int:
    return math.ceil(round(seconds * fps, 6))


def min_minutes(script: Script, measure: Measure = estimate_seconds, fps: int = FPS) -> float:
    """Shortest film that holds the core plot without its optional lines."""
    core = [replace(s, shots=tuple(replace(sh, lines=tuple(ln for ln in sh.lines if not ln.optional))
                                   for sh in s.shots)) for s in script.scenes]
    frames = sum(_frames(_natural(sh, script.cast, measure), fps) for s in core for sh in s.shots)
    return frames / fps / 60.0


def layout(script: Script, minutes: float, measure: Measure = estimate_seconds, fps: int = FPS) -> Timeline:
    """Fit the script to `minutes`: drop optional lines when short, add filler when long, then
    spread the remaining slack over the shots (most to shots without speech)."""
    target = round(minutes * 60 * fps)
    cast = script.cast

    def total(scenes: list[Scene]) -> int:
        return sum(_frames(_natural(sh, cast, measure), fps) for s in scenes for sh in s.shots)

    rng = random.Random(script.seed * 104729 + 3)
    scenes = list(script.scenes)
    optional = [ln for s in scenes for sh in s.shots for ln in sh.lines if ln.optional]
    rng.shuffle(optional)
    while total(scenes) > target and optional:  # drop colour lines one at a time until the plot fits
        gone = optional.pop()
        scenes = [replace(s, shots=tuple(replace(sh, lines=tuple(ln for ln in sh.lines if ln is not gone))
                                         for sh in s.shots)) for s in scenes]
    if total(scenes) > target:
        need = math.ceil(total(scenes) / fps / 60 * 100) / 100
        raise MovieMemError(f"{minutes:g} minutes is too short for the synthetic film: use at least {need:g}")
    events = dict(script.events)
    # Filler goes after these core scenes only; never between confession, flashback and return.
    slots = [k for k in ("letter", "news", "plan", "search", "return") if any(s.key == k for s in scenes)]
    extra: dict[str, list[Scene]] = {k: [] for k in slots}
    natural = total(scenes)
    n = 0
    while natural < FILL_UNTIL * target:
        after = rng.choice(slots)
        anchor = next(s for s in scenes if s.key == after)
        before = extra[after][-1].kind if extra[after] else anchor.place
        scene, desc = filler_scene(script, rng, n, anchor.time if anchor.time != "night" else "morning", before)
        extra[after].append(scene)
        events[scene.key] = desc
        natural += total([scene])
        n += 1
    ordered: list[Scene] = []
    for s in scenes:
        ordered.append(s)
        ordered += extra.get(s.key, [])

    flat = [(i, sh) for i, s in enumerate(ordered) for sh in s.shots]
    base = [_frames(_natural(sh, cast, measure), fps) for _, sh in flat]
    weights = [3.0 if not sh.lines else 1.0 for _, sh in flat]
    slack = target - sum(base)
    shares = [slack * w / sum(weights) for w in weights]
    add = [math.floor(x) for x in shares]
    for j in sorted(range(len(flat)), key=lambda j: (add[j] - shares[j], j))[: slack - sum(add)]:
        add[j] += 1  # largest remainders get the leftover frames

    shots: list[TimedShot] = []
    frame = 0
    for (i, sh), nb, extra_f in zip(flat, base, add, strict=True):
        start, end = frame / fps, (frame + nb + extra_f) / fps
        t = start + LEAD_S + 0.3 * extra_f / fps  # part of the slack before the first line
        lines = []
        for ln in sh.lines:
            voice = cast[ln.speaker].voice
            d = measure(voice, ln.text)
            lines.append(TimedLine(ln.speaker, voice, ln.text, round(t, 3), round(t + d, 3)))
            t += d + GAP_S
        shots.append(TimedShot(i, sh, round(start, 3), round(end, 3), tuple(lines)))
        frame += nb + extra_f

    tl = Timeline(script, fps, round(frame / fps, 3), ordered, shots, {})
    for ts in shots:  # events in order of first appearance on screen
        for k in ts.shot.events:
            a, b = tl.event_spans.get(k, (ts.start, ts.end))
            tl.event_spans[k] = (min(a, ts.start), max(b, ts.end))
            tl.events.setdefault(k, events[k])
    tl.event_ids = {k: f"e{j + 1:03d}" for j, k in enumerate(tl.events)}
    flash = {k for ts in shots if ordered[ts.scene].flashback for k in ts.shot.events}
    story = [k for k in tl.events if k in flash] + [k for k in tl.events if k not in flash]
    tl.story_order = {k: j for j, k in enumerate(story)}
    return tl
