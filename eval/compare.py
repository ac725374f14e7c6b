"""Two configurations compared item by item, overall and per group of films (issue 47).

A default is chosen on one half of a benchmark's films and confirmed on the other, and a change is
kept only where it is no worse on both; so a change is reported in items, paired, per group: how
many each side got right, how many only one side did, and McNemar's exact test on those. The two
sides may be two runs (before and after a code change) or two policies of one run. Items are paired
by id when both sides asked the same question of the same film (the film and the item's digest agree);
two runs that reuse ids for other questions or films pair nothing under them, and those ids are counted
apart as unmatched. An invalid answer counts as wrong, as in every accuracy here; an item only one side
has a record for (the other run unfinished, its prompt longer than the context, an open answer not yet
judged) is counted apart, never scored as wrong. The test is McNemar's, exact below 25 discordant items; the
difference A - B comes with Newcombe's score interval for paired proportions (metrics.newcombe_paired), which
stays within ±100 points where a Wald interval overshoots on a few items. A side's policy may be named by its
full spec or by its display name (names.py).

A log is read a line at a time and each record is reduced to the few fields the comparison needs
(`Scored`), so a run of any size fits in memory.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..foundation.errors import MovieMemError
from . import metrics
from .names import display_name, matches
from .outputs import GroupComparisonLine
from .records import Config, ResultRecord
from .run import RunLog

ALL = "all"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run directory and, where it holds several, which configuration."""

    run_dir: Path
    policy: str | None = None
    backbone: str | None = None

    @cached_property
    def run(self) -> RunLog:
        """The side's run, opened once however many readers ask (the table, the page)."""
        return RunLog(self.run_dir)


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
    unmatched: int = 0  # ids both sides scored, but for another film or another question: not paired
    difference: float = math.nan  # A's accuracy minus B's on the paired items, a share
    ci_low: float = math.nan  # Newcombe's 95% interval of the difference (metrics.newcombe_paired)
    ci_high: float = math.nan

    def to_dict(self) -> GroupComparisonLine:
        """As JSON holds it: no p value, difference or interval (None) where nothing was paired, not NaN."""
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {"group": self.group, "n": self.n, "a_correct": self.a_correct, "b_correct": self.b_correct,
                "a_only": self.a_only, "b_only": self.b_only, "p_value": finite(self.p_value), "test": self.test,
                "difference": finite(self.difference), "ci_low": finite(self.ci_low), "ci_high": finite(self.ci_high),
                "a_median_input_tokens": self.a_median_input_tokens, "b_median_input_tokens": self.b_median_input_tokens,
                "unpaired": self.unpaired, "unmatched": self.unmatched}


@dataclass(frozen=True)
class Scored:
    """What a comparison keeps of one scored record."""

    film_id: str
    digest: str  # the item's content (runner.item_digest): the record's own, or its run's items.jsonl's
    correct: bool  # an invalid answer is wrong
    input_tokens: int


def pick(side: Side) -> tuple[Config, dict[str, Scored], frozenset[str]]:
    """The side's scored records by item id, and the films of all its records; its configuration named, or
    the run's only one. Records as `log_grid` counts them: of items in items.jsonl, transport faults and
    prompts too long for the context left out."""
    digests = side.run.digests  # for records written before records carried theirs
    grid: dict[Config, dict[str, Scored]] = {}
    films: dict[Config, set[str]] = {}
    for r in side.run.records():
        if r.status in ("transient", "unfit") or r.item_id not in digests:
            continue
        recs = grid.setdefault(r.config, {})
        films.setdefault(r.config, set()).add(r.film_id)
        if _scored(r):
            recs[r.item_id] = Scored(r.film_id, r.item_digest or digests[r.item_id], bool(r.correct),
                                     r.usage.input_tokens)
    configs = [c for c in grid if (side.policy is None or matches(side.policy, c[0]))
               and (side.backbone in (None, c[1]))]
    if len(configs) != 1:
        raise MovieMemError(_not_one(side, configs, sorted(grid)))
    return configs[0], grid[configs[0]], frozenset(films[configs[0]])


def _not_one(side: Side, matching: Sequence[Config], held: Sequence[Config]) -> str:
    """Why a side names no configuration, or several: what was asked, and what the run holds."""
    def listed(configs: Sequence[Config]) -> str:
        return "; ".join(f"policy {display_name(p)!r} with backbone {b!r}" for p, b in configs)

    if not held:
        return f"{side.run_dir} holds no scored answers yet"
    asked = " with ".join(f"{what} {name!r}" for what, name in (("policy", side.policy), ("backbone", side.backbone))
                          if name is not None)
    if not matching:
        return f"{side.run_dir} holds no answers of {asked}; it holds {listed(held)}"
    return (f"{side.run_dir} holds {len(matching)} configurations{' of ' + asked if asked else ''} "
            f"({listed(matching)}); "
            "name the policy, and the backbone where two share a policy")


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


def _median(records: Sequence[Scored]) -> float | None:
    return statistics.median(r.input_tokens for r in records) if records else None


def compare(a: Side, b: Side, groups: Mapping[str, frozenset[str]] | None = None) -> list[GroupComparison]:
    """Rows for every item, then for each group of films, in the order given."""
    (config_a, recs_a, films_a), (config_b, recs_b, films_b) = pick(a), pick(b)
    if a.run_dir.resolve() == b.run_dir.resolve() and config_a == config_b:
        raise MovieMemError("both sides are the same configuration of the same run; name two policies")
    groups = groups or {}
    films = films_a | films_b
    for name, ids in groups.items():
        if not ids & films:
            raise MovieMemError(f"group {name!r} names no film of these runs ({', '.join(sorted(ids))})")
    rows = []
    for name, ids in [(ALL, films), *groups.items()]:
        scored_a = {k: r for k, r in recs_a.items() if r.film_id in ids}
        scored_b = {k: r for k, r in recs_b.items() if r.film_id in ids}
        shared = [k for k in scored_a if k in scored_b]
        both = [k for k in shared if (scored_a[k].film_id, scored_a[k].digest) == (scored_b[k].film_id, scored_b[k].digest)]
        p = metrics.mcnemar([scored_a[k].correct for k in both], [scored_b[k].correct for k in both])
        rows.append(GroupComparison(
            name, len(both), sum(scored_a[k].correct for k in both), sum(scored_b[k].correct for k in both),
            p.n10 or 0, p.n01 or 0, p.p_value, p.test, _median([scored_a[k] for k in both]),
            _median([scored_b[k] for k in both]), len(scored_a.keys() ^ scored_b.keys()), len(shared) - len(both),
            p.diff, p.ci_low, p.ci_high))
    return rows
