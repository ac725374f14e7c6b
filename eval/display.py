"""A run's summary and a comparison that show themselves in a notebook (issue 57): accuracy with its 95%
Wilson interval and its film-clustered interval (or why there is none: "too few films (2)"), tokens and cost
per configuration, each policy by its display name (names.py); the paired figures of `compare` with the
difference's Newcombe interval. Every text is escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import markdown as md
from .compare import GroupComparison, Side, compare
from .names import display_name, display_names
from .records import EstimateLine, SummaryRow
from .run import RunLog


def _pct(e: EstimateLine | None) -> str:
    if not e or not e.get("n") or e.get("value") is None:
        return "n/a"
    interval = md.pct(e).partition(" ")[2]  # "[low, high]", or "" where there is none
    return f"{100 * e['value']:.1f}" + (f" <span style='color:#777'>{interval}</span>" if interval else "")


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{h}</th>" for h in header)
    return f"<table><tr>{head}</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>"


@dataclass
class RunSummary:
    """A run directory's configurations: `RunSummary("runs/x")` as the last line of a cell shows the table."""

    run_dir: Path
    rows: list[SummaryRow] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.rows = self.rows or RunLog(self.run_dir).rows

    def _repr_html_(self) -> str:
        esc = html.escape
        names = display_names(r["policy"] for r in self.rows)
        body = [[esc(names[r["policy"]]), esc(r["backbone"]), str(r["n"]), _pct(r.get("accuracy")),
                 esc(md.ci(r.get("accuracy_clustered"))),
                 "n/a" if r["median_input_tokens"] is None else f"{round(r['median_input_tokens']):,}",
                 f"{r['total_output_tokens']:,}", "n/a" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}"]
                for r in self.rows]
        return (f"<p><code>{esc(str(self.run_dir))}</code>: accuracy in % with its 95% Wilson interval, and the "
                "film-clustered one</p>"
                + _table(["policy", "backbone", "n", "accuracy", "clustered 95% CI", "median input tokens",
                          "output tokens", "cost"], body))


@dataclass
class Comparison:
    """Two configurations paired item by item (`compare`), shown as its table in a notebook."""

    a: Side
    b: Side
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    rows: list[GroupComparison] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = self.rows or compare(self.a, self.b, self.groups)

    def _repr_html_(self) -> str:
        def side(s: Side) -> str:
            return html.escape(" / ".join(x for x in (s.policy and display_name(s.policy), s.backbone) if x)
                               or str(s.run_dir))

        body = [[html.escape(r.group), str(r.n), str(r.a_correct), str(r.b_correct), str(r.a_only), str(r.b_only),
                 md.diff(r.difference, r.ci_low, r.ci_high), "n/a" if r.n == 0 else f"{r.p_value:.3g}"]
                for r in self.rows]
        return (f"<p>A: {side(self.a)}, B: {side(self.b)}; A − B in points with Newcombe's 95% interval; "
                "McNemar's test on the items only one got right</p>"
                + _table(["group", "paired", "A right", "B right", "A only", "B only", "A − B", "p"], body))
