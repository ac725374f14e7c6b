"""A run's numbers: one row per (policy, backbone), the task's metrics beside what every run measures
(answered, invalid, guesses, fallback parses, tokens, cost, time, evidence). The report, bench --json and
bench scripts read them (run.Run.rows); they read the log (log.py), never the runner."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import cast

from . import evidence, metrics
from .formats import Item
from .lean_log import LeanLog
from .records import Config, ResultRecord, SummaryRow
from .tasks import Task


def fallback_parsed(records: Sequence[ResultRecord]) -> metrics.Estimate:
    """Share of a configuration's valid answers that were read from free text by a fallback
    parser rather than from the model's JSON (each answer's last parse step in its trace)."""
    hows = []
    for rec in records:
        for ans in rec.answers.values():
            parses = [s for s in ans.trace if s.kind == "parse" and not s.data.get("invalid")]
            if parses:
                hows.append(parses[-1].data.get("how") == "fallback")
    return metrics.wilson(sum(hows), len(hows))


def summary_rows(task: Task, log: LeanLog) -> list[SummaryRow]:
    """One row per (policy, backbone): the task's scores over the items it has records for (run.Run.rows). Records
    are read `lean` and packed (lean_log.py): a task summarises scores, details, choices and the record's evidence
    scores, not the spans each answer was shown, and one configuration's records are objects at a time."""
    items, grid, unfit = log.items, log.scored, log.unfit
    by_id = {it.id: it for it in items}
    # a configuration's records are objects while its row is made, and let go before the next's are read (lean_log.py)
    return [_row(task, by_id, key, grid[key], unfit.get(key, 0)) for key in sorted(grid)]


def _row(task: Task, by_id: Mapping[str, Item], key: Config, recs: list[ResultRecord], unfit: int) -> SummaryRow:
    """One configuration's row: the task's scores and what every run measures."""
    policy, backbone = key
    s = cast(SummaryRow, task.summarise([by_id[r.item_id] for r in recs], recs))
    usage = [r.usage for r in recs]
    tokens = [u.input_tokens for u in usage]
    priced = [u.cost_usd for u in usage if u.cost_usd is not None]
    s.update({"policy": policy, "backbone": backbone, "n": len(recs),
              "answered": sum(r.status == "answered" for r in recs),
              "invalid_n": sum(r.status == "invalid" for r in recs),
              "unfit_n": unfit,
              # answers the model gave while shown no evidence from the film: guesses (closed-book's by design)
              "guesses": metrics.wilson(sum(r.status == "answered" and not r.grounded for r in recs),
                                        sum(r.status == "answered" for r in recs)).to_dict(),
              "fallback_parsed": fallback_parsed(recs).to_dict(),
              "median_input_tokens": statistics.median(tokens) if tokens else None,
              "total_input_tokens": sum(tokens),
              # what the model really read: billed input less the prefix it reused from its prompt cache
              "total_processed_tokens": sum(tokens) - sum(u.cached_input_tokens for u in usage),
              # of the reused: restored from a state saved on disk by an earlier process (issue 65)
              "total_restored_tokens": sum(u.restored_input_tokens for u in usage),
              "total_output_tokens": sum(u.output_tokens for u in usage),
              "cost_usd": sum(priced) if priced else None,
              "compute_s": round(sum(r.wall_s for r in recs), 3),
              "latency_s": round(sum(u.latency_s or 0 for u in usage), 3)})
    s.update(cast(SummaryRow, evidence.summary(recs)))  # the evidence fields are summary fields
    return s
