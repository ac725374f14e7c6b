"""Order questions ("Which of these happens first?", "... comes right after X?") answered by
locating each option in the film, with no model call.

The answer to an order question is a fact the memory holds: where each option happens. A small
reader shown the options' lines does not compare their times (on the synthetic film, `local`
missed every such question with the right lines in its evidence). So each option (and the X of
"right after X") is located as its best-matching single line or caption, whose times are exact;
screen order is the order of those times, story order the story rank of the event around each
(or the last event before it), which puts flashbacks where graph/flashbacks.py placed them.

The reader answers only when the located order is decisive: the chosen option's place differs
from every other option's (no shared line, no overlap on screen, no shared event in the story).
Otherwise it says why in the trace and the question goes to the usual reader. Localisation is by
text alone, so an option worded far from the film's lines can be placed wrongly: the trace shows
each option's line and time, and `order=read` turns this reader off.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from ...foundation.timefmt import hms
from ...memory.view import FilmMemory
from ...retrievers.best_line import KINDS
from ...retrievers.packing import Lines
from ...retrievers.registry import get_retriever
from ...retrievers.types import Evidence
from ..base import Run
from ..parsing import Parsed
from ..types import Question, Step
from .claims import ordered_events
from .letters import done

_WHICH = r"^\s*(?:which|what)\b"
_VERB = r"\b(?:happens?|happened|comes?|came|occurs?|occurred|takes? place|took place|is shown|are shown)\b"
_EXTREME = re.compile(_WHICH + r".*" + _VERB + r".*\b(?P<word>first|earliest|last|latest|final)\b", re.I)
_RELATIVE = re.compile(_WHICH + r".*" + _VERB + r"\s+(?:right |just |immediately |directly )?(?P<word>after|before)\s+"
                       r"(?P<ref>[^?]+?)\s*\??\s*$", re.I)
_SCREEN = re.compile(r"\b(?:in the film|in the movie|on screen|is shown|are shown|shown)\b", re.I)
_STORY = re.compile(r"\b(?:in the story|in story (?:order|time)|chronologic\w*)\b", re.I)
# a qualifier that closes the X of "right after X" ("... after the fire in the film"): it names the clock,
# not the event, so it is cut from X; the same words inside X ("Tom tells his story") stay
_TRAILING = re.compile(r"(?:\s*,?\s*(?:in the (?:film|movie|story)|in story (?:order|time)|on screen|chronologically|"
                       r"as (?:it is )?shown))+\s*$", re.I)


@dataclass(frozen=True)
class OrderQuestion:
    """What an order question asks: the option placed `want` (first/last, or nearest after/before
    `ref`) on the `clock` (screen: when it is shown; story: when it happens)."""

    want: Literal["first", "last", "after", "before"]
    clock: Literal["screen", "story"]
    ref: str = ""


def parse_order(q: Question) -> OrderQuestion | None:
    """The order a multiple-choice question asks about, or None. Unqualified ("happens first")
    reads story order, since events happen in story time; "in the film" / "shown" reads screen order."""
    if q.kind != "mcq":
        return None
    rel = _RELATIVE.search(q.text)
    if rel:
        raw = rel.group("ref")
        cut = _TRAILING.search(raw)
        ref = (raw[: cut.start()] if cut else raw).strip(" ,.")
        # the clock is read outside X: from the question's head and X's closing qualifier only
        said = q.text[: rel.start("ref")] + (cut.group(0) if cut else "")
        want_rel: Literal["after", "before"] = "after" if rel.group("word").lower() == "after" else "before"
        return OrderQuestion(want_rel, _clock(said), ref) if ref else None
    m = _EXTREME.search(q.text)
    if not m:
        return None
    return OrderQuestion("first" if m.group("word").lower() in ("first", "earliest") else "last", _clock(q.text))


def _clock(said: str) -> Literal["screen", "story"]:
    return "story" if _STORY.search(said) or not _SCREEN.search(said) else "screen"


class _StoryClock:
    """Story rank of a moment: that of the event shown around it, or else of the last event shown before it."""

    def __init__(self, film: FilmMemory):
        events = sorted((e for e in film.events() if e.story_order >= 0), key=lambda e: (e.start, e.end))
        self.starts = [e.start for e in events]
        self.events = events

    def __bool__(self) -> bool:
        return bool(self.events)

    def rank(self, hit: Evidence) -> int:
        mid = (hit.start + hit.end) / 2
        around = [e for e in self.events if e.start <= mid <= e.end]
        if around:
            return min(e.story_order for e in around)
        i = bisect_right(self.starts, mid) - 1
        return self.events[i].story_order if i >= 0 else -1


def _place(hit: Evidence, clock: _StoryClock | None) -> tuple[float, float]:
    return (float(clock.rank(hit)), hit.start) if clock else (hit.start, hit.start)


def _apart(a: Evidence, b: Evidence, clock: _StoryClock | None) -> bool:
    """Two located options can be told apart: different lines, not overlapping, and (story) different events."""
    if a.key == b.key or (a.start < b.end and b.start < a.end):
        return False
    return not clock or clock.rank(a) != clock.rank(b)


def locate(run: Run, film: FilmMemory, texts: list[str]) -> list[Evidence | None]:
    """Each text's best single line or caption in the film (None where nothing matches), said in the trace."""
    retriever = get_retriever("best-line")
    lines = Lines(film)
    hits: list[Evidence | None] = []
    for text in texts:
        found = retriever.retrieve(film, Question.make(text), lines=lines) if text.strip() else []
        run.retrieved(f"locate:{'+'.join(KINDS)}", text, found)
        hits.append(found[0] if found else None)
    return hits


