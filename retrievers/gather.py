"""Question-level retrieval: every routed channel searched with every query, fused, widened, cut to a budget.

`QuestionRetriever` is what the hybrid policy, `retrieval-eval` and `moviemem search --retriever`
call: one public `retrieve()` (argument checks, the film's rows read once) around an abstract
`_gather()`, and `pack()` to cut the ranking to a token budget. `Routed` is the built-in one, driven
by `GatherSettings`; plug-ins register others in `retrievers.registry.RETRIEVERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .base import Retriever
from .characters import CharacterRetriever
from .packing import Lines, fit_budget, fuse, informative_first, interleave
from .rerank import Judge, rerank
from .routing import CHANNELS, channels_for, queries_for
from .text import TextRetriever
from .types import Evidence, Question, Trace


@dataclass
class GatherSettings:
    """How evidence is gathered for a question: which channels, which unit, how rankings combine.

    The defaults were chosen by measurement on the MF² dev set (`moviemem retrieval-eval`, then
    answers with `local`): passages and single lines (each shown with two neighbours) searched by
    vector + BM25 and fused had the same recall at 1,000 tokens as BM25 over passages alone
    (0.88 vs 0.89 on MCQ, 0.93 vs 0.92 on claims) and answered more MCQs right (25 vs 23 of 30)."""

    search: str = "hybrid"  # vector | fts | hybrid (vector + BM25)
    channels: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=lambda: dict(CHANNELS))
    units: str = "mixed"  # passages (grouped lines, when the film has them) | lines | mixed (both, fused)
    per_option: int = 1  # also search with each multiple-choice option (0: the question alone)
    # ... and with each option's own words: joined to the question, an option's few words are outweighed by
    # the question's, so every option query finds the same question-matching lines. On the MF² dev MCQs the
    # MRR of the first gold hit rose from 0.49 to 0.76 and recall from 0.59 to 0.77 at 450 tokens
    # (0.87 -> 0.85 at 1,000, 0.92 -> 0.95 at 2,000)
    option_alone: bool = True
    # ... and each option's best N lines of its own (the option-alone query's first single-line hits, per line
    # channel) go before the fused ranking, where they sink under lines that match the question's words. With 1,
    # MF2 dev MCQ recall at 1,000 tokens rose 0.82 -> 0.90 (coverage 0.80 -> 0.86), but `local` answered 24 of 30
    # instead of 25 and 24 of the synthetic film's 41 instead of 29: shown a line for every option, the small
    # reader picks a wrong option's line. Off by default; for readers that weigh evidence better
    option_lines: int = 0
    fusion: str = "rrf"  # rrf | interleave
    candidates: int = 20  # hits per query and channel before fusion
    informative: bool = True  # lines with no content of their own go after informative hits
    # a transcript/caption line hit is shown with up to this many neighbours on each side. With 1, more hits fit
    # 1,000 tokens (MF² dev MCQ recall 0.82 -> 0.87, coverage 0.80 -> 0.83; with option_lines=1, 0.92 / 0.87), but
    # `local` answered 24 of 30 (23 with option_lines=1) instead of 25: shorter blocks, more misread ones
    context_lines: int = 2
    # fixed: every line hit comes with all its neighbours, so a few hits fill the budget; budget: small to big,
    # the hits alone first (core_share of the budget), then their neighbours, nearest and best-ranked first.
    # budget shows more of the gold evidence (MF² dev MCQ recall 0.82 -> 0.87 at 1,000 tokens) but answered
    # no MCQ differently there (25/30 both) and lost 3 net of the synthetic film's 41 (25 -> 22): not the default
    context: str = "fixed"
    core_share: float = 0.6
    graph_hops: int = 1
    # read a graph made by rules alone? Its events repeat dialogue the text channels already search:
    # with it, recall at 1,000 tokens on the MF² dev set fell from 0.88 to 0.85 (MCQ), 0.93 to 0.91 (claims)
    rule_events: bool = False
    characters: bool = True  # read the "characters" channel (registry entries and named characters' lines) where routed
    # the first N distinct candidates reordered by a judge's relevance (the backbone's yes/no, agents/rerank.py),
    # fused with the search ranking (retrievers/rerank.py; 0: off). Each candidate is a model call, counted in the
    # answer's input tokens. With `local` and 30: MF2 dev MCQ recall at 1,000 tokens 0.82 -> 0.90 at a median
    # 5,450 tokens of judgements, but 25-26 of 30 answered against 27 (more of what is shown misread). Off by
    # default: for better readers
    rerank: int = 0

    @classmethod
    def of(cls, settings: Any) -> GatherSettings:
        """The gathering fields of a larger settings object (the hybrid policy's)."""
        return cls(**{f: getattr(settings, f) for f in cls.__dataclass_fields__})


def gather(film: FilmMemory, question: Question, s: GatherSettings, trace: Trace | None = None,
           lines: Lines | None = None, judge: Judge | None = None) -> list[Evidence]:
    """Every channel searched with every query, fused into one ranking, informative hits first; `lines`: the
    film's rows as the caller already holds them (a rerank renders its candidates from them); `judge`: what
    scores candidates when the settings rerank (without one the rerank is skipped, said in the trace)."""
    if s.context not in ("budget", "fixed"):
        raise MovieMemError(f"unknown context {s.context!r}; use budget or fixed")
    if not 0 < s.core_share <= 1:
        raise MovieMemError(f"core_share must be in (0, 1], not {s.core_share}")
    qtype, channels = channels_for(film, question, s.channels, s.units, trace)
    if trace is not None:
        trace.step("route", {"type": qtype, "channels": [list(c) for c in channels]})
    lists: list[list[Evidence]] = []
    firsts: list[Evidence] = []  # each option's own best line (option_lines), in option order
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
                found = TextRetriever(s.search, [kind]).retrieve(film, query, k=n)  # type: ignore[arg-type]  # a settings string; TextRetriever rejects a bad mode
            if trace is not None:
                trace.retrieved(kind if retriever is not None else f"{kind}:{s.search}", query, found)
            lists.append(found)
            if alone_from is not None and i >= alone_from and kind in ("utterance", "caption"):
                firsts += found[: s.option_lines]
    ranked = fuse(lists) if s.fusion == "rrf" else interleave(lists)
    if firsts:
        lead: dict[str, Evidence] = {}
        for e in firsts:
            lead.setdefault(e.key, e)
        ranked = list(lead.values()) + [e for e in ranked if e.key not in lead]
    ranked = informative_first(ranked) if s.informative else ranked
    n = s.context_lines if s.context == "fixed" else 0
    ranked = [widen(e, n) for e in ranked] if s.context_lines else ranked
    if s.rerank:
        if judge is None:
            if trace is not None:
                trace.note("rerank skipped: no relevance judge; the backbone's yes/no log-probabilities judge "
                           "candidates, where it gives them, for multiple choice and claims")
        else:
            ranked = rerank(ranked, Lines(film) if lines is None else lines, s.rerank, judge, trace)
    return ranked


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


def pack(ranked: list[Evidence], budget: int, lines: Lines, s: GatherSettings) -> list[Evidence]:
    """The gathered hits cut to the budget the way the settings widen them."""
    if s.context == "budget":
        return fit_budget(ranked, budget, lines, core_share=s.core_share, rings=s.context_lines)
    return fit_budget(ranked, budget, lines)


def widen(e: Evidence, n: int) -> Evidence:
    """A line hit as the stretch of n rows either side of it (merged and charged like a passage)."""
    if e.kind not in ("utterance", "caption") or e.rows is not None:
        return e
    idx = int(e.id.split(":", 1)[1])
    return replace(e, rows=(e.kind, max(0, idx - n), idx + n))


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
    """The built-in retriever: routed channels, every query, fused (GatherSettings says how)."""

    def __init__(self, settings: GatherSettings | None = None, **options: Any):
        self.settings = replace(settings or GatherSettings(), **options)
        self.needs_judge = self.settings.rerank > 0

    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        return gather(film, question, self.settings, trace, lines, judge)

    def pack(self, ranked: list[Evidence], budget: int, lines: Lines) -> list[Evidence]:
        return pack(ranked, budget, lines, self.settings)
