"""MF²'s scores per granularity and per category, as the release's notebook breaks them down: pairwise
accuracy, TPR (TRUE on the true statement), TNR (FALSE on the false one) and the unparseable share,
an unparseable verdict counting as wrong in every rate (metrics.claim_pairs)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from . import metrics
from .records import ClaimScoresLine, EstimateLine, ResultRecord

GROUPS = ("granularity", "category")


def by_group(items: Sequence[Any], records: Sequence[ResultRecord], key: str) -> dict[str, metrics.ClaimScores]:
    """Claim-pair scores per value of the items' `key` (items without one under 'uncategorised');
    records[i] (a results.jsonl line) belongs to items[i]."""
    groups: dict[str, tuple[list[bool | None], list[bool | None]]] = defaultdict(lambda: ([], []))
    for it, rec in zip(items, records):
        on_true, on_false = groups[getattr(it, key, None) or "uncategorised"]
        detail = rec.detail or {}
        on_true.append(detail.get("on_true"))
        on_false.append(detail.get("on_false"))
    return {name: metrics.claim_pairs(t, f) for name, (t, f) in sorted(groups.items())}


def breakdown(items: Sequence[Any], records: Sequence[ResultRecord]) -> dict[str, dict[str, ClaimScoresLine]]:
    """Both breakdowns, as JSON (a task summary's `mf2_groups`)."""
    return {key: {name: s.to_dict() for name, s in by_group(items, records, key).items()} for key in GROUPS}


def _pct(e: EstimateLine) -> str:
    return "n/a" if not e.get("n") else f"{100 * e['value']:.1f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A table per breakdown: each configuration's pairs, pairwise %, TPR %, TNR % and unparseable % per group."""
    out: list[str] = []
    for key in GROUPS:
        lines = [f"| {_cell(r['policy'])} / {_cell(r['backbone'])} | {_cell(name)} | {s['pairs']} | {_pct(s['pairwise'])} | {_pct(s['tpr'])} | "
                 f"{_pct(s['tnr'])} | {_pct(s['unparseable'])} |"
                 for r in rows for name, s in ((r.get("mf2_groups") or {}).get(key) or {}).items()]
        if lines:
            out += ["", f"## MF² claim pairs per {key}", "",
                    f"| paradigm / backbone | {key} | pairs | pairwise % | TPR % | TNR % | unparseable % |",
                    "|---|---|---|---|---|---|---|", *lines]
    return out
