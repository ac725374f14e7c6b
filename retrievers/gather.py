"""Question-level retrieval: a question in, evidence ranked best first out, and that ranking cut to a budget.

`QuestionRetriever` is what the hybrid policy, `retrieval-eval` and `moviemem search --retriever`
call: one public `retrieve()` (argument checks, the film's rows read once) around an abstract
`_gather()`, and `pack()` to cut the ranking to a token budget. `Routed` is the built-in one: the
channels the question's wording routes to, searched with every query, then the postprocessor steps
its `GatherSettings` name (postprocess.py); plug-ins register other retrievers in
`retrievers.registry.RETRIEVERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .base import Retriever
from .characters import CharacterRetriever
from .packing import Lines, fit_budget
from .postprocess import Hits, Postprocessor, get_postprocessor
from .rerank import Judge
from .routing import channels_for, queries_for
from .settings import GatherSettings
from .text import TextRetriever
from .types import Evidence, Question, Trace


def search(hits: Hits, s: GatherSettings) -> None:
    """Every routed channel searched with every query: each ranking into `hits.searches`, each option's own
    best lines (option_lines) into `hits.leads`."""
    film, question, trace = hits.film, hits.question, hits.trace
    assert question is not None  # searching is for a question; only packing goes without one
    qtype, channels = channels_for(film, question, s.channels, s.units, trace)
    if trace is not None:
        trace.step("route", {"type": qtype, "channels": [list(c) for c in channels]})
    alone_from = 1 + len(question.options) if s.per_option and s.option_alone else None
    for kind, k in channels:
        retriever: Retriever | None = None
        if kind == "characters":
            retriever = CharacterRetriever()
            skip = "it is turned off (characters=false)" if not s.characters else CharacterRetriever.missing(film)
            if skip:
                if trace is not None:
                    trace.note(f"the characters channel is skipped: {skip}")
                continue
        if kind == "event" and not _read_events(film, s, trace):
            continue
        for i, query in enumerate(queries_for(question, s.per_option, s.option_alone)):
            n = max(k, s.candidates) if s.fusion == "rrf" else (k if i == 0 else s.per_option)
            if kind == "event":
                found = graph_hits(film, trace, query, n, s.graph_hops)
            elif retriever is not None:
                found = retriever.retrieve(film, query, k=n)
            else:
                found = TextRetriever(s.search, [kind]).retrieve(film, query, k=n)
            if trace is not None:
                trace.retrieved(kind if retriever is not None else f"{kind}:{s.search}", query, found)
            hits.searches.append(found)
            if alone_from is not None and i >= alone_from and kind in ("utterance", "caption"):
                hits.leads += found[: s.option_lines]


def _read_events(film: FilmMemory, s: GatherSettings, trace: Trace | None) -> bool:
    """Whether the event channel is read on this film (said in the trace either way)."""
    made_by = sorted({e.source or "unknown" for e in film.events()})
    if not made_by:
        if trace is not None:
            trace.note("no events in this film's memory: the event channel is skipped")
        return False
    links = sorted({r.source or "unknown" for r in film.relations()} - set(made_by))
    graph = "+".join(made_by) + (f" (links also by {'+'.join(links)})" if links else "")
    if made_by == ["rules"] and not s.rule_events:
        if trace is not None:
            trace.note(f"the film's events were made by rules{'' if links else ' alone'}, graph {graph}: "
                       "the event channel is skipped (rule_events=false)")
        return False
    if trace is not None:
        trace.note(f"event channel reads the graph made by {graph}")
    return True


def graph_hits(film: FilmMemory, trace: Trace | None, query: str, k: int, hops: int) -> list[Evidence]:
    """Matched events plus their graph neighbours; matched events alone (said in the trace)
    where the graph layer is not installed."""
    try:
        from .graph import GraphRetriever

        return GraphRetriever(hops=hops).retrieve(film, query, k=k)
    except ImportError as exc:
        if trace is not None:
            trace.note(f"graph layer unavailable ({exc}); events matched by text only")
        return TextRetriever("hybrid", ["event"]).retrieve(film, query, k=k)


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
        self.steps = [get_postprocessor(name, self.settings) for name in self.settings.steps]
        self.needs_judge = self.settings.rerank > 0 and "rerank" in self.settings.steps

    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        s = self.settings
        if s.context not in ("budget", "fixed"):
            raise MovieMemError(f"unknown context {s.context!r}; use budget or fixed")
        if not 0 < s.core_share <= 1:
            raise MovieMemError(f"core_share must be in (0, 1], not {s.core_share}")
        hits = Hits(film, lines, question, trace, judge)
        search(hits, s)
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
