"""How the routed retriever gathers evidence: its channels, queries, unit and the steps over its hits.

Below the machinery that reads it (gather.py, postprocess.py), so a postprocessor step, built in or a
plug-in's, is made from these settings without importing the retriever."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.specs import parse_call, write_call
from .routing import default_channels


@dataclass
class GatherSettings:
    """How evidence is gathered for a question: which channels, which unit, how rankings combine.

    The defaults were chosen by measurement on the MF² dev set (`moviemem retrieval-eval`, then
    answers with `local`): passages and single lines (each shown with two neighbours) searched by
    vector + BM25 and fused had the same recall at 1,000 tokens as BM25 over passages alone
    (0.88 vs 0.89 on MCQ, 0.93 vs 0.92 on claims) and answered more MCQs right (25 vs 23 of 30)."""

    search: str = "hybrid"  # vector | fts | hybrid (vector + BM25)
    channels: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=default_channels)  # routing.CHANNELS and plug-ins' routes
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
    fusion: str = "rrf"  # rrf | interleave (round-robin, each option query's first `per_option` hits)
    candidates: int = 20  # hits per query and channel before fusion
    graph_hops: int = 1
    # read a graph made by rules alone? Its events repeat dialogue the text channels already search:
    # with it, recall at 1,000 tokens on the MF² dev set fell from 0.88 to 0.85 (MCQ), 0.93 to 0.91 (claims)
    rule_events: bool = False
    characters: bool = True  # read the "characters" channel (registry entries and named characters' lines) where routed
    # what is done to the searches' hits, in order (retrievers/postprocess.py; a plug-in's step by its registered
    # name), each with its own settings where it has any: fused into one ranking, informative hits first, line
    # hits widened (`widen(lines=1)`), reranked by a judge (`rerank(k=30)`; 0, the default: off); fit-budget cuts
    # the ranking to the reader's budget when it is packed (`fit-budget(rings=2)`: small to big)
    steps: tuple[str, ...] = ("fuse", "informative-first", "widen", "rerank", "fit-budget")
    # the flat spellings of the steps' settings before they moved onto the steps (hybrid[context_lines=1,
    # rerank=30]), still taken and written onto their steps (fold_legacy), so an old run's settings mean the same
    context_lines: InitVar[int | None] = None
    context: InitVar[str | None] = None
    core_share: InitVar[float | None] = None
    informative: InitVar[bool | None] = None
    rerank: InitVar[int | None] = None

    def __post_init__(self, context_lines: int | None, context: str | None, core_share: float | None,
                      informative: bool | None, rerank: int | None) -> None:
        self.steps = fold_legacy(tuple(self.steps), context_lines=context_lines, context=context,
                                 core_share=core_share, informative=informative, rerank=rerank)


# GatherSettings' old flat spellings and their types, checked as they were before being written onto their steps
LEGACY: dict[str, Any] = {"context_lines": int, "context": str, "core_share": float, "informative": bool, "rerank": int}


def fold_legacy(steps: tuple[str, ...], *, context_lines: int | None = None, context: str | None = None,
                core_share: float | None = None, informative: bool | None = None,
                rerank: int | None = None) -> tuple[str, ...]:
    """`steps` with the old flat settings written onto the steps that own them: context_lines -> widen's lines,
    context=budget -> widen(grow) and fit-budget's rings, core_share -> fit-budget's, informative=false -> no
    informative-first, rerank=N -> rerank's k. A setting whose step is not named changes nothing, as before."""
    if context is not None and context not in ("budget", "fixed"):
        raise MovieMemError(f"unknown context {context!r}; use budget or fixed")
    parsed = [parse_call(spec, "step") for spec in steps]
    lines = context_lines if context_lines is not None else \
        next((own["lines"] for name, own in parsed if name == "widen" and "lines" in own), 2)
    out: list[str] = []
    for name, own in parsed:
        if name == "informative-first" and informative is False:
            continue
        if name == "widen":
            _put(own, "lines", context_lines, 2)
            _put(own, "grow", None if context is None else context == "budget", False)
        elif name == "fit-budget":
            _put(own, "rings", None if context is None else (lines if context == "budget" else 0), 0)
            _put(own, "core_share", core_share, 0.6)
        elif name == "rerank":
            _put(own, "k", rerank, 0)
        out.append(write_call(name, own))
    return tuple(out)


def _put(own: dict[str, Any], key: str, value: Any, default: Any) -> None:
    """A legacy value onto a step's settings, written only where it differs from the step's default."""
    if value is None:
        return
    if value == default:
        own.pop(key, None)
    else:
        own[key] = value
