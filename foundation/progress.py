"""Progress and messages from ingest stages: rich bars on stderr, or nothing."""

from __future__ import annotations

import time
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text


class Reporter(Protocol):
    def start(self, label: str, total: int | None = None) -> None: ...
    def update(self, done: int, total: int | None = None, postfix: str = "") -> None: ...
    def finish(self, label: str, status: str, note: str = "") -> None: ...
    def warn(self, message: str) -> None: ...


class QuietReporter:
    """Collects warnings, shows nothing (library use, tests)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.finished: list[tuple[str, str, str]] = []
        self.postfix = ""  # the last running figures a stage reported (tokens, cost)

    def start(self, label: str, total: int | None = None) -> None:
        pass

    def update(self, done: int, total: int | None = None, postfix: str = "") -> None:
        if postfix:
            self.postfix = postfix

    def finish(self, label: str, status: str, note: str = "") -> None:
        self.finished.append((label, status, note))

    def warn(self, message: str) -> None:
        self.warnings.append(message)


class RichReporter(QuietReporter):
    """One progress bar per stage on stderr, so `--json` output on stdout stays clean."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._started: dict[str, float] = {}

    def start(self, label: str, total: int | None = None) -> None:
        self._started[label] = time.perf_counter()
        self._progress = Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("[dim]{task.fields[postfix]}"),
                                  console=self.console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(label, total=total, postfix="")

    def update(self, done: int, total: int | None = None, postfix: str = "") -> None:
        super().update(done, total, postfix)
        if self._progress is not None and self._task is not None:
            extra: dict[str, Any] = {"postfix": postfix} if postfix else {}
            self._progress.update(self._task, completed=done, total=total, **extra)

    def finish(self, label: str, status: str, note: str = "") -> None:
        super().finish(label, status, note)
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        colour = {"done": "green", "cached": "dim", "skipped": "yellow", "failed": "red"}.get(status, "white")
        began = self._started.pop(label, None)
        took = f" {time.perf_counter() - began:.1f} s" if began is not None else ""  # where the time goes
        self.console.print(Text.assemble((f"{status:>7}", colour), f" {label}", (took, "cyan"),
                                         (f"  {note}" if note else "", "dim")), highlight=False)

    def warn(self, message: str) -> None:
        super().warn(message)
        self.console.print(Text.assemble(("warning:", "yellow"), f" {message}"), highlight=False)
