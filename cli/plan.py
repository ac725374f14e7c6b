"""`moviemem bench ... --plan`: what a bench would take, printed before anything is spent."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ..eval.plan import PlanRow, duration, money, plan_json
from .common import _print_json, _styled, err, out


def _reads(r: PlanRow) -> str | None:
    """A row's first read of each film apart from the reads that reuse it, in one line (None: no call to read)."""
    if not r.firsts:
        return None
    firsts = ", ".join(f"{f.film_id} ~{f.tokens:,} tokens{' (restored)' if f.restored else ''} {duration(f.seconds)}"
                       for f in r.firsts[:6]) + (f", ... ({len(r.firsts)} films)" if len(r.firsts) > 6 else "")
    later = r.later()
    return (f"{r.policy} x {r.backbone}: first reads: {firsts}; then {later['calls']:,} call(s) read "
            f"~{later['tokens_read']:,} tokens, reusing ~{later['tokens_reused']:,}, {duration(later['wall_s'])}")


def print_plan(rows: Sequence[PlanRow], as_json: bool) -> None:
    """The plan's table (or JSON): per policy x backbone, items, calls, tokens billed and read, cost, wall time and
    cache hits; then each film's first read apart from the reused reads, and what each wall time rests on."""
    if as_json:
        _print_json(plan_json(rows))
        return
    t = Table(box=None, pad_edge=False, padding=(0, 1))
    t.add_column("policy", no_wrap=True)
    t.add_column("backbone", no_wrap=True)
    for name in ("items", "calls", "cached", "tokens billed", "tokens read", "tokens out", "cost", "wall time"):
        t.add_column(name, justify="right")
    for r in rows:
        x = r.tally
        t.add_row(r.policy, r.backbone, str(r.items) + (f" (+{r.already} done)" if r.already else ""),
                  ("" if r.exact else "≥ ") + f"{x.calls:,}", f"{x.cached:,}", f"~{x.input_tokens:,}",
                  f"~{x.read_tokens:,}", f"≤ {x.output_tokens:,}", money(x.cost_usd), duration(x.wall_s))
    out.print(t)
    for r in rows:
        line = _reads(r)
        if line:
            out.print(line, highlight=False, soft_wrap=True)
    for backbone, how in {r.backbone: r.wall_from for r in rows}.items():
        out.print(f"wall time on {backbone}: {how}", highlight=False, soft_wrap=True)
    for policy, depends in {r.policy: r.depends for r in rows if r.depends}.items():
        _styled(err, "yellow", "bound:", f" {policy}: its calls follow the model's replies ({depends}); "
                                         "the counts are its shortest path")
    for r in rows:
        if r.failures:
            _styled(err, "yellow", "warning:", f" {r.policy} / {r.backbone}: {r.failures} item(s) cannot be asked "
                                               f"(first: {r.failure})")
    err.print("no model was called. tokens billed: the prompts each policy builds, at 4 characters a token; tokens "
              "read: what a local model reads of them (a film's first full-context call reads the film whole, its "
              "later calls reuse that prefix); tokens out: each request's limit (an upper bound); cached: calls the "
              "replay cache holds (free on a rerun); wall time: a local model's speeds measured on this machine "
              "(`moviemem doctor` measures them), an API backbone's recorded latency (n/a: never measured here)",
              highlight=False)
