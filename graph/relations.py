"""Relations between events across the whole film.

Classifying every pair is quadratic, so candidates come from two cheap signals: events close in
screen time (the next few events) and events whose descriptions are close in embedding space
(which finds links across the film: a clue and the confrontation it leads to, a memory and the
flashback that shows it). Each candidate pair, oriented by story order, is classified by the
backbone into one typed relation with a confidence and a one-line rationale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backbones import Backbone, system, user
from ..backbones.structured import Answer, Ask, ask_json
from .prompts import RELATE, RELATION_SCHEMA


@dataclass(frozen=True)
class PairParams:
    window: int = 2  # each event is paired with the next `window` events on screen
    similar: int = 2  # ... and with its `similar` nearest events by description embedding
    min_similarity: float = 0.45
    max_pairs: int = 120  # the highest-scoring pairs are classified, the rest dropped (said in the note)


@dataclass
class EventView:
    """What relation classification needs to know about an event."""

    event_id: str
    start: float
    end: float
    description: str
    story_rank: int
    flashback: bool = False

    def line(self) -> str:
        where = f"{self.start:.0f}-{self.end:.0f} s" + (", flashback" if self.flashback else "")
        return f"{self.event_id} ({where}) {self.description}"


@dataclass
class Classified:
    src: str
    dst: str
    type: str
    confidence: float
    rationale: str


def candidate_pairs(events: list[EventView], vectors: np.ndarray, p: PairParams) -> tuple[list[tuple[int, int]], int]:
    """Index pairs (earlier in story first) to classify, best first, and how many were cut by max_pairs."""
    n = len(events)
    if n < 2:
        return [], 0
    screen = sorted(range(n), key=lambda i: (events[i].start, events[i].end, events[i].event_id))
    pos = {i: k for k, i in enumerate(screen)}
    sims = vectors @ vectors.T if len(vectors) else np.zeros((n, n))
    score: dict[tuple[int, int], float] = {}

    def add(i: int, j: int) -> None:
        a, b = (i, j) if (events[i].story_rank, pos[i]) < (events[j].story_rank, pos[j]) else (j, i)
        gap = abs(pos[i] - pos[j])
        score[(a, b)] = max(score.get((a, b), -1.0), float(sims[i, j]) + (1.0 / gap if gap else 0.0))

    for k, i in enumerate(screen):
        for j in screen[k + 1: k + 1 + p.window]:
            add(i, j)
        near = [j for j in np.argsort(-sims[i]) if j != i and sims[i, j] >= p.min_similarity][: p.similar]
        for j in near:
            add(i, int(j))
    ranked = sorted(score, key=lambda ab: (-score[ab], ab))
    return ranked[: p.max_pairs], max(0, len(ranked) - p.max_pairs)


def relation_asks(events: list[EventView], pairs: list[tuple[int, int]], title: str) -> list[Ask]:
    """One request per pair; the film's event list comes first so a local model reuses it as a cached prefix."""
    listing = "\n".join(e.line() for e in sorted(events, key=lambda e: (e.start, e.event_id)))
    asks = []
    for a, b in pairs:
        ea, eb = events[a], events[b]
        text = RELATE.render(events=listing, a_id=ea.event_id, a_time=f"{ea.start:.0f} s", a_desc=ea.description,
                             b_id=eb.event_id, b_time=f"{eb.start:.0f} s", b_desc=eb.description)
        asks.append(Ask(f"relation {ea.event_id}->{eb.event_id}", [system(RELATE.system + f" Film: {title}."), user(text)]))
    return asks


def check_score(value: dict[str, Any]) -> str | None:
    c = value.get("score")
    if not isinstance(c, (int, float)) or not 0.0 <= float(c) <= 1.0:
        return "score (confidence) must be a number from 0 to 1"
    return None


def classify(backbone: Backbone, events: list[EventView], pairs: list[tuple[int, int]], *, title: str, attempts: int,
             timeout: float | None = None,
             progress: Callable[[int], None] | None = None) -> tuple[list[Classified], list[Answer]]:
    """Typed relations (type 'none' dropped) and the failed answers, to be recorded."""
    answers = ask_json(backbone, relation_asks(events, pairs, title), RELATION_SCHEMA, max_tokens=96,
                       attempts=attempts, check=check_score, timeout=timeout, progress=progress)
    out: list[Classified] = []
    for (a, b), ans in zip(pairs, answers):
        if not ans.ok or ans.data["relation"] == "none":
            continue
        rationale = " ".join(str(ans.data["rationale"]).split())[:120]
        out.append(Classified(events[a].event_id, events[b].event_id, ans.data["relation"],
                              round(float(ans.data["score"]), 3), rationale))
    return out, [a for a in answers if not a.ok]