def claim_order(run: Run, film: FilmMemory, claim: str) -> bool | None:
    """Whether "A before/after B" agrees with the screen order of A's and B's lines in the film, or None
    where the claim orders no two events or their lines are not told apart. On the MF² dev claims that
    order two events, the located order agreed with the claim's truth for 16 of 22."""
    split = ordered_events(claim)
    if split is None:
        return None
    a, word, b = split
    ha, hb = locate(run, film, [a, b])
    if ha is None or hb is None or not _apart(ha, hb, None):
        run.note("the claim's two events are not told apart in the film")
        return None
    agrees = (ha.start < hb.start) == (word == "before")
    run.trace.append(Step("locate", {"clock": "screen", "claim": word, "events": {a: hms(ha.start), b: hms(hb.start)},
                                     "agrees": agrees}))
    run.show([ha, hb])
    for h in (ha, hb):  # the order of these two lines is what the verdict rests on
        run.evidence[h.key].cited = h.cited = True
    return agrees


def read_order(run: Run, film: FilmMemory, q: Question, order: OrderQuestion) -> Parsed | None:
    """The option the located order picks, or None (said in the trace) when it does not decide."""
    story = _StoryClock(film) if order.clock == "story" else None
    if order.clock == "story" and not story:
        run.note("order question on the story clock, but the film has no events with a story order: screen order used")
        story = None
    hits = locate(run, film, list(q.options) + ([order.ref] if order.ref else []))
    placed = {letter: hit for letter, hit in zip(q.letters, hits) if hit is not None}
    run.trace.append(Step("locate", {"clock": order.clock, "want": order.want, "ref": order.ref,
                                     "options": {k: {"id": h.id, "at": hms(h.start), "place": list(_place(h, story))}
                                                 for k, h in placed.items()},
                                     "ref_at": hms(hits[-1].start) if order.ref and hits[-1] else None}))
    if len(placed) < len(q.options):
        run.note(f"order not read by locating: {len(q.options) - len(placed)} option(s) found nowhere in the memory")
        return None
    candidates = dict(placed)
    if order.ref:
        ref = hits[-1]
        if ref is None:
            run.note(f"order not read by locating: {order.ref!r} found nowhere in the memory")
            return None
        ref_place, after = _place(ref, story), order.want == "after"
        candidates = {k: h for k, h in placed.items() if _apart(h, ref, story) and (_place(h, story) > ref_place) == after}
        if not candidates:
            run.note(f"order not read by locating: no option is placed {order.want} {order.ref!r}")
            return None
    best = sorted(candidates, key=lambda k: _place(candidates[k], story), reverse=order.want in ("last", "before"))[0]
    if any(not _apart(placed[best], placed[k], story) for k in placed if k != best):
        run.note(f"order not read by locating: option {best}'s place is not told apart from another option's")
        return None
    shown = [placed[k] for k in q.letters] + ([hits[-1]] if order.ref and hits[-1] else [])
    run.show([h for h in shown if h is not None])
    placed[best].cited = True
    run.note(f"order read by locating each option ({order.clock} order): {best} is {order.want}"
             + (f" {order.ref!r}" if order.ref else ""))
    return done(run, Parsed(best, q.options[q.letters.index(best)], None, False, how="located"))


class OrderLocate:
    """The order locator, a step before retrieval (readers/base.py `BeforeRetrieval`), not a `Reader`: it reads
    no retrieved evidence and may decline, where a reader is handed a packed ranking and always answers. An
    order question answered by locating each option in the film; None (said in the trace) where the question
    asks no order or the located order does not decide, and the question goes on to retrieval and a reader."""

    def answer(self, run: Run, film: FilmMemory, question: Question) -> Parsed | None:
        asked = parse_order(question)
        return read_order(run, film, question, asked) if asked else None
