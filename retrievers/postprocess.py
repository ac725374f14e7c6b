"""Postprocessor steps: what the routed retriever does to its searches' hits, one step a type.

The routed retriever searches each channel with each query, then hands the rankings to the steps its
settings name (`GatherSettings.steps`), in order, the way llama-index hands nodes to its node
postprocessors: fuse them into one ranking, put informative hits first, widen line hits, rerank by a
judge, and, when the ranking is packed for a reader, fit it to the token budget. A plug-in adds a step
as it adds a retriever: `moviemem.register("postprocessor", name, factory)` (or the entry-point group
`moviemem.postprocessors`), the factory taking the retriever's settings; `steps` then names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from ..memory.view import FilmMemory
from .packing import Lines, fit_budget, fuse, informative_first, interleave
from .rerank import Judge, rerank
from .settings import GatherSettings
from .types import Evidence, Question, Trace


@dataclass
class Hits:
    """What a step may read besides the ranking: the film and question, the searches' own rankings (each
    channel's for each query, in search order), each option's own best lines (`leads`), the film's rows,
    the trace, the relevance judge, and, when the ranking is packed, the token budget."""

    film: FilmMemory
    lines: Lines
    question: Question | None = None  # None when packing: the ranking is cut, not searched again
    trace: Trace | None = None
    judge: Judge | None = None
    searches: list[list[Evidence]] = field(default_factory=list)
    leads: list[Evidence] = field(default_factory=list)
    budget: int | None = None  # set for the steps that pack


@runtime_checkable
class Postprocessor(Protocol):
    """One step over a question's ranked evidence. `packs`: it runs when the ranking is cut to a reader's
    budget (`hits.budget` set), after every step that does not."""

    packs: bool

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]: ...


class Fuse:
    """The searches' rankings as one (reciprocal rank, or round-robin with fusion=interleave), each option's
    own best lines first (option_lines)."""

    packs = False

    def __init__(self, settings: GatherSettings):
        self.fusion = settings.fusion

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        fused = fuse(hits.searches) if self.fusion == "rrf" else interleave(hits.searches)
        if not hits.leads:
            return fused
        lead: dict[str, Evidence] = {}
        for e in hits.leads:
            lead.setdefault(e.key, e)
        return list(lead.values()) + [e for e in fused if e.key not in lead]


class InformativeFirst:
    """Lines with no content of their own after the informative hits (informative=false: off)."""

    packs = False

    def __init__(self, settings: GatherSettings):
        self.on = settings.informative

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        return informative_first(ranked) if self.on else ranked


class Widen:
    """Each line hit as the stretch of `context_lines` rows either side of it (context=fixed); with
    context=budget, as its own row, for fit-budget to grow."""

    packs = False

    def __init__(self, settings: GatherSettings):
        self.rows = settings.context_lines
        self.n = settings.context_lines if settings.context == "fixed" else 0

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        return [widen(e, self.n) for e in ranked] if self.rows else ranked


class Rerank:
    """The first `rerank` distinct candidates reordered by the judge, fused with the search order (0: off)."""

    packs = False

    def __init__(self, settings: GatherSettings):
        self.n = settings.rerank

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        if not self.n:
            return ranked
        if hits.judge is None:
            if hits.trace is not None:
                hits.trace.note("rerank skipped: no relevance judge; the backbone's yes/no log-probabilities judge "
                                "candidates, where it gives them, for multiple choice and claims")
            return ranked
        return rerank(ranked, hits.lines, self.n, hits.judge, hits.trace)


class FitBudget:
    """The ranking cut to the budget (rows shown once, passages merged); with context=budget, hits alone
    fill core_share of it, then their neighbours."""

    packs = True

    def __init__(self, settings: GatherSettings):
        self.grow = settings.context == "budget"
        self.core_share = settings.core_share
        self.rings = settings.context_lines

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        if hits.budget is None:
            raise MovieMemError("fit-budget runs when a ranking is packed, with a budget")
        if self.grow:
            return fit_budget(ranked, hits.budget, hits.lines, core_share=self.core_share, rings=self.rings)
        return fit_budget(ranked, hits.budget, hits.lines)


def widen(e: Evidence, n: int) -> Evidence:
    """A line hit as the stretch of n rows either side of it (merged and charged like a passage)."""
    if e.kind not in ("utterance", "caption") or e.rows is not None:
        return e
    idx = int(e.id.split(":", 1)[1])
    return replace(e, rows=(e.kind, max(0, idx - n), idx + n))


POSTPROCESSORS: Registry[Callable[[GatherSettings], Postprocessor]] = Registry("postprocessor")
for _name, _step in [("fuse", Fuse), ("informative-first", InformativeFirst), ("widen", Widen), ("rerank", Rerank),
                     ("fit-budget", FitBudget)]:
    POSTPROCESSORS.add(_name, _step, description=(_step.__doc__ or "").split("\n")[0])


def get_postprocessor(name: str, settings: GatherSettings) -> Postprocessor:
    """A step by registry name, made for `settings` (a plug-in's factory is checked to make one)."""
    made = POSTPROCESSORS.get(name)(settings)
    if not isinstance(made, Postprocessor):
        raise MovieMemError(f"postprocessor {name!r} ({POSTPROCESSORS.entry(name).source}) made a {type(made).__name__}, "
                            "not a Postprocessor (a `packs` flag and a `postprocess(ranked, hits)` method)")
    return made
