"""Progress: rich bars on a terminal's stderr, plain lines in a log, or nothing.

A terminal gets bars (ingest's stages, bench's items). A log (stderr redirected to a file, `nohup`) gets
`ProgressLines`: a line after each item and a heartbeat at least every `progress_interval_s` (30 s) while
a call is in flight, so a wait of minutes (a film's whole transcript read by a local model) can be
followed. `CALLS` is the board of model calls in flight that the heartbeat reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


# ----------------------------------------------------------------------------- plain lines for a log (issue 61)

INTERVAL_S = 30.0  # the default of the progress_interval_s setting: a log never goes longer without a line


def span(seconds: float) -> str:
    """A wait as people read it in a log: 42s, 3m05s, 1h02m."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _took(seconds: float) -> str:
    """How long one thing took: tenths under ten seconds (most ingest stages of a text film), else `span`."""
    return f"{max(0.0, seconds):.1f}s" if seconds < 9.95 else span(seconds)


@dataclass
class Call:
    """A model call in flight: what a heartbeat says while it waits. `read` is the prompt's tokens read so
    far when the backbone reports them (`CallBoard.reading`); else the line estimates them from the measured
    reading speed and says so."""

    backbone: str
    prompt_tokens: int  # estimated where the backbone has not counted them (4 characters a token)
    started: float
    read_tok_s: float | None = None
    read: int | None = None
    counted: bool = False  # prompt_tokens is the backbone's own count

    def line(self, now: float) -> str:
        took = now - self.started
        if self.read is not None:
            what = f"read {self.read:,} of {self.prompt_tokens:,} prompt tokens"
        elif self.read_tok_s:
            guess = min(self.prompt_tokens, int(took * self.read_tok_s))
            what = (f"a prompt of {'' if self.counted else '~'}{self.prompt_tokens:,} tokens, ~{guess:,} read "
                    f"(estimated at the {self.read_tok_s:,.0f} tokens/s measured here)")
        else:
            what = f"a prompt of {'' if self.counted else '~'}{self.prompt_tokens:,} tokens (reading speed not measured yet)"
        return f"{self.backbone} call {span(took)} in: {what}"


class CallBoard:
    """The model calls this process has in flight (ProviderBackbone.send registers each), so a progress line
    can say what a long wait is waiting for. Thread-safe; a call belongs to the thread that made it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._calls: dict[int, Call] = {}
        self._lock = threading.Lock()

    @contextmanager
    def call(self, backbone: str, prompt_tokens: int, read_tok_s: float | None = None) -> Iterator[Call]:
        c = Call(backbone, prompt_tokens, self.clock(), read_tok_s)
        me = threading.get_ident()
        with self._lock:
            before = self._calls.get(me)  # a wrapper calling its inner backbone on the same thread
            self._calls[me] = c
        try:
            yield c
        finally:
            with self._lock:
                if before is None:
                    self._calls.pop(me, None)
                else:
                    self._calls[me] = before

    def reading(self, read: int, total: int) -> None:
        """The calling thread's call has read `read` of its `total` prompt tokens (a backbone that reads
        in batches reports after each one)."""
        with self._lock:
            c = self._calls.get(threading.get_ident())
            if c is not None:
                c.read, c.prompt_tokens, c.counted = read, total, True

    def now(self) -> list[Call]:
        with self._lock:
            return list(self._calls.values())


CALLS = CallBoard()


def read_speed(backbone: Any) -> float | None:
    """A backbone's measured prompt-reading speed on this machine (backbones/pace.py), where it keeps one."""
    book, key = getattr(backbone, "paces", None), getattr(backbone, "pace_key", None)
    if book is None or not key or not hasattr(book, "get"):
        return None
    speed = getattr(book.get(key), "read_tok_s", None)
    return float(speed) if speed else None


@dataclass
class _Doing:
    what: str
    started: float


