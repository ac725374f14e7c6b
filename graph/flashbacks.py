"""Flashbacks and story order from cues in the memory, without a model.

A flashback is a stretch of screen time whose events happen earlier in the story than events
already shown. It is found from what marks it: captions or on-screen text that say so
("Flashback in sepia", "YEARS EARLIER"), and the dialogue that leads into it ("Years ago, I
worked with..."). Each marked block is tied to an anchor: the event shown before it that
recalls it (the one around the dialogue cue), or else the last event shown before it.

Story order: events outside flashbacks keep screen order; a block set in the distant past
("years", "long ago", "as a child") goes to the start of the story, any other block right
before its anchor. This is a rule, not an inference: two distant flashbacks keep their screen
order, and a flashback that no caption, on-screen text or dialogue marks is not found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..memory.lines import Span

# captions, on-screen text and event descriptions that mark a stretch of film as the past
# ("ago" is left to dialogue: an event that *tells* of years ago is not itself in the past;
# "in the past two hours" is a duration, not the past)
MARK = re.compile(
    r"\bflash[- ]?backs?\b|\bsepia\b|\b(?:years|months|weeks|days|decades|long|some time|a year|a month) "
    r"(?:earlier|before)\b|\bin the past\b(?!\s+(?:\w+\s+)?(?:seconds?|minutes?|hours?|days?|nights?|weeks?|months?|years?|"
    r"decades?|while|few)\b)|\bas a (?:child|boy|girl|young (?:man|woman))\b",
    re.I,
)
# dialogue (or narration) that leads into a memory
CUE = re.compile(
    r"\b(?:years|months|weeks|decades|long|a long time|many years) ago\b|\bback then\b|"
    r"\bwhen i was (?:young|a child|a boy|a girl|little)\b|\bonce upon a time\b|\bremember(?:s|ing)?\b",
    re.I,
)
DISTANT = re.compile(r"\byears?\b|\bdecades?\b|\blong\b|\bchild|\bboy\b|\bgirl\b|\byoung", re.I)


@dataclass(frozen=True)
class TimedEvent:
    event_id: str
    start: float
    end: float
    description: str = ""


@dataclass
class Block:
    start: float
    end: float
    marks: list[Span] = field(default_factory=list)
    cue: Span | None = None
    events: list[str] = field(default_factory=list)
    anchor: str | None = None
    distant: bool = False

    def rationale(self) -> str:
        mark = self.marks[0]
        why = f"shown at {self.start:.0f}-{self.end:.0f} s, marked by {mark.kind} '{_short(mark.text)}'"
        if self.cue is not None:
            why += f", after the line '{_short(self.cue.text)}' at {self.cue.start:.0f} s"
        return why


@dataclass
class FlashbackEdge:
    src: str  # the flashback event (earlier in the story)
    dst: str  # the anchor (shown earlier on screen)
    confidence: float
    rationale: str


@dataclass
class StoryTime:
    blocks: list[Block]
    edges: list[FlashbackEdge]
    story_order: dict[str, int]  # event_id -> rank in story time (0 = first)


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def marked_blocks(spans: list[Span], gap_s: float = 2.0) -> list[Block]:
    """Stretches of screen time marked as the past by captions, on-screen text or events' own descriptions."""
    marks = sorted((s for s in spans if s.kind != "dialogue" and MARK.search(s.text)), key=lambda s: s.start)
    blocks: list[Block] = []
    for m in marks:
        if blocks and m.start <= blocks[-1].end + gap_s:
            blocks[-1].end = max(blocks[-1].end, m.end)
            blocks[-1].marks.append(m)
        else:
            blocks.append(Block(m.start, m.end, [m]))
    return blocks


def _in_block(e: TimedEvent, b: Block) -> bool:
    if e.end <= e.start:
        return b.start <= e.start < b.end
    return _overlap(e.start, e.end, b.start, b.end) >= 0.5 * (e.end - e.start)


def story_time(events: list[TimedEvent], spans: list[Span], *, lookback_s: float = 60.0) -> StoryTime:
    """Flashback blocks, flashback edges (flashback event -> anchor) and the story order of `events`."""
    screen = sorted(events, key=lambda e: (e.start, e.end, e.event_id))
    blocks: list[Block] = []
    taken: set[str] = set()
    for b in marked_blocks(spans + [Span(e.start, e.end, e.description, "event") for e in screen]):
        b.events = [e.event_id for e in screen if e.event_id not in taken and _in_block(e, b)]
        before = [e for e in screen if e.start < b.start and e.event_id not in b.events]
        if not b.events or not before:
            continue  # nothing shown earlier: the film simply starts there
        taken.update(b.events)
        blocks.append(b)
    flashback_ids = {e for b in blocks for e in b.events}
    present = [e for e in screen if e.event_id not in flashback_ids]
    dialogue = sorted((s for s in spans if s.kind in ("dialogue", "caption") and CUE.search(s.text)),
                      key=lambda s: s.start)
    edges: list[FlashbackEdge] = []
    for b in blocks:
        cues = [s for s in dialogue if b.start - lookback_s <= s.start and s.end <= b.start + 1.0]
        b.cue = cues[-1] if cues else None
        shown_before = [e for e in present if e.start < b.start]
        anchor = None
        if b.cue is not None:
            around = [e for e in shown_before if _overlap(e.start, e.end, b.cue.start, b.cue.end) > 0 or
                      e.start <= b.cue.start <= e.end]
            anchor = around[-1] if around else None
        anchor = anchor or (shown_before[-1] if shown_before else None)
        b.anchor = anchor.event_id if anchor else None
        b.distant = any(DISTANT.search(s.text) for s in b.marks + ([b.cue] if b.cue else []))
        conf = 0.9 if b.cue is not None else 0.7
        if b.anchor:
            edges += [FlashbackEdge(e, b.anchor, conf, b.rationale()) for e in b.events]
    story = [e.event_id for e in present]
    head: list[str] = []
    for b in blocks:
        if b.distant or b.anchor not in story:
            head += b.events
        else:
            pos = story.index(b.anchor)
            story[pos:pos] = b.events
    order = head + story
    return StoryTime(blocks, edges, {e: i for i, e in enumerate(order)})
