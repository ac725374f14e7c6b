"""Retrieval measured apart from answering: recall of gold evidence spans, no backbone (but for reranking).

Each named retriever gathers a ranked list of evidence for an item's question (the same code the
hybrid policy runs), then the list is cut to each token budget exactly as the policy cuts it, so
"recall at 1,000 tokens" is what a model with that budget would be shown. Measures per item:
recall (share of gold spans some shown evidence overlaps), coverage (share of the gold spans'
duration shown), recall@k over the raw ranking and the reciprocal rank of the first hit that
overlaps gold. Means over items, overall and per category. This is how units, embedders and
fusion settings are compared, in seconds, before any answer is paid for. A retriever that reranks
with a model (`hybrid-rerank`) needs a backbone and reports the input tokens its judgements cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..agents.base import Run
from ..agents.packing import Lines
from ..agents.policies.hybrid import CHANNELS, GatherSettings, Hybrid, gather, pack
from ..agents.types import Question
from ..backbones.base import Backbone
from ..errors import MovieMemError
from ..files import atomic_path
from ..memory.view import FilmMemory
from . import evidence as ev
from .formats import MCQ, Benchmark, ClaimPair, item_category

DEFAULT_BUDGETS = (250, 500, 1000, 2000, 4000)
AT_K = (1, 3, 5, 10)


def _only(kind: str, k: int = 10) -> dict[str, tuple[tuple[str, int], ...]]:
    return {t: ((kind, k),) for t in CHANNELS}


def _hybrid_default() -> GatherSettings:
    s = Hybrid.Settings()
    return GatherSettings(**{f: getattr(s, f) for f in GatherSettings.__dataclass_fields__})


def _transcript(**kw: Any) -> Callable[[], GatherSettings]:
    """Settings that search the transcript channel alone, for comparing units, search modes and fusion."""
    return lambda: GatherSettings(channels=_only("utterance"), **kw)


# name -> (description, settings); "hybrid" is what the hybrid policy uses out of the box
RETRIEVERS: dict[str, tuple[str, Callable[[], GatherSettings]]] = {
    "hybrid": ("the hybrid policy's own gathering, default settings", _hybrid_default),
    "hybrid-lines": ("hybrid routing over single lines, vector + BM25, round-robin over queries (moviemem 0.1's hybrid)",
                     lambda: GatherSettings(units="lines", search="hybrid", fusion="interleave", informative=False,
                                            context_lines=0)),
    "hybrid-joined": ("the hybrid policy's gathering with each option searched only joined to the question (moviemem 0.2)",
                      lambda: replace(_hybrid_default(), option_alone=False)),
    "passages": ("passages, BM25, question and each option, fused", _transcript(units="passages", search="fts", context_lines=0)),
    "passages-hybrid": ("passages, vector + BM25", _transcript(units="passages", search="hybrid", context_lines=0)),
    "passages-vector": ("passages, vector search only", _transcript(units="passages", search="vector", context_lines=0)),
    "passages-question": ("passages, BM25, the question alone (no per-option queries)",
                          _transcript(units="passages", search="fts", per_option=0, context_lines=0)),
    "lines": ("single lines, vector + BM25, fused, informative lines first", _transcript(units="lines", search="hybrid", context_lines=0)),
    "lines-context1": ("single lines (vector + BM25) shown with 1 neighbour either side",
                       _transcript(units="lines", search="hybrid", context_lines=1, context="fixed")),
    "lines-context2": ("single lines (vector + BM25) shown with 2 neighbours either side",
                       _transcript(units="lines", search="hybrid", context_lines=2, context="fixed")),
    "lines-grow": ("single lines (vector + BM25), then up to 2 neighbours either side as the budget allows",
                   _transcript(units="lines", search="hybrid", context_lines=2, context="budget")),
    "mixed1": ("passages and single lines (1 neighbour either side) fused, BM25",
               _transcript(units="mixed", search="fts", context_lines=1, context="fixed")),
    "mixed2-hybrid": ("passages and single lines (2 neighbours either side) fused, vector + BM25",
                      _transcript(units="mixed", context_lines=2, search="hybrid", context="fixed")),
    "hybrid-grow": ("the hybrid policy's gathering, line hits widened as the budget allows (context=budget)",
                    lambda: replace(_hybrid_default(), context="budget")),
    "hybrid-option-lines": ("the hybrid policy's gathering, each option's own best line first (option_lines=1)",
                            lambda: replace(_hybrid_default(), option_lines=1)),
    "hybrid-context1": ("the hybrid policy's gathering, line hits shown with 1 neighbour either side (context_lines=1)",
                        lambda: replace(_hybrid_default(), context_lines=1)),
    "hybrid-lines-grow": ("the hybrid policy's routing over single lines, widened as the budget allows",
                          lambda: replace(_hybrid_default(), units="lines", context="budget")),
    "hybrid-rerank": ("the hybrid policy's gathering, its first 30 candidates reranked by a model's yes/no relevance "
                      "(rerank=30; needs a backbone with log-probabilities)",
                      lambda: replace(_hybrid_default(), rerank=30)),
}


@dataclass
class Probe:
    """One retrieval query with its gold spans."""

    item_id: str
    film_id: str
    category: str
    question: Question
    gold: list[tuple[float, float]]


def probes(bench: Benchmark) -> list[Probe]:
    """MCQ: the question with its options; claim pairs: each claim on its own (both are asked)."""
    out: list[Probe] = []
    for item in bench.items:
        gold = [(float(a), float(b)) for a, b in getattr(item, "evidence", None) or []]
        if not gold:
            continue
        cat = item_category(item) or "all"
        if isinstance(item, MCQ):
            out.append(Probe(item.id, item.film_id, cat, Question.make(item.question, item.options), gold))
        elif isinstance(item, ClaimPair):
            for tag, text in (("true", item.true_claim), ("false", item.false_claim)):
                out.append(Probe(f"{item.id}:{tag}", item.film_id, cat, Question(text, kind="claim"), gold))
    if not out:
        raise MovieMemError(f"{bench.path}: no item carries gold `evidence` spans; retrieval-eval needs them")
    return out


def score_probe(film: FilmMemory, lines: Lines, probe: Probe, settings: GatherSettings,
                budgets: Sequence[int], backbone: Backbone | None = None) -> dict[str, Any]:
    run = Run(backbone) if backbone is not None else None
    ranked = gather(film, probe.question, settings, run, lines)
    spans = [(e.start, e.end) for e in ranked]
    first = next((n for n, s in enumerate(spans, 1) if any(ev.overlaps(s, g) for g in probe.gold)), None)
    out: dict[str, Any] = {"rr": 1.0 / first if first else 0.0, "input_tokens": run.usage.input_tokens if run else 0,
                           "recall_at_k": {str(k): ev.recall(probe.gold, spans[:k]) for k in AT_K}}
    for b in budgets:
        shown = [(e.start, e.end) for e in pack(ranked, b, lines, settings)]
        out.setdefault("recall_at_budget", {})[str(b)] = ev.recall(probe.gold, shown)
        out.setdefault("coverage_at_budget", {})[str(b)] = ev.coverage(probe.gold, shown)
    return out


def _summary(rows: Sequence[dict[str, Any]], budgets: Sequence[int]) -> dict[str, Any]:
    return {"n": len(rows),
            "recall_at_budget": {str(b): ev.mean([r["recall_at_budget"][str(b)] for r in rows]) for b in budgets},
            "coverage_at_budget": {str(b): ev.mean([r["coverage_at_budget"][str(b)] for r in rows]) for b in budgets},
            "recall_at_k": {str(k): ev.mean([r["recall_at_k"][str(k)] for r in rows]) for k in AT_K},
            "mrr": ev.mean([r["rr"] for r in rows]),
            "median_input_tokens": statistics.median(r["input_tokens"] for r in rows) if rows else 0}


def retrieval_eval(library: Any, bench: Benchmark, retrievers: Sequence[str] = ("hybrid",),
                   budgets: Sequence[int] = DEFAULT_BUDGETS, progress: Callable[[int, int], None] | None = None,
                   backbone: Backbone | None = None) -> dict[str, Any]:
    """The `moviemem retrieval-eval --json` object; `backbone` judges candidates for the retrievers that rerank."""
    unknown = [r for r in retrievers if r not in RETRIEVERS]
    if unknown:
        raise MovieMemError(f"unknown retriever(s) {', '.join(unknown)}; known: {', '.join(RETRIEVERS)}")
    chosen = {name: RETRIEVERS[name][1]() for name in retrievers}
    reranking = [name for name, settings in chosen.items() if settings.rerank]
    if reranking and backbone is None:
        raise MovieMemError(f"{', '.join(reranking)} rerank(s) with a model: name a backbone (--backbone)")
    if not budgets or any(b < 1 for b in budgets):
        raise MovieMemError("budgets must be positive token counts")
    items = probes(bench)
    films: dict[str, tuple[FilmMemory, Lines]] = {}
    for p in items:
        if p.film_id not in films:
            film = library.film(p.film_id)
            films[p.film_id] = (film, Lines(film))
    out = []
    total, done = len(items) * len(retrievers), 0
    for name in retrievers:
        settings = chosen[name]
        rows: list[tuple[Probe, dict[str, Any]]] = []
        for p in items:
            film, lines = films[p.film_id]
            rows.append((p, score_probe(film, lines, p, settings, budgets, backbone if settings.rerank else None)))
            done += 1
            if progress:
                progress(done, total)
        cats = sorted({p.category for p, _ in rows})
        summary = _summary([r for _, r in rows], budgets)
        out.append({"name": name, "default": name == "hybrid", "description": RETRIEVERS[name][0],
                    **{k: v for k, v in summary.items() if k != "n"},
                    "by_category": {c: _summary([r for p, r in rows if p.category == c], budgets) for c in cats}})
    return {"items": len(items), "budgets": list(budgets), "retrievers": out}


def plot(result: dict[str, Any], path: str) -> None:
    """Recall and coverage against the evidence budget, one line per retriever."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = result["budgets"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in result["retrievers"]:
        for ax, key in zip(axes, ("recall_at_budget", "coverage_at_budget")):
            ax.plot(budgets, [r[key][str(b)] for b in budgets], marker="o", label=r["name"])
    for ax, title in zip(axes, ("evidence recall", "evidence coverage")):
        ax.set_xscale("log")
        ax.set_xlabel("evidence tokens shown")
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path, suffix=Path(path).suffix) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)

