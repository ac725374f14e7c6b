"""Time-window retrieval: everything the memory holds about a stretch of the film.

Used when a question (or an agent) names a time rather than a topic, and to describe a frame
by the text nearest to it for backbones that cannot see images.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .base import Retriever
from .text import KINDS, SOURCES
from .types import Evidence


def rows_as_evidence(film: FilmMemory, kinds: Sequence[str] = KINDS, caption_kinds: Sequence[str] | None = None) -> list[Evidence]:
    """Every visible row of the given kinds, in time order, as Evidence (score 0)."""
    out: list[Evidence] = []
    for kind in kinds:
        if kind not in SOURCES:
            raise MovieMemError(f"unknown text kind {kind!r}; use {', '.join(SOURCES)}")
        if kind == "utterance":
            out += [Evidence("utterance", film.film_id, r.start, r.end, r.text, id=f"utterance:{r.idx}") for r in film.utterances()]
        elif kind == "caption":
            out += [Evidence("caption", film.film_id, r.start, r.end, r.text, id=f"caption:{r.idx}")
                    for r in film.captions() if caption_kinds is None or r.kind in caption_kinds]
        elif kind == "onscreen":
            out += [Evidence("onscreen", film.film_id, r.start, r.end, r.text, id=f"onscreen:{r.idx}") for r in film.onscreen()]
        elif kind == "passage":
            out += [Evidence("passage", film.film_id, r.start, r.end, r.text, id=f"passage:{r.idx}",
                             rows=(r.source, r.first_row, r.last_row)) for r in film.passages()]
        else:
            out += [Evidence("event", film.film_id, r.start, r.end, r.description, id=f"event:{r.event_id}") for r in film.events()]
    out.sort(key=lambda e: (e.start, e.end, e.id))
    return out


class WindowRetriever(Retriever):
    """All rows of `kinds` inside the window given to `retrieve(start=, end=)`, in time order.

    The query is not used for ranking: score falls with the distance from the window's
    middle, so a cut to k keeps the middle of the window.
    """

    name = "window"

    def __init__(self, kinds: Sequence[str] = ("utterance", "caption", "onscreen"), caption_kinds: Sequence[str] | None = None):
        self.kinds = tuple(kinds)
        self.caption_kinds = caption_kinds

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        rows = rows_as_evidence(film, self.kinds, self.caption_kinds)
        t1 = min(film.t1, film.duration_s)
        mid = (film.t0 + t1) / 2
        for ev in rows:
            ev.score = 1.0 / (1.0 + abs((ev.start + ev.end) / 2 - mid))
        return rows


def around(film: FilmMemory, t: float, *, radius: float = 15.0, kinds: Sequence[str] = ("caption", "onscreen"),
           k: int = 3) -> list[Evidence]:
    """The k rows of `kinds` nearest to time t (overlapping t first), within `radius` seconds."""
    t0, t1 = max(0.0, t - radius), t + radius
    rows = rows_as_evidence(film.window(t0, t1) if t1 > t0 else film, kinds)
    for ev in rows:
        gap = 0.0 if ev.start <= t <= ev.end else min(abs(ev.start - t), abs(ev.end - t))
        ev.score = 1.0 / (1.0 + gap)
        ev.retriever = "window"
    rows.sort(key=lambda e: (-e.score, e.start, e.id))
    return rows[:k]
