"""Ingest many films on a Ray cluster: per film, a chain of tasks, one per stage group.

Why a chain rather than one task per film: Ray declares resources per task, and the stages
want different ones (decoding frames and detecting shots: one CPU; ASR and CLIP: several
CPUs, or a GPU once they run on one; captioning and events: mostly waiting on a model server).
Consecutive stages that declare the same resources share one task, and a film's tasks run one
after another (each takes the previous one's result as an argument), so a cluster holds a GPU
only while a film is in the stages that use it, yet a film stays one unit of progress and failure.

Every task runs the ordinary pipeline (`Library.ingest(stages=<its group>)`): the stage
runner commits each stage as serial ingest does, holds the film's lock, and skips stages that
finished with the same params. So a film commits stage by stage, a rerun resumes, and when Ray
retries a task whose worker died (`max_retries`), the retry finds the finished stages and
sweeps whatever the dead attempt left behind.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.text import Text

from ..foundation.config import Settings
from ..foundation.errors import MovieMemError
from ..foundation.progress import QuietReporter
from ..ingest.pipeline import slug_for
from ..ingest.registry import STAGES, ordered_stages
from ..memory.schema import check_film_id
from ..memory.store import MemoryStore
from .cluster import Cluster, cap_threads, describe, fit, import_ray

# What one task of a stage asks of the cluster (Ray's task options). The stages run on CPU in
# this release (faster-whisper and open_clip are loaded with device="cpu"); declare GPUs with
# `resources=` once a stage uses one. Captions and events mostly wait on a backbone server.
DEFAULT_RESOURCES: dict[str, dict[str, Any]] = {
    "probe": {"num_cpus": 1}, "frames": {"num_cpus": 1}, "shots": {"num_cpus": 1}, "segments": {"num_cpus": 1},
    "transcript": {"num_cpus": 2}, "clip": {"num_cpus": 2},
    "ocr": {"num_cpus": 1}, "captions": {"num_cpus": 1},
    "events": {"num_cpus": 2},
}
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources")
UPDATE_EVERY_S = 0.5  # progress updates sent from a worker at most this often per film


@dataclass
class FilmJob:
    """One film to ingest, with the per-film options of `Library.ingest`."""

    path: Path | str
    film_id: str | None = None
    title: str | None = None
    year: int | None = None
    subtitles: Path | str | None = None
    captions: Path | str | None = None
    encoding: str | None = None


@dataclass(frozen=True)
class Event:
    """What a worker reports while ingesting; `kind` is task (started/finished), start, update,
    finish (a stage's status and note) or warn."""

    film_id: str
    kind: str
    group: int
    stage: str = ""
    status: str = ""
    note: str = ""
    done: int | None = None
    total: int | None = None
    pid: int = 0
    node: str = ""


@dataclass
class FilmOutcome:
    film_id: str
    path: str
    ok: bool = False
    error: str | None = None
    stages: dict[str, tuple[str, str]] = field(default_factory=dict)  # stage -> (status, note), last seen
    warnings: list[str] = field(default_factory=list)
    attempts: int = 0  # the most tries any one of its tasks took (more than 1: Ray retried it)
    wall_s: float = 0.0
    nodes: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {"film_id": self.film_id, "path": self.path, "ok": self.ok, "error": self.error,
                "stages": {k: {"status": s, "note": n} for k, (s, n) in self.stages.items()},
                "warnings": self.warnings, "attempts": self.attempts, "wall_s": round(self.wall_s, 3),
                "nodes": sorted(self.nodes)}


@dataclass(frozen=True)
class Group:
    index: int
    stages: tuple[str, ...]
    options: dict[str, Any]


def stage_resources(overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """DEFAULT_RESOURCES with `overrides` ({"transcript": {"num_gpus": 0.5}, ...}) laid over it."""
    out = {name: dict(DEFAULT_RESOURCES.get(name, {"num_cpus": 1})) for name in STAGES}
    for name, opts in (overrides or {}).items():
        if name not in STAGES:
            raise MovieMemError(f"resources for unknown stage {name!r}; stages: {', '.join(STAGES)}")
        if not isinstance(opts, dict):
            raise MovieMemError(f"resources of {name} must be an object like {{\"num_cpus\": 2}}, not {opts!r}")
        bad = [k for k in opts if k not in RESOURCE_KEYS]
        if bad:
            raise MovieMemError(f"unknown resource {bad[0]!r} for {name}; use {', '.join(RESOURCE_KEYS)}")
        for k in ("num_cpus", "num_gpus", "memory"):
            v = opts.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
                raise MovieMemError(f"{name}.{k} must be a non-negative number, not {v!r}")
        if "resources" in opts and not isinstance(opts["resources"], dict):
            raise MovieMemError(f"{name}.resources must be an object of custom resources, not {opts['resources']!r}")
        out[name].update(opts)
    return out


def plan_groups(stages: Sequence[str] | None, resources: dict[str, dict[str, Any]], cluster: Cluster
                ) -> tuple[list[Group], list[str]]:
    """Stage groups in pipeline order, and notes on resources shrunk to fit the biggest node.

    With `stages` (what the user asked to rerun), each group keeps only those stages; the ones
    they need run, when they never finished, inside the first task that needs them, as in serial ingest."""
    if stages:
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise MovieMemError(f"unknown stage(s): {', '.join(unknown)}; known: {', '.join(STAGES)}")
    wanted = set(stages) if stages else None
    runs: list[tuple[list[str], dict[str, Any]]] = []
    for stage in ordered_stages():
        if wanted is not None and stage.name not in wanted:
            continue
        res = resources[stage.name]
        if runs and runs[-1][1] == res:
            runs[-1][0].append(stage.name)
        else:
            runs.append(([stage.name], res))
    groups, notes = [], []
    for i, (names, res) in enumerate(runs):
        opts, note = fit("+".join(names), res, cluster)
        if note:
            notes.append(note)
        groups.append(Group(i, tuple(names), opts))
    return groups, notes


# ----------------------------------------------------------------------------- the worker side


class EventLog:
    """Ray actor body: events from the workers, until the driver takes them."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, event: Event) -> None:
        self.events.append(event)

    def take(self) -> list[Event]:
        out, self.events = self.events, []
        return out


class _LogReporter(QuietReporter):
    """A Reporter that forwards stage progress to the driver's EventLog actor.

    Sends do not wait (a task blocked in ray.get gives its CPU back to the scheduler, which
    would start another task on it); `flush` waits once, at the end, so the driver has every
    event of a task before it sees the task's result."""

    def __init__(self, log: Any, film_id: str, group: int) -> None:
        super().__init__()
        self.log, self.film_id, self.group = log, film_id, group
        self.pid, self.node = os.getpid(), socket.gethostname()
        self.stage = ""
        self._last_update = 0.0
        self._last_sent: Any = None

    def send(self, kind: str, **kw: Any) -> None:
        self._last_sent = self.log.add.remote(Event(self.film_id, kind, self.group, pid=self.pid, node=self.node, **kw))

    def flush(self) -> None:
        if self._last_sent is not None:
            import_ray().get(self._last_sent)

    def start(self, label: str, total: int | None = None) -> None:
        self.stage = label
        self.send("start", stage=label, total=total)

    def update(self, done: int, total: int | None = None, postfix: str = "") -> None:
        super().update(done, total, postfix)
        now = time.monotonic()
        if now - self._last_update >= UPDATE_EVERY_S or (total is not None and done >= total):
            self._last_update = now
            self.send("update", stage=self.stage, done=done, total=total, note=postfix)

    def finish(self, label: str, status: str, note: str = "") -> None:
        super().finish(label, status, note)
        self.send("finish", stage=label, status=status, note=note)

    def warn(self, message: str) -> None:
        super().warn(message)
        self.send("warn", stage=self.stage, note=message)


def _film_task(library: str, settings: Settings, job: FilmJob, group: Group, replace: bool, log: Any,
               previous: int | None) -> int:
    """One stage group of one film, in a Ray worker. `previous` (the last group's index) only
    orders the chain: Ray runs this task after that one succeeded."""
    from ..library import Library

    reporter = _LogReporter(log, str(job.film_id), group.index)
    reporter.send("task", status="started", note=",".join(group.stages))
    threads = cap_threads(float(group.options.get("num_cpus", 1)))
    if settings.asr_threads == 0:
        settings = settings.model_copy(update={"asr_threads": threads})
    try:
        Library(library, settings).ingest(job.path, film_id=job.film_id, title=job.title, year=job.year,
                                          subtitles=job.subtitles, captions=job.captions, encoding=job.encoding,
                                          stages=list(group.stages), replace=replace, reporter=reporter)
        reporter.send("task", status="finished")
    finally:
        reporter.flush()
    return group.index


# ----------------------------------------------------------------------------- the driver side


def _checked_jobs(jobs: Sequence[FilmJob | Path | str]) -> list[FilmJob]:
    """Absolute paths that exist and unique, valid film ids, before any task starts."""
    out: list[FilmJob] = []
    seen: dict[str, str] = {}
    for j in jobs:
        job = j if isinstance(j, FilmJob) else FilmJob(path=j)
        path = Path(job.path).expanduser().resolve()
        if not path.is_file():
            raise MovieMemError(f"{job.path} is not a file")
        fid = check_film_id(job.film_id if job.film_id is not None else slug_for(path))
        if fid in seen:
            raise MovieMemError(f"{seen[fid]} and {path} would both be film {fid!r}; give one of them another --film-id")
        seen[fid] = str(path)
        extra = {}
        for name in ("subtitles", "captions"):
            value = getattr(job, name)
            if value is not None:
                p = Path(value).expanduser().resolve()
                if not p.is_file():
                    raise MovieMemError(f"{value} ({name} of {fid}) is not a file")
                extra[name] = p
        out.append(FilmJob(path, fid, job.title, job.year, extra.get("subtitles"), extra.get("captions"), job.encoding))
    return out


def _error_text(exc: BaseException) -> str:
    """One line: the exception a task raised (not Ray's wrapping), or the system failure."""
    ray = import_ray()
    cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause is not None else exc
    text = " ".join(str(cause).split())
    if isinstance(cause, MovieMemError):
        return text
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return f"{type(cause).__name__}: {first}"[:500]


def ingest_films(library: str | Path, jobs: Sequence[FilmJob | Path | str], *, settings: Settings,
                 stages: Sequence[str] | None = None, replace: bool = False,
                 resources: dict[str, dict[str, Any]] | None = None, max_retries: int = 3,
                 films_in_flight: int | None = None, on_event: Callable[[Event], None] | None = None,
                 on_film: Callable[[FilmOutcome], None] | None = None) -> list[FilmOutcome]:
    """Ingest `jobs` on the connected Ray cluster into `library` (a path every worker reaches).

    Returns one outcome per film, in the order given: a film that fails is reported with its
    error and does not stop the others. Ray retries a task whose worker died up to
    `max_retries` times; a stage's own error is not retried (rerun to resume). At most
    `films_in_flight` films (default: twice the cluster's CPUs) are submitted at once.
    `on_event` gets every worker event, and notes about the whole run (resources shrunk to fit)
    as warn events with an empty film_id.
    """
    ray = import_ray()
    cluster = describe()
    checked = _checked_jobs(jobs)
    store = MemoryStore(library if "://" in str(library) else Path(library).expanduser().resolve())
    store.locks_dir()  # film locks and frame images are files: an object-store library is refused here
    lib = store.uri
    groups, notes = plan_groups(stages, stage_resources(resources), cluster)
    if not groups:
        raise MovieMemError("no stage to run")
    uses_models = settings.captioner or "backbone" in settings.model_fields_set
    if cluster.nodes > 1 and settings.cache_mode != "off" and uses_models:
        notes.append(f"{cluster.nodes} nodes share the replay cache {lib}/cache (captions, events): SQLite's WAL "
                     "is safe on one machine only; on a network filesystem set MOVIEMEM_CACHE_MODE=off (docs/scale.md)")
    task = ray.remote(_film_task)
    log = ray.remote(EventLog).options(num_cpus=0).remote()
    limit = films_in_flight or max(2, int(2 * cluster.cpus))
    outcomes = {j.film_id: FilmOutcome(str(j.film_id), str(j.path)) for j in checked}
    for note in notes:  # about the whole run, not one film
        if on_event is not None:
            on_event(Event("", "warn", -1, note=note))
    starts: Counter[tuple[str, int]] = Counter()
    began: dict[str, float] = {}

    def handle(ev: Event) -> None:
        o = outcomes[ev.film_id]
        if ev.kind == "task" and ev.status == "started":
            starts[(ev.film_id, ev.group)] += 1
            o.attempts = max(o.attempts, starts[(ev.film_id, ev.group)])
            o.nodes.add(ev.node)
            began.setdefault(ev.film_id, time.perf_counter())
        elif ev.kind == "finish" and not (ev.status == "cached" and ev.stage in o.stages):
            o.stages[ev.stage] = (ev.status, ev.note)
        elif ev.kind == "warn" and ev.note not in o.warnings:
            o.warnings.append(ev.note)
        if on_event is not None:
            on_event(ev)

    def drain() -> None:
        for ev in ray.get(log.take.remote()):
            handle(ev)

    todo = deque(checked)
    pending: dict[Any, FilmJob] = {}
    chains: dict[Any, list[Any]] = {}  # last ref -> every task of that film (to cancel them on an interrupt)
    finished = False
    try:
        while todo or pending:
            while todo and len(pending) < limit:
                job = todo.popleft()
                refs: list[Any] = []
                for g in groups:
                    refs.append(task.options(**g.options, max_retries=max_retries, retry_exceptions=False,
                                             name=f"ingest:{job.film_id}:{'+'.join(g.stages)}").remote(
                        lib, settings, job, g, replace, log, refs[-1] if refs else None))
                pending[refs[-1]] = job
                chains[refs[-1]] = refs
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
            drain()
            for ref in ready:
                job = pending.pop(ref)
                chains.pop(ref)
                o = outcomes[str(job.film_id)]
                try:
                    ray.get(ref)
                    o.ok = True
                except Exception as exc:  # noqa: BLE001 - a film's failure is reported, the others go on
                    drain()
                    failed = [s for s, (status, _) in o.stages.items() if status == "failed"]
                    o.error = (f"{failed[-1]}: " if failed else "") + _error_text(exc)
                o.wall_s = time.perf_counter() - began.get(str(job.film_id), time.perf_counter())
                if on_film is not None:
                    on_film(o)
        drain()
        finished = True
    finally:
        if not finished:  # interrupted: stop this run's tasks (what they committed stays; a rerun resumes)
            for refs in chains.values():
                for r in refs:
                    ray.cancel(r)
        ray.kill(log)
    return [outcomes[str(j.film_id)] for j in checked]


# ----------------------------------------------------------------------------- progress on the driver


class IngestProgress:
    """Rich progress on stderr: one bar for the films, one line per film in flight."""

    def __init__(self, console: Any, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console
        self.bar = Progress(TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("[dim]{task.fields[note]}"), console=console,
                            transient=True)
        self.films = self.bar.add_task("films", total=total, note="")
        self.lines: dict[str, Any] = {}

    def __enter__(self) -> IngestProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def event(self, ev: Event) -> None:
        if ev.kind == "warn":
            where = f"{ev.film_id}: " if ev.film_id else ""
            self.console.print(Text.assemble(("warning:", "yellow"), f" {where}{ev.note}"), highlight=False)
            return
        if ev.film_id not in self.lines:
            self.lines[ev.film_id] = self.bar.add_task(f"  {ev.film_id}", total=None, note="")
        line = self.lines[ev.film_id]
        if ev.kind == "start":
            self.bar.update(line, description=f"  {ev.film_id}: {ev.stage}", completed=0, total=ev.total,
                            note=f"pid {ev.pid} on {ev.node}")
        elif ev.kind == "update":
            self.bar.update(line, completed=ev.done or 0, total=ev.total, note=ev.note or f"pid {ev.pid} on {ev.node}")
        elif ev.kind == "task" and ev.status == "started":
            self.bar.update(line, note=f"{ev.note} (pid {ev.pid} on {ev.node})")

    def film(self, outcome: FilmOutcome) -> None:
        line = self.lines.pop(outcome.film_id, None)
        if line is not None:
            self.bar.remove_task(line)
        self.bar.advance(self.films)
        status = ("done", "green") if outcome.ok else ("failed", "red")
        retried = f" ({outcome.attempts} attempts)" if outcome.attempts > 1 else ""
        error = "" if outcome.ok else f" {outcome.error}"
        self.console.print(Text.assemble(f"{outcome.film_id}: ", status, f"{error}{retried}  ", (f"{outcome.wall_s:.1f} s", "dim")),
                           highlight=False)
