"""Passages (built by the passages stage, ingest/stages/passages.py): consecutive transcript lines (and captions) grouped into overlapping passages.

A subtitle cue is a poor unit of memory: most cues are a few words ("Sara...", "Yes."), so a
search over cues returns lines that merely share a name with the question, and the line that
answers it reads as nonsense without its neighbours. A passage is a stretch of consecutive rows
(about `window_s` seconds and at most `max_words` words) that starts every `stride_s` seconds,
so every moment of the film lies in one or two passages. Passages never cross a segment
boundary of a film with shot-grouped segments (a cut usually ends an exchange) and never
bridge a silence longer than `max_gap_s`. Times are exact: a passage spans its first row's
start to its last row's end.
"""


from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    idx: int
    start: float
    end: float
    text: str
    speaker: str = ""

    def render(self) -> str:
        text = " ".join(self.text.split())
        return f"{self.speaker}: {text}" if self.speaker else text


@dataclass(frozen=True)
class Passage:
    start: float
    end: float
    first_row: int
    last_row: int
    text: str


@dataclass(frozen=True)
class PassageParams:
    window_s: float = 40.0
    stride_s: float = 20.0
    max_words: int = 150
    max_gap_s: float = 15.0


def _groups(lines: Sequence[Line], bounds: Sequence[float], max_gap_s: float) -> list[list[Line]]:
    """Runs of lines that lie in one segment (by midpoint) with no silence over max_gap_s."""
    groups: list[list[Line]] = []
    last_seg = -1
    for ln in lines:
        seg = bisect_right(bounds, (ln.start + ln.end) / 2)
        if not groups or seg != last_seg or ln.start - groups[-1][-1].end > max_gap_s:
            groups.append([])
        groups[-1].append(ln)
        last_seg = seg
    return groups


def build_passages(lines: Sequence[Line], params: PassageParams = PassageParams(),
                   bounds: Sequence[float] = ()) -> list[Passage]:
    """Overlapping passages over `lines` (sorted by start); `bounds` are segment start times
    a passage must not cross."""
    out: list[Passage] = []
    for group in _groups(sorted(lines, key=lambda ln: (ln.start, ln.idx)), sorted(bounds), params.max_gap_s):
        i = 0
        while i < len(group):
            j, words = i, len(group[i].text.split())
            while (j + 1 < len(group) and group[j + 1].end - group[i].start <= params.window_s
                   and words + len(group[j + 1].text.split()) <= params.max_words):
                j += 1
                words += len(group[j].text.split())
            part = group[i: j + 1]
            out.append(Passage(part[0].start, max(ln.end for ln in part), part[0].idx, part[-1].idx,
                               "\n".join(ln.render() for ln in part)))
            if j == len(group) - 1:
                break
            nxt = i + 1
            while nxt <= j and group[nxt].start < group[i].start + params.stride_s:
                nxt += 1
            i = nxt
    return out
