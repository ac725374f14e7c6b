"""Memorization filter (CHNB appendix D): drop the questions a model answers without the film.

Several closed-book backbones see each question with the film's title and year only. Questions
are ranked by how many of them answer correctly (fewest first; ties in a fixed order given by a
hash of the id, so file position does not decide) and kept in that order while the mean
closed-book accuracy over the kept set stays at or below chance (the mean of 1/options).
An invalid closed-book answer counts as not answered from memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text
from .answerer import Answerer
from .formats import MCQ, Benchmark, item_category, load_benchmark, write_jsonl
from .outputs import CategoryExclusion, FilterLine
from .run import RunLog
from .runner import run_bench  # the filter runs a closed-book bench: a caller of the runner, like the CLI

CLOSED_BOOK = "closed-book[with_title=true]"  # title and year only


@dataclass
class FilterResult:
    kept: list[str]  # item ids, file order
    excluded: list[str]
    ranking: list[tuple[str, int]]  # (item id, backbones answering correctly), in keep order
    backbones: list[str]
    chance: float | None  # mean chance accuracy of the kept set (None: nothing kept)
    accuracy_before: float  # mean closed-book accuracy over all items
    accuracy_after: float | None  # ... over the kept items
    per_category: dict[str, CategoryExclusion]

    def to_dict(self) -> FilterLine:
        return {"kept": list(self.kept), "excluded": list(self.excluded), "ranking": list(self.ranking),
                "backbones": list(self.backbones), "chance": self.chance, "accuracy_before": self.accuracy_before,
                "accuracy_after": self.accuracy_after, "per_category": {k: v.copy() for k, v in self.per_category.items()}}


def _tiebreak(item_id: str) -> str:
    return hashlib.sha256(item_id.encode()).hexdigest()


def memorization_filter(items: Sequence[MCQ], correct: Mapping[str, Mapping[str, bool | None]]) -> FilterResult:
    """`correct[backbone][item_id]`: whether that closed-book backbone answered it right."""
    if not items:
        raise MovieMemError("the memorization filter needs at least one item")
    if not correct:
        raise MovieMemError("the memorization filter needs at least one closed-book backbone")
    bbs = sorted(correct)
    missing = [(b, it.id) for b in bbs for it in items if it.id not in correct[b]]
    if missing:
        b, iid = missing[0]
        raise MovieMemError(f"no closed-book answer from {b} for item {iid} ({len(missing)} missing)")
    hits = {it.id: sum(bool(correct[b][it.id]) for b in bbs) for it in items}
    chance_of = {it.id: 1.0 / len(it.options) for it in items}
    ranked = sorted(items, key=lambda it: (hits[it.id], _tiebreak(it.id)))
    kept_ids: list[str] = []
    acc_sum = chance_sum = 0.0
    for it in ranked:
        acc = hits[it.id] / len(bbs)
        if acc_sum + acc > chance_sum + chance_of[it.id] + 1e-12:  # mean accuracy would pass mean chance
            break
        kept_ids.append(it.id)
        acc_sum += acc
        chance_sum += chance_of[it.id]
    kept = set(kept_ids)
    counts: dict[str, list[int]] = {}  # category -> [items, excluded]
    for it in items:
        c = counts.setdefault(item_category(it) or "uncategorised", [0, 0])
        c[0] += 1
        c[1] += it.id not in kept
    cats: dict[str, CategoryExclusion] = {k: {"n": n, "excluded": out, "exclusion_rate": out / n}
                                          for k, (n, out) in counts.items()}
    def mean(ids: Sequence[str]) -> float:
        return sum(hits[i] for i in ids) / (len(bbs) * len(ids))

    return FilterResult(
        kept=[it.id for it in items if it.id in kept], excluded=[it.id for it in items if it.id not in kept],
        ranking=[(it.id, hits[it.id]) for it in ranked], backbones=bbs,
        chance=chance_sum / len(kept_ids) if kept_ids else None, accuracy_before=mean([it.id for it in items]),
        accuracy_after=mean(kept_ids) if kept_ids else None, per_category=dict(sorted(cats.items())))


def filter_benchmark(path: str | Path, backbones: Sequence[Any], out: str | Path, *, library: Any = None,
                     answerer: Answerer | None = None, run_dir: str | Path | None = None, policy: str = CLOSED_BOOK,
                     concurrency: int = 1, max_cost_usd: float | None = None, cache: str | Path | None = None,
                     fmt: str | None = None) -> tuple[FilterResult, Path, Path]:
    """Run the closed-book policy with each backbone, filter, and write `out` (JSONL, kept items in
    file order) and `out`.filter.json (the ranking and per-category exclusion rates)."""
    bench: Benchmark = load_benchmark(path, fmt, library=library)
    if bench.format != "mcq":
        raise MovieMemError(f"the memorization filter takes mcq benchmarks, not {bench.format}")
    out = Path(out)
    report = out.with_name(out.name + ".filter.json")
    if Path(path).resolve() in (out.resolve(), report.resolve()):
        raise MovieMemError(f"--out {out} would overwrite the benchmark it filters; write the filtered set elsewhere")
    run_dir = Path(run_dir) if run_dir else out.with_name(out.stem + ".closed-book")
    res = run_bench(bench, [policy], backbones, run_dir, library=library, answerer=answerer, concurrency=concurrency,
                    max_cost_usd=max_cost_usd, cache=cache)
    if res.stopped:
        raise MovieMemError(f"closed-book run incomplete ({res.stopped}); nothing filtered")
    grid = RunLog(run_dir).grid()
    wanted = {b if isinstance(b, str) else getattr(b, "name", "") for b in backbones}
    correct = {b: {r.item_id: r.correct for r in recs} for (p, b), recs in grid.items()
               if p == policy and b in wanted}
    result = memorization_filter([it for it in bench.items if isinstance(it, MCQ)], correct)  # an mcq benchmark (checked on load)
    kept = set(result.kept)
    write_jsonl([it for it in bench.items if it.id in kept], out)
    atomic_write_text(report, json.dumps({"source": str(path), "run_dir": str(run_dir), **result.to_dict()}, indent=1,
                                         default=str, allow_nan=False) + "\n")
    return result, out, report
