"""Evidence and the retriever base class.

Every retriever answers one call, `retrieve(film, query, k=..., start=..., end=...)`, and
returns scored `Evidence` best first. The base class does what all of them share (argument
checks, the time window, ordering, the cut to k) so each subclass only implements
`_retrieve`, the way llama-index's BaseRetriever wraps `_retrieve`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory


@dataclass
class Evidence:
    """One piece of film memory offered to (or cited by) a policy.

    kind: utterance | caption | onscreen | event | passage | frame | relation | character; start/end: seconds on the
    film's clock; text: what the model reads; frame: image path for frames; score: the
    retriever's score (higher is better, comparable only within one retriever); retriever:
    which retriever produced it; id: stable within the film (`kind:row`), used for citations.
    """

    kind: str
    film_id: str
    start: float
    end: float
    text: str = ""
    frame: str | None = None
    score: float = 0.0
    retriever: str = ""
    id: str = ""
    rows: tuple[str, int, int] | None = None  # passages: (source kind, first row idx, last row idx)
    cited: bool = False  # the model named it as support for its answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        """Identity for de-duplication across retrievers."""
        return self.id or f"{self.kind}:{self.start:.3f}:{self.text[:80]}"


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