class ProgressLines:
    """Plain progress lines for a log (stderr not a terminal): one when an item finishes, and a heartbeat
    at least every `interval` seconds while nothing else was written, naming what is in flight (the item,
    and a model call with its prompt's size and the tokens read so far). Done, total, elapsed and ETA on
    every line. Used as a context manager: the heartbeat thread runs inside it."""

    def __init__(self, write: Callable[[str], None], command: str, *, interval: float = INTERVAL_S,
                 total: int | None = None, board: CallBoard = CALLS, clock: Callable[[], float] = time.monotonic) -> None:
        if not interval > 0:
            raise ValueError(f"a progress interval must be positive, not {interval}")
        self.write, self.command, self.interval, self.board, self.clock = write, command, interval, board, clock
        self.total = total
        self.done = 0  # of total
        self.done_here = 0  # finished by this process: the ETA's pace
        self.started = clock()
        self._last = self.started
        self._doing: dict[Any, _Doing] = {}
        self._begun = False  # nothing begun yet: the heartbeat says the command is starting
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ProgressLines:
        self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def begin(self, key: Any, what: str, *, done: int | None = None, total: int | None = None) -> None:
        """Something started (an item, a stage): the heartbeat names it while it runs. `done`/`total`: the
        counts so far (a resumed run starts with its earlier answers done)."""
        with self._lock:
            self._doing[key] = _Doing(what, self.clock())
            self._begun = True
            self.done = self.done if done is None else done
            self.total = self.total if total is None else total

    def end(self, key: Any, what: str | None = None, *, done: int | None = None, total: int | None = None,
            counted: bool = True) -> None:
        """Something finished: one line. `done`/`total` set the count (default: one more); `counted` False
        for a step that is not one of the total's items."""
        with self._lock:
            began = self._doing.pop(key, None)
            if total is not None:
                self.total = total
            if counted:
                self.done = self.done + 1 if done is None else done
                self.done_here += 1
            label = what or (began.what if began else str(key))
            took = f" in {_took(self.clock() - began.started)}" if began is not None else ""
            self._emit(f"{label}{took}")

    def drop(self, key: Any) -> None:
        """Something finished that needs no line of its own."""
        with self._lock:
            self._doing.pop(key, None)

    def say(self, text: str) -> None:
        """A line of its own (a step, a warning), with the counts."""
        with self._lock:
            self._emit(text)

    def heartbeat(self) -> None:
        """The line the heartbeat writes: what is in flight and for how long."""
        now = self.clock()
        with self._lock:
            doing = [f"{d.what} ({span(now - d.started)} so far)" for d in self._doing.values()]
            calls = [c.line(now) for c in self.board.now()]
            idle = "working" if self._begun else "starting"
            self._emit("waiting: " + ("; ".join(doing) if doing else idle) + ("; " + "; ".join(calls) if calls else ""))

    def _beat(self) -> None:
        while not self._stop.wait(min(self.interval, 1.0) if self.interval > 1 else self.interval / 2):
            if self.clock() - self._last >= self.interval:
                self.heartbeat()

    def _counts(self) -> str:
        now = self.clock()
        elapsed = now - self.started
        head = f"{self.done}/{self.total}" if self.total is not None else f"{self.done} done"
        eta = "ETA n/a"
        if self.total is not None and self.done >= self.total:
            eta = "ETA 0s"
        elif self.total is not None and self.done_here:
            eta = f"ETA {span(elapsed / self.done_here * (self.total - self.done))}"
        return f"{head}, elapsed {span(elapsed)}, {eta}"

    def _emit(self, text: str) -> None:  # under self._lock
        self._last = self.clock()
        try:
            self.write(f"[{self.command}] {self._counts()} | {text}")
        except (OSError, ValueError):
            pass  # a closed log must not stop the work it reports on


class LineReporter(QuietReporter):
    """An ingest's stages as plain lines for a log: a line when a stage starts and finishes, its count at
    most every `interval` seconds, and the heartbeat while a stage is silent (ProgressLines)."""

    def __init__(self, lines: ProgressLines, film: str = "", stage_lines: bool = True) -> None:
        super().__init__()
        self.lines = lines
        self.film = film
        self.stage_lines = stage_lines  # False: stages only named by the heartbeat (a collection of many films)
        self._label = ""
        self._shown = 0.0

    def start(self, label: str, total: int | None = None) -> None:
        self._label = label
        self._shown = self.lines.clock()
        self.lines.begin(("stage", label), f"{self.film + ': ' if self.film else ''}{label}")

    def update(self, done: int, total: int | None = None, postfix: str = "") -> None:
        super().update(done, total, postfix)
        now = self.lines.clock()
        if self.stage_lines and now - self._shown >= self.lines.interval:
            self._shown = now
            of = f"/{total}" if total else ""
            self.lines.say(f"{self.film + ': ' if self.film else ''}{self._label} {done}{of}" + (f" {postfix}" if postfix else ""))

    def finish(self, label: str, status: str, note: str = "") -> None:
        super().finish(label, status, note)
        if not self.stage_lines:
            self.lines.drop(("stage", label))
            return
        self.lines.end(("stage", label), f"{self.film + ': ' if self.film else ''}{label} {status}"
                       + (f" ({note})" if note else ""), counted=False)

    def warn(self, message: str) -> None:
        super().warn(message)
        if self.stage_lines:  # else the command prints the warnings it kept once it is done
            self.lines.say(f"warning: {message}")
