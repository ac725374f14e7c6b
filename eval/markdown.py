"""Markdown for report.md: tables whose cells show the data's text as written (never rendered), and
estimates, shares, money and durations as the report prints them. The report and each task's own
section (tasks.py) write with these, so a format's tables read like the rest."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from .records import EstimateLine

Z95 = 1.959963984540054


def pct(e: EstimateLine | None) -> str:
    """'value [low, high]' in %: the estimate's own interval (Wilson for proportions)."""
    if not e or not e.get("n") or e.get("value") is None or math.isnan(e["value"]):
        return "n/a"
    if e.get("ci_low") is None or math.isnan(e["ci_low"]):
        return f"{100 * e['value']:.1f}"
    return f"{100 * e['value']:.1f} [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def wald(e: EstimateLine | None) -> str:
    """'value ± z·se' in %, the Wald form CHNB tables report (labelled as such where shown)."""
    if not e or not e.get("n") or e.get("se") is None or math.isnan(e["se"]):
        return "n/a"
    return f"{100 * e['value']:.1f} ± {100 * Z95 * e['se']:.1f}"


def count(x: float | None) -> str:
    """A count or a median of counts as a whole number (1,272, not 1272.0); n/a where there is none."""
    return "n/a" if x is None else f"{round(x):,}"


def secs(x: float) -> str:
    return f"{x:.1f}" if x < 600 else f"{x / 60:.1f} min"


def text(v: Any) -> str:
    """A value from the data (a category, a reason, a model name) as Markdown text: its HTML shown
    as written, never rendered (a category `<b>cat</b>` must not turn bold, nor a `<script>` run)."""
    return html.escape(str(v), quote=False)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return text(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def ci(e: EstimateLine | None) -> str:
    if not e or e.get("ci_low") is None or (isinstance(e["ci_low"], float) and math.isnan(e["ci_low"])):
        return "n/a"
    return f"[{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def money(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
