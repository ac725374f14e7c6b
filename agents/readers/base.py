"""What a reader is handed and what it is: the values below every reader.

`Reading` is the packed evidence in time order under the ids the prompt shows (E1, E2, ...); each reader's
own settings are its own (settings.py for the built-ins), given where it is named (`reader=letters(rotations=one)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...memory.view import FilmMemory
from ...retrievers.packing import Lines
from ...retrievers.types import Evidence
from ..base import Run
from ..parsing import Parsed
from ..types import Question

NOTHING_FOUND = "(nothing found)"


@dataclass
class Reading:
    """The evidence a reader reads: `ids` in time order (E1, E2, ... -> the block), `context` the text the
    prompt shows (the film's overview, then each block), `lines` the film's rows."""

    film: FilmMemory
    question: Question
    ids: dict[str, Evidence]
    context: str
    lines: Lines

    @property
    def shown(self) -> list[Evidence]:
        return list(self.ids.values())

    @property
    def text(self) -> str:
        """The context as the prompt shows it: never empty, so the model is told nothing was found."""
        return self.context or NOTHING_FOUND


class Reader(Protocol):
    """Reads a packed ranking into an answer; `budget` is the evidence it reads best from (tokens). Registered
    by name in readers/registry.py (`hybrid[reader=NAME]`)."""

    def budget(self, question: Question, default: int) -> int: ...

    def read(self, run: Run, reading: Reading) -> Parsed: ...


class BeforeRetrieval(Protocol):
    """A step that may answer a question from the film's memory before anything is retrieved (order_locate.py:
    where each option is in the film), or decline with None (said in the trace), the question then going on to
    retrieval and a reader."""

    def answer(self, run: Run, film: FilmMemory, question: Question) -> Parsed | None: ...
