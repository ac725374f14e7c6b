"""Retrieval measured apart from answering: recall of gold evidence spans, no backbone (but for reranking).

Each named retriever gathers a ranked list of evidence for an item's question (the same code the
hybrid policy runs), then the list is cut to each token budget exactly as the policy cuts it, so
"recall at 1,000 tokens" is what a model with that budget would be shown. Measures per item:
recall (share of gold spans some shown evidence overlaps), coverage (share of the gold spans'
duration shown), recall@k over the raw ranking and the reciprocal rank of the first hit that
overlaps gold. Means over items, overall, per category, and apart for items whose gold evidence
lies in one span and in two or more (`by_spans`: one, several). This is how units, embedders and
fusion settings are compared, in seconds, before any answer is paid for. A retriever that reranks
with a model (`hybrid-rerank`) needs a backbone and reports the input tokens its judgements cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.base import Run
from ..agents.rerank import relevance_judge
from ..agents.types import Question
from ..backbones.base import Backbone
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_path
from ..memory.view import FilmMemory
from ..retrievers.gather import QuestionRetriever
from ..retrievers.packing import Lines
from ..retrievers.registry import DEFAULT, RETRIEVERS, describe, get_retriever
from . import evidence as ev
from .formats import Benchmark, item_category
from .outputs import ProbeScores, RetrievalEvalJson, RetrievalSummary, RetrieverResult
from .tasks import task_for

DEFAULT_BUDGETS = (250, 500, 1000, 2000, 4000)
AT_K = (1, 3, 5, 10)


@dataclass
class Probe:
    """One retrieval query with its gold spans."""

    item_id: str
    film_id: str
    category: str
    question: Question
    gold: list[tuple[float, float]]


def probes(bench: Benchmark) -> list[Probe]:
    """Each item with gold evidence asked as its format's task says (Task.probes: a multiple-choice question with its
    options; claim pairs, each claim on its own, as both are asked). A format whose task declares no probes
    is said, in one line, rather than skipped."""
    task = task_for(bench.format)
    out: list[Probe] = []
    for item in bench.items:
        gold = [(float(a), float(b)) for a, b in getattr(item, "evidence", None) or []]
        if not gold:
            continue
        declared = task.probes(item)
        if declared is None:
            raise MovieMemError(f"{bench.path}: format {bench.format!r} declares no retrieval probes (its Task.probes), "
                                "so retrieval-eval cannot ask its items")
        cat = item_category(item) or "all"
        out += [Probe(item.id if p.key is None else f"{item.id}:{p.key}", item.film_id, cat, p.question, gold)
                for p in declared]
    if not out:
        raise MovieMemError(f"{bench.path}: no item carries gold `evidence` spans; retrieval-eval needs them")
    return out


def films_of(library: Any, items: Sequence[Probe]) -> dict[str, tuple[FilmMemory, Lines]]:
    """Each probed film opened once, with the lines every probe of it is packed against."""
    films: dict[str, tuple[FilmMemory, Lines]] = {}
    for p in items:
        if p.film_id not in films:
            film = library.film(p.film_id)
            films[p.film_id] = (film, Lines(film))
    return films


def score_probe(film: FilmMemory, lines: Lines, probe: Probe, retriever: QuestionRetriever,
                budgets: Sequence[int], backbone: Backbone | None = None) -> ProbeScores:
    run = Run(backbone) if backbone is not None else None
    judge = relevance_judge(run, probe.question) if run is not None else None
    ranked = retriever.retrieve(film, probe.question, trace=run, lines=lines, judge=judge)
    spans = [(e.start, e.end) for e in ranked]
    first = ev.first_hit(spans, probe.gold)
    out: ProbeScores = {"rr": 1.0 / first if first else 0.0, "input_tokens": run.usage.input_tokens if run else 0,
                        "recall_at_k": {str(k): ev.recall(probe.gold, spans[:k]) for k in AT_K},
                        "recall_at_budget": {}, "coverage_at_budget": {}}
    for b in budgets:
        shown = [(e.start, e.end) for e in retriever.pack(ranked, b, lines)]
        out["recall_at_budget"][str(b)] = ev.recall(probe.gold, shown)
        out["coverage_at_budget"][str(b)] = ev.coverage(probe.gold, shown)
    return out


def _summary(rows: Sequence[ProbeScores], budgets: Sequence[int]) -> RetrievalSummary:
    return {"n": len(rows),
            "recall_at_budget": {str(b): ev.mean([r["recall_at_budget"][str(b)] for r in rows]) for b in budgets},
            "coverage_at_budget": {str(b): ev.mean([r["coverage_at_budget"][str(b)] for r in rows]) for b in budgets},
            "recall_at_k": {str(k): ev.mean([r["recall_at_k"][str(k)] for r in rows]) for k in AT_K},
            "mrr": ev.mean([r["rr"] for r in rows]),
            "median_input_tokens": statistics.median(r["input_tokens"] for r in rows) if rows else 0}


def retrieval_eval(library: Any, bench: Benchmark, retrievers: Sequence[str] = ("hybrid",),
                   budgets: Sequence[int] = DEFAULT_BUDGETS, progress: Callable[[int, int], None] | None = None,
                   backbone: Backbone | None = None) -> RetrievalEvalJson:
    """The `moviemem retrieval-eval --json` object; `backbone` judges candidates for the retrievers that rerank."""
    unknown = [r for r in retrievers if r not in RETRIEVERS]
    if unknown:
        raise MovieMemError(f"unknown retriever(s) {', '.join(unknown)}; known: {', '.join(RETRIEVERS.names())}")
    chosen = {name: get_retriever(name) for name in retrievers}
    reranking = [name for name, r in chosen.items() if r.needs_judge]
    if reranking and backbone is None:
        raise MovieMemError(f"{', '.join(reranking)} rerank(s) with a model: name a backbone (--backbone)")
    if not budgets or any(b < 1 for b in budgets):
        raise MovieMemError("budgets must be positive token counts")
    items = probes(bench)
    films = films_of(library, items)
    out: list[RetrieverResult] = []
    total, done = len(items) * len(retrievers), 0
    for name in retrievers:
        retriever = chosen[name]
        rows: list[tuple[Probe, ProbeScores]] = []
        for p in items:
            film, lines = films[p.film_id]
            rows.append((p, score_probe(film, lines, p, retriever, budgets, backbone if retriever.needs_judge else None)))
            done += 1
            if progress:
                progress(done, total)
        cats = sorted({p.category for p, _ in rows})
        summary = _summary([r for _, r in rows], budgets)
        spans = {"one": [r for p, r in rows if len(p.gold) == 1], "several": [r for p, r in rows if len(p.gold) > 1]}
        out.append({"name": name, "default": name == DEFAULT, "description": describe(name),
                    "recall_at_budget": summary["recall_at_budget"], "coverage_at_budget": summary["coverage_at_budget"],
                    "recall_at_k": summary["recall_at_k"], "mrr": summary["mrr"],
                    "median_input_tokens": summary["median_input_tokens"],
                    "by_category": {c: _summary([r for p, r in rows if p.category == c], budgets) for c in cats},
                    # evidence in one place, or in two or more: the second is what a single search misses
                    "by_spans": {k: _summary(v, budgets) for k, v in spans.items() if v}})
    return {"items": len(items), "budgets": list(budgets), "retrievers": out}


def plot(result: RetrievalEvalJson, path: str) -> None:
    """Recall and coverage against the evidence budget, one line per retriever."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = result["budgets"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in result["retrievers"]:
        for ax, shares in zip(axes, (r["recall_at_budget"], r["coverage_at_budget"])):
            ax.plot(budgets, [shares[str(b)] for b in budgets], marker="o", label=r["name"])
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

