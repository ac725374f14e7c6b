"""`moviemem bench ... --plan`: what a bench would take, printed before anything is spent."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ..eval.plan import PlanRow, duration, money, plan_json
from .common import _print_json, _styled, err, out


def print_plan(rows: Sequence[PlanRow], as_json: bool) -> None:
    """The plan's table (or JSON): per policy x backbone, items, calls, tokens, cost, wall time and cache hits."""
    if as_json:
        _print_json(plan_json(rows))
        return
    t = Table(box=None, pad_edge=False, padding=(0, 1))
    t.add_column("policy", no_wrap=True)
    t.add_column("backbone", no_wrap=True)
    for name in ("items", "calls", "cached", "tokens in", "tokens out", "cost", "wall time"):
        t.add_column(name, justify="right")
    for r in rows:
        x = r.tally
        t.add_row(r.policy, r.backbone, str(r.items) + (f" (+{r.already} done)" if r.already else ""),
                  ("" if r.exact else "≥ ") + f"{x.calls:,}", f"{x.cached:,}", f"~{x.input_tokens:,}",
                  f"≤ {x.output_tokens:,}", money(x.cost_usd), duration(x.wall_s))
    out.print(t)
    for policy, depends in {r.policy: r.depends for r in rows if r.depends}.items():
        _styled(err, "yellow", "bound:", f" {policy}: its calls follow the model's replies ({depends}); "
                                         "the counts are its shortest path")
        if r.failures:
            _styled(err, "yellow", "warning:", f" {r.policy} / {r.backbone}: {r.failures} item(s) cannot be asked "
                                               f"(first: {r.failure})")
    err.print("no model was called. input tokens: the prompts each policy builds, at 4 characters a token; output "
              "tokens: each request's limit (an upper bound); cached: calls the replay cache holds (free on a rerun); "
              "wall time: the backbone's measured speed on this machine (n/a: never measured here)", highlight=False)
