"""Two configurations compared item by item, overall and per group of films (issue 47).

A default is chosen on one half of a benchmark's films and confirmed on the other, and a change is
kept only where it is no worse on both; so a change is reported in items, paired, per group: how
many each side got right, how many only one side did, and McNemar's exact test on those. The two
sides may be two runs (before and after a code change) or two policies of one run. Items are paired
by id. An invalid answer counts as wrong, as in every accuracy here; an item only one side has a
record for (the other run unfinished, its prompt longer than the context, an open answer not yet
judged) is counted apart, never scored as wrong. The test is McNemar's, exact below 25 discordant items.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from . import metrics
from .records import Config, ResultRecord
from .runner import log_grid

ALL = "all"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run directory and, where it holds several, which configuration."""

    run_dir: Path
    policy: str | None = None
    backbone: str | None = None


@dataclass(frozen=True)
class GroupComparison:
    """One group's paired figures: A's and B's right answers, the discordant items and the test."""

    group: str
    n: int
    a_correct: int
    b_correct: int
    a_only: int
    b_only: int
    p_value: float
    test: str
    a_median_input_tokens: float | None
    b_median_input_tokens: float | None
    unpaired: int  # items of this group only one side has a scored record for

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pick(side: Side) -> tuple[Config, dict[str, ResultRecord]]:
    """The side's records by item id; its configuration named, or the run's only one."""
    _, grid = log_grid(side.run_dir)
    configs = [c for c in grid if (side.policy in (None, c[0])) and (side.backbone in (None, c[1]))]
    if len(configs) != 1:
        have = ", ".join(f"{p} with {b}" for p, b in sorted(grid)) or "none"
        what = "matches" if not configs else "is ambiguous"
        raise MovieMemError(f"{side.run_dir}: the configuration asked for {what} (the run holds: {have}); "
                            "name a policy and, if needed, a backbone")
    return configs[0], {r.item_id: r for r in grid[configs[0]]}


def parse_groups(specs: Sequence[str]) -> dict[str, frozenset[str]]:
    """'NAME=film,film' each; a film in one group at most, so groups never share an item."""
    groups: dict[str, frozenset[str]] = {}
    seen: dict[str, str] = {}
    for spec in specs:
        name, sep, films = spec.partition("=")
        ids = frozenset(f.strip() for f in films.split(",") if f.strip())
        if not sep or not name.strip() or not ids:
            raise MovieMemError(f"group {spec!r}: write NAME=FILM,FILM")
        name = name.strip()
        if name in groups or name == ALL:
            raise MovieMemError(f"group {name!r} is named twice (or is the reserved name {ALL!r})")
        for f in ids:
            if f in seen:
                raise MovieMemError(f"film {f!r} is in groups {seen[f]!r} and {name!r}; a film belongs to one group")
            seen[f] = name
        groups[name] = ids
    return groups


def _scored(r: ResultRecord) -> bool:
    """Invalid answers are scored (as wrong); an answer without a verdict yet (an unjudged open one) is not."""
    return r.correct is not None or r.status == "invalid"


def _median(records: Sequence[ResultRecord]) -> float | None:
    return statistics.median(r.usage.input_tokens for r in records) if records else None


def compare(a: Side, b: Side, groups: Mapping[str, frozenset[str]] | None = None) -> list[GroupComparison]:
    """Rows for every item, then for each group of films, in the order given."""
    (config_a, recs_a), (config_b, recs_b) = pick(a), pick(b)
    if a.run_dir.resolve() == b.run_dir.resolve() and config_a == config_b:
        raise MovieMemError("both sides are the same configuration of the same run; name two policies")
    groups = groups or {}
    films = frozenset(r.film_id for r in (*recs_a.values(), *recs_b.values()))
    for name, ids in groups.items():
        if not ids & films:
            raise MovieMemError(f"group {name!r} names no film of these runs ({', '.join(sorted(ids))})")
    rows = []
    for name, ids in [(ALL, films), *groups.items()]:
        scored_a = {k: r for k, r in recs_a.items() if r.film_id in ids and _scored(r)}
        scored_b = {k: r for k, r in recs_b.items() if r.film_id in ids and _scored(r)}
        both = [k for k in scored_a if k in scored_b]
        p = metrics.mcnemar([scored_a[k].correct for k in both], [scored_b[k].correct for k in both])
        rows.append(GroupComparison(
            name, len(both), sum(bool(scored_a[k].correct) for k in both), sum(bool(scored_b[k].correct) for k in both),
            p.n10 or 0, p.n01 or 0, p.p_value, p.test, _median([scored_a[k] for k in both]),
            _median([scored_b[k] for k in both]), len(scored_a.keys() ^ scored_b.keys())))
    return rows
