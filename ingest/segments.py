"""Segments: shots merged greedily towards a target length, never splitting a shot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    first_shot: int
    last_shot: int


def group_shots(shots: list[tuple[float, float]], target_s: float = 60.0, min_s: float = 10.0) -> list[Segment]:
    """Close a segment at the shot boundary closest to the target (but not below the minimum);
    a short tail is merged into the segment before it, so only a film shorter than the
    minimum yields a segment under it."""
    if not shots:
        return []
    segs: list[Segment] = []
    first = 0
    start = shots[0][0]
    for i, (_, end) in enumerate(shots):
        dur = end - start
        nxt = shots[i + 1][1] - start if i + 1 < len(shots) else None
        close = dur >= target_s or (
            nxt is not None and dur >= min_s and abs(nxt - target_s) > abs(dur - target_s) and nxt > target_s
        )
        if close or nxt is None:
            segs.append(Segment(start, end, first, i))
            first, start = i + 1, end
    if len(segs) > 1 and segs[-1].end - segs[-1].start < min_s:
        tail = segs.pop()
        prev = segs.pop()
        segs.append(Segment(prev.start, tail.end, prev.first_shot, tail.last_shot))
    return segs


def fixed_windows(duration_s: float, window_s: float = 60.0, min_s: float = 10.0) -> list[Segment]:
    """Segments for films without video (no shots): fixed windows, short tail merged."""
    bounds = []
    t = 0.0
    while t < duration_s:
        bounds.append((t, min(duration_s, t + window_s)))
        t += window_s
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < min_s:
        last = bounds.pop()
        bounds[-1] = (bounds[-1][0], last[1])
    return [Segment(s, e, -1, -1) for s, e in bounds]
