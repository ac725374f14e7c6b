"""A seeded random sample of a benchmark, optionally stratified (`bench --sample N`).

The first N items of a file (`--limit`) are often all one category or one film; a random
sample is not, and a stratified one keeps each category's (or film's) share: each stratum gets
its proportional quota by largest remainder, and every stratum gets at least one item when N
allows. The same seed picks the same items, so a rerun of a sampled bench resumes it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..foundation.errors import MovieMemError
from .formats import Benchmark, Item, item_category
from .records import BenchmarkMeta

STRATA: dict[str, Callable[[Item], Any]] = {
    "category": lambda it: item_category(it) or "",
    "film": lambda it: it.film_id,
}


def quotas(sizes: dict[Any, int], n: int) -> dict[Any, int]:
    """Items to take from each stratum: proportional (largest remainder), at least one per
    stratum when n is at least the number of strata, never more than a stratum holds."""
    total = sum(sizes.values())
    exact = {k: n * s / total for k, s in sizes.items()}
    got = {k: int(v) for k, v in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - got[k]), str(k)))[: n - sum(got.values())]:
        got[k] += 1
    if n >= len(sizes):
        for k in sorted(sizes, key=str):
            if got[k] == 0:
                donor = max(got, key=lambda d: (got[d], str(d)))
                got[donor] -= 1
                got[k] = 1
    return got


def sample(bench: Benchmark, n: int, *, stratify: str | None = None, seed: int = 0) -> Benchmark:
    """n items of `bench`, in file order; stratified by "category" or "film" when asked."""
    if n < 1:
        raise MovieMemError(f"--sample must be at least 1, not {n}")
    if stratify is not None and stratify not in STRATA:
        raise MovieMemError(f"--stratify takes {' or '.join(STRATA)}, not {stratify!r}")
    items = list(bench.items)
    meta: BenchmarkMeta = {**bench.meta, "sample": {"n": n, "stratify": stratify, "seed": seed, "of": len(items)}}
    if n >= len(items):
        return replace(bench, meta=meta)
    rng = random.Random(seed)
    if stratify is None:
        chosen = set(rng.sample(range(len(items)), n))
    else:
        key = STRATA[stratify]
        groups: dict[Any, list[int]] = {}
        for i, it in enumerate(items):
            groups.setdefault(key(it), []).append(i)
        want = quotas({k: len(v) for k, v in groups.items()}, n)
        chosen = set()
        for k in sorted(groups, key=str):
            chosen.update(rng.sample(groups[k], want[k]))
    return replace(bench, items=[it for i, it in enumerate(items) if i in chosen], meta=meta)
