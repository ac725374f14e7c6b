"""Events extracted by a text backbone, per segment, and the relations between them: the model path
of the events stage (ingest/stages/events.py). Without a backbone that stage builds the rule graph
(rule_graph.py), and by default a backbone only checks its links (refine.py). With
`events_mode="extract"` this path runs instead:

1. Extraction: each segment's captions, utterances and on-screen text become numbered lines;
   the text backbone (settings.backbone) lists events with a PropBank trigger and arguments, a
   one-line description and the lines that show it, under a JSON schema. An event's time is
   the span of its lines, so times come from the memory, not from the model's arithmetic.
2. Story time: flashbacks are found from cues (flashbacks.py) and `story_order` is filled.
3. Relations: candidate pairs from time and embeddings, classified by the backbone (relations.py),
   plus the flashback edges.

Bad model output is retried, then written to `invalid.jsonl` in the run's media folder and
counted in the stage note; it never fails the stage.
"""


from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from ..backbones import system, user
from ..backbones.structured import Ask
from ..memory.schema import SegmentRow
from .prompts import EXTRACT, MAX_EVENTS, ROLES

MAX_LINES = 40  # lines per extraction request; longer segments are split into parts


@dataclass(frozen=True)
class Line:
    start: float
    end: float
    kind: str  # caption | dialogue | onscreen
    text: str
    speaker: str = ""

    def render(self) -> str:
        when = f"[{self.start:.1f}-{self.end:.1f}]"
        if self.kind == "dialogue":
            who = self.speaker or "someone"
            return f"{when} {who} says: \"{self.text}\""
        label = "on-screen text" if self.kind == "onscreen" else "we see"
        return f"{when} {label}: {self.text}"


@dataclass
class Extracted:
    trigger: str
    args: dict[str, str]
    description: str
    start: float
    end: float
    seg_idx: int


def _one_line(text: Any, limit: int) -> str:
    return " ".join(str(text).split())[:limit]


def split_by_segment(lines: list[Line], segments: list[SegmentRow]) -> list[tuple[SegmentRow, list[Line]]]:
    """Each line goes to the segment holding its midpoint; long segments become several parts."""
    starts = [seg.start for seg in segments[1:]]
    own: list[list[Line]] = [[] for _ in segments]
    for ln in lines:
        own[bisect_right(starts, (ln.start + ln.end) / 2)].append(ln)
    return [(seg, mine[i: i + MAX_LINES]) for seg, mine in zip(segments, own) for i in range(0, len(mine), MAX_LINES)]


def extraction_asks(parts: list[tuple[SegmentRow, list[Line]]], title: str, max_events: int = MAX_EVENTS) -> list[Ask]:
    asks = []
    for seg, lines in parts:
        text = EXTRACT.render(title=title or "(untitled)", seg=seg.seg_idx + 1, start=seg.start, end=seg.end,
                              lines="\n".join(ln.render() for ln in lines), max_events=max_events)
        asks.append(Ask(f"segment {seg.seg_idx} ({seg.start:.0f}-{seg.end:.0f} s)", [system(EXTRACT.system), user(text)]))
    return asks


def parse_events(data: dict[str, Any], seg: SegmentRow, lines: list[Line]) -> tuple[list[Extracted], list[dict[str, Any]]]:
    """Events grounded in the lines their seconds cover (times snap to those lines); events whose
    seconds cover no line of this part are returned as rejects."""
    out, rejects, seen = [], [], set()
    for item in data.get("events", []):
        secs = [float(x) for x in item.get("seconds", []) if isinstance(x, (int, float))]
        cited: list[Line] = []
        if len(secs) == 2:
            a, b = min(secs), max(secs)
            cited = [ln for ln in lines if min(ln.end, b) - max(ln.start, a) > 0]  # overlapping the span
            cited = cited or [ln for ln in lines if ln.start <= a <= ln.end]  # a point in time
        desc = _one_line(item.get("description", ""), 200)
        trigger = _one_line(item.get("predicate", ""), 30).lower()
        if not cited or not desc or not trigger:
            rejects.append({"why": "its seconds cover no line of this segment" if not cited
                            else "empty predicate or description", "event": item})
            continue
        key = desc.lower()
        if key in seen:
            continue
        seen.add(key)
        args = {r: _one_line(v, 80) for r, v in (item.get("roles") or {}).items() if r in ROLES and str(v).strip()}
        out.append(Extracted(trigger, args, desc, min(c.start for c in cited), max(c.end for c in cited), seg.seg_idx))
    return out, rejects
