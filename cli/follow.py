"""How a command shows its progress (issue 61): bars on a terminal, plain lines in a log, or nothing.

A bench written to a file (`nohup moviemem bench ... 2> bench.log`) gets a line after each item and a
heartbeat at least every `progress_interval_s` while a call is in flight (foundation/progress.py), so a
film's first full-transcript read, minutes with a local model, is no silence. `--quiet` silences both.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from ..foundation.config import get_settings
from ..foundation.progress import LineReporter, ProgressLines, QuietReporter, Reporter, RichReporter
from .common import err

if TYPE_CHECKING:
    from ..eval.runner import Progress

Mode = Literal["quiet", "bars", "lines"]


def mode(quiet: bool) -> Mode:
    """What a command shows: nothing with --quiet, bars on a terminal, else plain lines."""
    if quiet:
        return "quiet"
    return "bars" if err.is_terminal else "lines"


def _write(line: str) -> None:
    """One line on stderr as it is at the time (a test's captured stream too), flushed: a log is read as it grows."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def lines(command: str, total: int | None = None, interval: float | None = None) -> ProgressLines:
    """Plain progress lines for `command`, at least every progress_interval_s ($MOVIEMEM_PROGRESS_INTERVAL_S)."""
    every = interval if interval is not None else get_settings().progress_interval_s
    return ProgressLines(_write, command, interval=every, total=total)


class FilmsShown:
    """Progress of films built one after another (ingest, import-collection): each film's stages as the mode
    calls for (`reporter(film)`), and in a log one line as each film is done (`done(film)`)."""

    def __init__(self, how: Mode, shown: ProgressLines | None, stage_lines: bool = True) -> None:
        self.how, self.shown, self.stage_lines = how, shown, stage_lines

    def reporter(self, film: str) -> Reporter:
        if self.shown is not None:
            return LineReporter(self.shown, film, stage_lines=self.stage_lines)
        return RichReporter(err) if self.how == "bars" else QuietReporter()

    def done(self, film: str, done: int | None = None, total: int | None = None) -> None:
        if self.shown is not None:
            self.shown.end(("film", film), f"film {film} done", done=done, total=total)


@contextmanager
def films_shown(quiet: bool, command: str, total: int | None = None, stage_lines: bool = True) -> Iterator[FilmsShown]:
    """`FilmsShown` for `command`, the heartbeat running while it is open (in a log)."""
    how = mode(quiet)
    if how != "lines":
        yield FilmsShown(how, None)
        return
    with lines(command, total) as shown:
        yield FilmsShown(how, shown, stage_lines)


@contextmanager
def bench_progress(quiet: bool, label: str) -> Iterator[Callable[[Progress], None] | None]:
    """The runner's progress callback: a bar on a terminal, plain lines in a log, None with --quiet."""
    how = mode(quiet)
    if how == "quiet":
        yield None
    elif how == "lines":
        with bench_lines(label) as on:
            yield on
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars

        with Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("${task.fields[cost]:.4f}  {task.fields[calls]} calls, {task.fields[hits]} cached"),
                      console=err, transient=True) as bar:
            task = bar.add_task(label, total=None, cost=0.0, calls=0, hits=0)

            def update(p: Progress) -> None:
                bar.update(task, completed=p.done, total=p.total, cost=p.spend.cost_usd, calls=p.spend.calls,
                           hits=p.spend.cache_hits)

            yield update


@contextmanager
def bench_lines(label: str) -> Iterator[Callable[[Progress], None]]:
    """The runner's progress callback as plain lines: one as each item finishes (with the run's calls, cache
    hits and cost so far), and the heartbeat naming the items in flight and their model calls."""
    from ..eval.log import record_key

    with lines(label) as shown:
        def on(p: Progress) -> None:
            if p.starting is not None:
                s = p.starting
                shown.begin(record_key(s.policy, s.backbone, s.item_id),
                            f"{s.policy} x {s.backbone}, film {s.film_id}, item {s.item_id}", done=p.done, total=p.total)
            elif p.last is not None:
                r = p.last
                verdict = r.status if r.status != "answered" or r.correct is None else "right" if r.correct else "wrong"
                shown.end(r.key, f"{r.policy} x {r.backbone}, film {r.film_id}, item {r.item_id}: {verdict}; "
                          f"{p.spend.calls} model calls, {p.spend.cache_hits} cached, ${p.spend.cost_usd:.4f} so far",
                          done=p.done, total=p.total)

        yield on


@contextmanager
def ask_lines(quiet: bool, policy: str, backbone: str, film: str) -> Iterator[Any]:
    """`ask` in a log: a line per step the policy takes, the heartbeat while a call is in flight, and one when it
    ends; nothing before the first step, so input refused before any work is one error line alone. On a
    terminal (or --quiet) nothing here: the terminal has its spinner."""
    if mode(quiet) != "lines":
        yield None
        return
    from ..agents.base import watching

    what = f"{policy} x {backbone}, film {film}"
    with lines("ask", total=1) as shown:
        shown.begin("ask", what)
        with watching(lambda step: shown.say(step.line())):
            yield shown
        shown.end("ask", f"answered: {what}")


@contextmanager
def collection_shown(quiet: bool, label: str) -> Iterator[tuple[QuietReporter, Callable[[int, int, str], None] | None]]:
    """`import-collection`'s progress: the reporter its films' stages get (it keeps their warnings) and the
    callback as each film is done: a bar on a terminal; in a log a line per film, the heartbeat naming the
    stage under way; nothing with --quiet."""
    how = mode(quiet)
    if how == "quiet":
        yield QuietReporter(), None
    elif how == "lines":
        with lines(label) as shown:
            def film_done(i: int, n: int, film: str) -> None:
                shown.end(("film", film), f"film {film} done", done=i, total=n)

            yield LineReporter(shown, stage_lines=False), film_done
    else:
        from rich.progress import Progress as Bars

        with Bars(console=err, transient=True) as bar:
            task = bar.add_task(label, total=None)

            def update(i: int, n: int, film: str) -> None:
                bar.update(task, completed=i, total=n, description=film)

            yield QuietReporter(), update
