"""Question-level retrieval: a question in, evidence ranked best first out, and that ranking cut to a budget.

`QuestionRetriever` is what the hybrid policy, `retrieval-eval` and `moviemem search --retriever`
call: one public `retrieve()` (argument checks, the film's rows read once) around an abstract
`_gather()`, and `pack()` to cut the ranking to a token budget. `Routed` is the built-in one: the
channels the question's wording routes to (registered channel retrievers, channels.py), searched with
every query, then the postprocessor steps its `GatherSettings` name (postprocess.py); plug-ins register
other retrievers in `retrievers.registry.RETRIEVERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .channels import Channel
from .packing import Lines, fit_budget
from .postprocess import Hits, Postprocessor, get_postprocessor, needs_judge
from .rerank import Judge
from .routing import CHANNEL_RETRIEVERS, channels_for, queries_for
from .settings import GatherSettings
from .types import Evidence, Question, Trace


def search(hits: Hits, s: GatherSettings) -> None:
    """Every routed channel (a registered channel retriever, routing.CHANNEL_RETRIEVERS) searched with every
    query: each ranking into `hits.searches`, each option's own best lines (option_lines) into `hits.leads`."""
    film, question, trace = hits.film, hits.question, hits.trace
    assert question is not None  # searching is for a question; only packing goes without one
    qtype, channels = channels_for(film, question, s.channels, s.units, trace)
    if trace is not None:
        trace.step("route", {"type": qtype, "channels": [list(c) for c in channels]})
    alone_from = 1 + len(question.options) if s.per_option and s.option_alone else None
    for kind, k in channels:
        channel = get_channel(kind, s)
        if not channel.ready(film, trace):
            continue
        for i, query in enumerate(queries_for(question, s.per_option, s.option_alone)):
            n = max(k, s.candidates) if s.fusion == "rrf" else (k if i == 0 else s.per_option)
            found = channel.search(film, query, n, trace)
            if trace is not None:
                trace.retrieved(channel.label, query, found)
            hits.searches.append(found)
            if alone_from is not None and i >= alone_from and channel.lines:
                hits.leads += found[: s.option_lines]


def get_channel(kind: str, s: GatherSettings) -> Channel:
    """The channel retriever registered for `kind`, made for these settings (a plug-in's checked to make one)."""
    made = CHANNEL_RETRIEVERS.get(kind)(s, kind)
    if not isinstance(made, Channel):
        raise MovieMemError(f"channel {kind!r} ({CHANNEL_RETRIEVERS.entry(kind).source}) made a {type(made).__name__}, "
                            "not a Channel (`label`, `lines`, `ready(film, trace)`, `search(film, query, k, trace)`)")
    return made


class QuestionRetriever(ABC):
    """A question -> evidence ranked best first, and that ranking cut to a token budget.

    Subclasses implement `_gather`; `retrieve` reads the film's rows once and checks what comes back,
    so a plug-in's mistake is one clear error, not a broken prompt. `pack` may be overridden."""

    name: str = ""  # the registry name it was created under
    needs_judge: bool = False  # True: it reranks with a judge, so callers must offer one (a backbone)

    def retrieve(self, film: FilmMemory, question: Question, *, trace: Trace | None = None,
                 lines: Lines | None = None, judge: Judge | None = None) -> list[Evidence]:
        found = self._gather(film, question, trace, Lines(film) if lines is None else lines, judge)
        bad = [type(e).__name__ for e in found if not isinstance(e, Evidence)] if isinstance(found, list) else []
        if not isinstance(found, list) or bad:
            raise MovieMemError(f"retriever {self.name or type(self).__name__!r} returned {bad[0] if bad else type(found).__name__}, "
                                "not a list of Evidence")
        for e in found:
            e.retriever = e.retriever or self.name
        return found

    @abstractmethod
    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        """Evidence for `question`, best first."""

    def pack(self, ranked: list[Evidence], budget: int, lines: Lines) -> list[Evidence]:
        """The ranking cut to `budget` tokens (rows shown once, overlapping passages merged)."""
        return fit_budget(ranked, budget, lines)


class Routed(QuestionRetriever):
    """The built-in retriever: routed channels searched with every query, then the steps its settings name
    (GatherSettings says how)."""

    def __init__(self, settings: GatherSettings | None = None, **options: Any):
        self.settings = replace(settings or GatherSettings(), **options)
        self.steps = [get_postprocessor(spec, self.settings) for spec in self.settings.steps]
        self.needs_judge = any(needs_judge(step) for step in self.steps)  # as each step declares it

    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        hits = Hits(film, lines, question, trace, judge)
        search(hits, self.settings)
        return self._run([step for step in self.steps if not step.packs], [], hits)

    def pack(self, ranked: list[Evidence], budget: int, lines: Lines) -> list[Evidence]:
        packing = [step for step in self.steps if step.packs]
        if not packing:
            return super().pack(ranked, budget, lines)
        return self._run(packing, ranked, Hits(lines.film, lines, budget=budget))

    def _run(self, steps: list[Postprocessor], ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        for step in steps:
            ranked = step.postprocess(ranked, hits)
            if not isinstance(ranked, list):
                raise MovieMemError(f"postprocessor {type(step).__name__} returned {type(ranked).__name__}, "
                                    "not a list of Evidence")
        return ranked
