"""MF²'s scores per granularity and per category, as the release's notebook breaks them down: pairwise
accuracy, TPR (TRUE on the true statement), TNR (FALSE on the false one) and the unparseable share,
an unparseable verdict counting as wrong in every rate (metrics.claim_pairs).

A claim pair's scored detail (`PairDetail`) says each verdict in words (issue 61): `said_true_on_true_claim` and
`said_false_on_false_claim`, each true (the claim judged rightly), false (judged wrongly) or null (no
verdict could be read). Runs written before keep `on_true` / `on_false`, the verdict itself (true = said
TRUE); `PairDetail` reads both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import StrictBool, model_validator

from . import markdown as md
from . import metrics
from .metrics import ClaimScoresLine
from .records import Detail, EstimateLine

GROUPS = ("granularity", "category")
RIGHT_ON_TRUE = "said_true_on_true_claim"
RIGHT_ON_FALSE = "said_false_on_false_claim"


class PairDetail(Detail):
    """A claim pair's detail: whether each claim was judged rightly (None: no verdict read). A run written before
    keeps `on_true` / `on_false`, the verdicts themselves (true = said TRUE): read as these."""

    said_true_on_true_claim: StrictBool | None = None
    said_false_on_false_claim: StrictBool | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and not {RIGHT_ON_TRUE, RIGHT_ON_FALSE} & set(data) and (
                "on_true" in data or "on_false" in data):
            on_false = data.get("on_false")
            return {RIGHT_ON_TRUE: data.get("on_true"), RIGHT_ON_FALSE: None if on_false is None else not on_false}
        return data

    @classmethod
    def of(cls, on_true: bool | None, on_false: bool | None) -> PairDetail:
        """From the two verdicts (True = said TRUE, None = none read)."""
        return cls(said_true_on_true_claim=on_true, said_false_on_false_claim=None if on_false is None else not on_false)

    @property
    def verdicts(self) -> tuple[bool | None, bool | None]:
        """The verdicts (True = said TRUE, None = none read) on the true and the false claim."""
        right_on_false = self.said_false_on_false_claim
        return self.said_true_on_true_claim, None if right_on_false is None else not right_on_false


Verdicts = tuple[bool | None, bool | None]  # PairDetail.verdicts: on the true claim, on the false one


def by_group(items: Sequence[Any], verdicts: Sequence[Verdicts], key: str) -> dict[str, metrics.ClaimScores]:
    """Claim-pair scores per value of the items' `key` (items without one under 'uncategorised');
    verdicts[i] (a record's PairDetail.verdicts) belong to items[i]."""
    groups: dict[str, tuple[list[bool | None], list[bool | None]]] = defaultdict(lambda: ([], []))
    for it, (verdict_true, verdict_false) in zip(items, verdicts):
        on_true, on_false = groups[getattr(it, key, None) or "uncategorised"]
        on_true.append(verdict_true)
        on_false.append(verdict_false)
    return {name: metrics.claim_pairs(t, f) for name, (t, f) in sorted(groups.items())}


def breakdown(items: Sequence[Any], verdicts: Sequence[Verdicts]) -> dict[str, dict[str, ClaimScoresLine]]:
    """Both breakdowns, as JSON (a task summary's `mf2_groups`)."""
    return {key: {name: s.to_dict() for name, s in by_group(items, verdicts, key).items()} for key in GROUPS}


def _pct(e: EstimateLine) -> str:
    return "n/a" if not e.get("n") else f"{100 * e['value']:.1f}"


def markdown(rows: Sequence[Mapping[str, Any]], wide: bool = False) -> list[str]:
    """A table per breakdown: each configuration's pairs, pairwise %, TPR %, TNR % and unparseable % per group."""
    out: list[str] = []
    for key in GROUPS:
        body = [[f"{r['policy']} / {r['backbone']}", name, s["pairs"], _pct(s["pairwise"]), _pct(s["tpr"]),
                 _pct(s["tnr"]), _pct(s["unparseable"])]
                for r in rows for name, s in ((r.get("mf2_groups") or {}).get(key) or {}).items()]
        if body:
            out += ["", f"## MF² claim pairs per {key}", "",
                    md.tables(["policy / backbone", key, "pairs", "pairwise %", "TPR %", "TNR %", "unparseable %"], body,
                              wide=wide)]
    return out
