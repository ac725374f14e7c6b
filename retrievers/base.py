"""The retriever base class (the one-query kind: a query string in, Evidence out).

Every retriever answers one call, `retrieve(film, query, k=..., start=..., end=...)`, and
returns scored `Evidence` best first. The base class does what all of them share (argument
checks, the time window, ordering, the cut to k) so each subclass only implements
`_retrieve`, the way llama-index's BaseRetriever wraps `_retrieve`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .types import Evidence


def visible_filter(film: FilmMemory, table: str) -> str | None:
    """The SQL filter that shows exactly the rows `film` (with its window/until) can see;
    None when the owning stage has not finished. Retrievers push it into LanceDB queries."""
    return film._where(table)  # noqa: SLF001 - the view owns visibility; retrievers reuse it, never re-implement it


class Retriever(ABC):
    """Base class: one public `retrieve()` around one abstract `_retrieve()`."""

    name: ClassVar[str] = "retriever"

    def retrieve(self, film: FilmMemory, query: str, *, k: int = 8, start: float | None = None,
                 end: float | None = None) -> list[Evidence]:
        """The k best pieces of evidence for `query` in `film`, restricted to [start, end) when
        given (on top of the film's own window or until-cutoff), best first."""
        if not isinstance(k, int) or k < 1:
            raise MovieMemError(f"k must be a positive integer, not {k!r}")
        if start is not None or end is not None:
            t0 = max(0.0, float(start or 0.0))
            t1 = float(end) if end is not None else math.inf
            if t1 <= t0:
                raise MovieMemError(f"empty time range: start {t0} >= end {t1}")
            film = film.window(t0, t1)
        found = self._retrieve(film, query or "", k)
        for ev in found:
            ev.retriever = ev.retriever or self.name
        found.sort(key=lambda e: (-e.score, e.start, e.id))  # a total order: reruns replay from the cache
        return found[:k]

    @abstractmethod
    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        """Up to k (or more; the base cuts) scored Evidence from the already restricted film."""
