"""One typed run: a run folder opened once, and everything read of it (issue 63).

log.py owns the folder's files (run.json, items.jsonl, results.jsonl, judge.jsonl, calls/): it alone reads and
writes them. A `RunLog` is what the readers of a run hold: its header, its validated items and the task that scores
them, its records (streamed, by offset, per configuration, or lean and packed for tables), the summary rows with
each configuration's typed metrics (summary.py), the judge's lines and the calls as sent. The summary, the
report, the inspector, compare, judge, filter and show-call all read a run through it, so each value is read
once and the same way, and none of them opens a file of the run or assembles what another already has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path

from .formats import Item
from .lean_log import LeanLog, read_lean
from .log import (
    CallLog,
    item_digest,
    iter_log,
    iter_log_at,
    log_grid,
    read_at,
    read_header,
    read_judgements,
    run_items,
)
from .records import Config, Grid, JudgementLine, ResultRecord, RunHeader, SummaryRow
from .summary import summary_rows
from .tasks import Task, task_for


class RunLog:
    """A run folder's contents, each read when first asked for and kept (the records excepted: they are streamed,
    since a large log is never held whole). Opening one reads run.json, so a folder that is not a run is refused
    at once with a one-line error."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.header: RunHeader = read_header(self.dir)

    def __repr__(self) -> str:
        return f"RunLog({str(self.dir)!r})"

    @cached_property
    def items(self) -> list[Item]:
        """items.jsonl validated again as its format's items (an edited file is refused as any input is)."""
        return run_items(self.dir)

    @cached_property
    def item(self) -> dict[str, Item]:
        """The items by id."""
        return {it.id: it for it in self.items}

    @cached_property
    def digests(self) -> dict[str, str]:
        """Each item's digest (log.item_digest): compare pairs two runs' items only where these agree."""
        return {it.id: item_digest(it) for it in self.items}

    @cached_property
    def task(self) -> Task:
        """The task of the run's format: how its items are scored, summarised, reported, judged and shown."""
        return task_for(self.header.format)

    def records(self) -> Iterator[ResultRecord]:
        """Every record, a line at a time (log.iter_log)."""
        return iter_log(self.dir)

    def records_at(self) -> Iterator[tuple[int, ResultRecord]]:
        """Every record with the offset of its line, for `read_at` (log.iter_log_at)."""
        return iter_log_at(self.dir)

    def read_at(self, offsets: Iterable[int]) -> list[ResultRecord]:
        """The records whose lines start at `offsets`, read alone."""
        return read_at(self.dir, offsets)

    def grid(self, unfit: bool = False) -> Grid:
        """Each configuration's records in item order, in full (log.log_grid; the prompts that did not fit left
        out unless `unfit`)."""
        return log_grid(self.dir, unfit=unfit, items=self.items)[1]

    @cached_property
    def lean(self) -> LeanLog:
        """The records read once, lean and packed (lean_log.py): what tables are made of."""
        return read_lean(self.dir, self.items)

    def let_go_of_records(self) -> None:
        """Drop the packed records (`lean`) once the tables are made of them: on a large run they are most of what
        this object holds, and the inspector reads records by offset. Asked for again, they are read again."""
        self.__dict__.pop("lean", None)

    @cached_property
    def rows(self) -> list[SummaryRow]:
        """One summary row per configuration: the task's typed metrics and what every run measures."""
        return summary_rows(self.task, self.lean)

    def row(self, config: Config) -> SummaryRow | None:
        """The summary row of one (policy, backbone), None when the run has no record of it."""
        return next((r for r in self.rows if (r["policy"], r["backbone"]) == config), None)

    def judgements(self) -> list[JudgementLine]:
        """judge.jsonl's lines (log.read_judgements): re-read each time, since a judge may be appending."""
        return read_judgements(self.dir)

    @cached_property
    def calls(self) -> CallLog:
        """The calls as sent (calls/), by id; empty for a run written before they were kept."""
        return CallLog(self.dir)


def open_run(run: RunLog | str | Path) -> RunLog:
    """`run` itself, or the run folder at that path opened."""
    return run if isinstance(run, RunLog) else RunLog(run)
