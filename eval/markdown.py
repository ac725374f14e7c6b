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
WIDTH = 100  # a table wider than this is cut into several, each repeating its key columns (`tables`)


def pct(e: EstimateLine | None) -> str:
    """'value [low, high]' in %: the estimate's own interval (Wilson for proportions)."""
    if not e or not e.get("n") or e.get("value") is None or math.isnan(e["value"]):
        return "n/a"
    if e.get("ci_low") is None or math.isnan(e["ci_low"]):
        return f"{100 * e['value']:.1f}"
    return f"{100 * e['value']:.1f} [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def reason(e: EstimateLine | None) -> str | None:
    """Why an estimate has no interval ("too few films (2)"), where it says; older summaries never do."""
    return e.get("reason") if e else None


def wald(e: EstimateLine | None) -> str:
    """'value ± z·se' in %, the Wald form CHNB tables report (labelled as such where shown). Where that
    interval degenerates (0.0 ± 0.0 at 0/n or n/n, or reaching past 0 or 100 at small n) the cell gives the
    Wilson interval instead, marked so: a zero-width or impossible interval is no figure to print."""
    if not e or not e.get("n") or e.get("se") is None or math.isnan(e["se"]):
        return "n/a"
    p, half = e["value"], Z95 * e["se"]
    if half == 0 or p - half < 0 or p + half > 1:
        return f"{pct(e)} (Wilson)"
    return f"{100 * p:.1f} ± {100 * half:.1f}"


def count(x: float | None) -> str:
    """A count or a median of counts as a whole number (1,272, not 1272.0); n/a where there is none."""
    return "n/a" if x is None else f"{round(x):,}"


def secs(x: float) -> str:
    return f"{x:.1f}" if x < 600 else f"{x / 60:.1f} min"


def text(v: Any) -> str:
    """A value from the data (a category, a reason, a model name) as Markdown text: its HTML shown
    as written, never rendered (a category `<b>cat</b>` must not turn bold, nor a `<script>` run)."""
    return html.escape(str(v), quote=False)


def _cell(v: Any) -> str:
    return text(v).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def column_groups(lines: Sequence[Sequence[int]], keys: int, limit: int, gap: int = 3) -> list[list[int]]:
    """The columns of a table cut into groups whose every line fits `limit` characters, each group led by the
    first `keys` columns (the policy and backbone a row is about). `lines` holds each line's cell lengths (its
    header and rows as written; one line of column widths for a padded table); `gap` is what a column adds
    beside its text ("| " and " " in markdown). A column too wide to fit even beside the keys gets a group alone."""
    n = len(lines[0]) if lines else 0
    lead = list(range(min(keys, n)))

    def width(cols: list[int]) -> int:
        return max(1 + sum(line[i] + gap for i in cols) for line in lines)

    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(len(lead), n):
        if current and width(lead + current + [i]) > limit:
            groups.append(lead + current)
            current = []
        current.append(i)
    if current or not groups:
        groups.append(lead + current)
    return groups


def tables(header: Sequence[str], rows: Sequence[Sequence[Any]], keys: int = 2, wide: bool = False,
           limit: int = WIDTH) -> str:
    """A table whose every line fits `limit` characters: cut by columns into several tables, one under another,
    each with the key columns first; `wide` keeps it whole (report --wide)."""
    if wide:
        return table(header, rows)
    lines = [[len(_cell(v)) for v in line] for line in (header, *rows)]
    return "\n\n".join(table([header[i] for i in g], [[r[i] for i in g] for r in rows])
                       for g in column_groups(lines, keys, limit))


def ci(e: EstimateLine | None) -> str:
    """'[low, high]' in %; where the estimate says why it has no interval, that reason ("too few films (2)")."""
    why = reason(e)
    if why:
        return why
    if not e or e.get("ci_low") is None or (isinstance(e["ci_low"], float) and math.isnan(e["ci_low"])):
        return "n/a"
    return f"[{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def diff(d: float, low: float, high: float) -> str:
    """A difference in points with its interval: '+66.7 [+13.1, +90.3]'; n/a where there is none."""
    if any(math.isnan(x) for x in (d, low, high)):
        return "n/a"
    return f"{100 * d:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def money(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"
