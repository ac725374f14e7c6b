"""Postprocessor steps: what the routed retriever does to its searches' hits, one step a type.

The routed retriever searches each channel with each query, then hands the rankings to the steps its
settings name (`GatherSettings.steps`), in order, the way llama-index hands nodes to its node
postprocessors: fuse them into one ranking, put informative hits first, widen line hits, rerank by a
judge, and, when the ranking is packed for a reader, fit it to the token budget. A plug-in adds a step
as it adds a retriever: `moviemem.register("postprocessor", name, factory)` (or the entry-point group
`moviemem.postprocessors`); `steps` then names it, with its own settings where it has any
(`steps=[fuse, widen(lines=1), mine(k=3)]`). The factory (a class) takes the gathering's settings and,
where it declares a nested `Settings` dataclass, its own, checked against their types; a step that calls
a model sets `needs_judge`, and the retriever then asks its caller for the relevance judge.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from ..foundation.specs import checked, parse_call, setting_types
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
    budget (`hits.budget` set), after every step that does not. A step may also set `needs_judge` (True: it
    reads `hits.judge`, so the retriever's caller must offer one; read by `needs_judge()`, False if absent)."""

    packs: bool

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]: ...


class Fuse:
    """The searches' rankings as one (reciprocal rank, or round-robin with fusion=interleave), each option's
    own best lines first (option_lines). Both are the gathering's settings, not the step's: they also decide
    how deep each search goes and which lines lead."""

    packs = False
    needs_judge = False

    def __init__(self, gather: GatherSettings):
        self.fusion = gather.fusion

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        fused = fuse(hits.searches) if self.fusion == "rrf" else interleave(hits.searches)
        if not hits.leads:
            return fused
        lead: dict[str, Evidence] = {}
        for e in hits.leads:
            lead.setdefault(e.key, e)
        return list(lead.values()) + [e for e in fused if e.key not in lead]


class InformativeFirst:
    """Lines with no content of their own after the informative hits (leave the step out to keep the order)."""

    packs = False
    needs_judge = False

    def __init__(self, gather: GatherSettings):
        pass

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        return informative_first(ranked)


class Widen:
    """Each line hit as the stretch of `lines` rows either side of it; with grow, as its own row, for
    fit-budget's rings to grow as the budget allows."""

    packs = False
    needs_judge = False

    @dataclass
    class Settings:
        # neighbours shown either side of a line hit. With 1, more hits fit 1,000 tokens (MF² dev MCQ recall
        # 0.82 -> 0.87, coverage 0.80 -> 0.83; with option_lines=1, 0.92 / 0.87), but `local` answered 24 of 30
        # (23 with option_lines=1) instead of 25: shorter blocks, more misread ones
        lines: int = 2
        grow: bool = False  # leave the neighbours to fit-budget(rings=N) (hybrid[context=budget] before)

    def __init__(self, gather: GatherSettings, settings: Settings | None = None):
        own = settings or self.Settings()
        self.rows = own.lines
        self.n = 0 if own.grow else own.lines

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        return [widen(e, self.n) for e in ranked] if self.rows else ranked


class Rerank:
    """The first `k` distinct candidates reordered by the judge, fused with the search order (0: off)."""

    packs = False
    needs_judge = True  # where k > 0 (set per instance)

    @dataclass
    class Settings:
        # each candidate is a model call, counted in the answer's input tokens. With `local` and 30: MF2 dev MCQ
        # recall at 1,000 tokens 0.82 -> 0.90 at a median 5,450 tokens of judgements, but 25-26 of 30 answered
        # against 27 (more of what is shown misread). Off by default: for better readers
        k: int = 0

    def __init__(self, gather: GatherSettings, settings: Settings | None = None):
        self.n = (settings or self.Settings()).k
        self.needs_judge = self.n > 0  # the retriever asks its caller for a judge (a backbone) only then

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
    """The ranking cut to the budget (rows shown once, passages merged); with rings, hits alone fill
    core_share of it, then their neighbours, up to `rings` either side."""

    packs = True
    needs_judge = False

    @dataclass
    class Settings:
        # small to big (hybrid[context=budget] before): the hits alone first, then their neighbours, nearest and
        # best-ranked first. Shows more of the gold evidence (MF² dev MCQ recall 0.82 -> 0.87 at 1,000 tokens with
        # rings=2) but answered no MCQ differently there (25/30 both) and lost 3 net of the synthetic film's 41
        rings: int = 0
        core_share: float = 0.6

    def __init__(self, gather: GatherSettings, settings: Settings | None = None):
        own = settings or self.Settings()
        if not 0 < own.core_share <= 1:
            raise MovieMemError(f"step fit-budget setting core_share must be in (0, 1], not {own.core_share}")
        self.rings, self.core_share = own.rings, own.core_share

    def postprocess(self, ranked: list[Evidence], hits: Hits) -> list[Evidence]:
        if hits.budget is None:
            raise MovieMemError("fit-budget runs when a ranking is packed, with a budget")
        if self.rings:
            return fit_budget(ranked, hits.budget, hits.lines, core_share=self.core_share, rings=self.rings)
        return fit_budget(ranked, hits.budget, hits.lines)


def widen(e: Evidence, n: int) -> Evidence:
    """A line hit as the stretch of n rows either side of it (merged and charged like a passage)."""
    if e.kind not in ("utterance", "caption") or e.rows is not None:
        return e
    idx = int(e.id.split(":", 1)[1])
    return replace(e, rows=(e.kind, max(0, idx - n), idx + n))


POSTPROCESSORS: Registry[Callable[..., Postprocessor]] = Registry("postprocessor")
for _name, _step in [("fuse", Fuse), ("informative-first", InformativeFirst), ("widen", Widen), ("rerank", Rerank),
                     ("fit-budget", FitBudget)]:
    POSTPROCESSORS.add(_name, _step, description=(_step.__doc__ or "").split("\n")[0])


def get_postprocessor(spec: str, gather: GatherSettings) -> Postprocessor:
    """A step by its spelling in `steps`, `name` or `name(key=value,...)`: the registry's factory called with
    the gathering's settings and, where it declares a `Settings` dataclass, its own, each checked against its
    type (a plug-in's factory is checked to make a step)."""
    name, written = parse_call(spec, "step")
    factory = POSTPROCESSORS.get(name)
    own = getattr(factory, "Settings", None)
    fields = [f.name for f in dataclasses.fields(own)] if dataclasses.is_dataclass(own) else []
    unknown = [k for k in written if k not in fields]
    if unknown:
        raise MovieMemError(f"step {name} has no setting {unknown[0]!r}; settings: {', '.join(fields) or 'none'}")
    if own is None or not fields:
        made = factory(gather)
    else:
        hints = setting_types(own)
        made = factory(gather, own(**{k: checked(f"step {name}", k, v, hints.get(k)) for k, v in written.items()}))
    if not isinstance(made, Postprocessor):
        raise MovieMemError(f"postprocessor {name!r} ({POSTPROCESSORS.entry(name).source}) made a {type(made).__name__}, "
                            "not a Postprocessor (a `packs` flag and a `postprocess(ranked, hits)` method)")
    return made


def needs_judge(step: Postprocessor) -> bool:
    """What a step declares (`needs_judge`, False where a plug-in written before the flag leaves it out)."""
    return bool(getattr(step, "needs_judge", False))
