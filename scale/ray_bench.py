"""A benchmark grid on Ray: the ordinary runner on the driver, its answers made by Ray actors.

eval/runner.py reaches films only through an `Answerer`; here that answerer hands each
question to one of N actors (each holds the library, its Film objects and the loaded
backbones). The runner stays the only writer of results.jsonl, so the records, the resume
item by item, the caps and the manifest are those of a serial run, and no row can be lost or
written twice by concurrent workers.

Sharding: a film's questions go to the actor that answered that film last while it has a free
slot (its Film, indexes and a local model's prompt cache are warm), otherwise to the least busy.

Failures: an actor whose process dies is restarted by Ray and its questions in flight are sent
again (max_restarts, max_task_retries); the driver still records each item once. When Ray
gives up (a node gone for good), the run stops like an interrupted one: what was recorded stays,
and a rerun resumes.

Caps: checked before each question rather than before each model call (the calls happen in the
workers); what the workers spent is charged to the run and the item as it comes back.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..backbones import Reply, Request
from ..backbones.base import SendBackbone
from ..eval.answerer import check_policies
from ..eval.budget import Budget, MeteredBackbone
from ..eval.formats import Benchmark
from ..eval.records import Spend
from ..eval.runner import MAX_CONCURRENCY, BenchResult, Progress, run_bench
from ..eval.tasks import Query
from ..foundation.config import Settings, get_settings
from ..foundation.errors import MovieMemError, UnreachableError
from .cluster import cap_threads, describe, import_ray
from .ray_doctor import local_backbones, require_healthy
from .remote_cache import RemoteCache, start_server


class ClusterLost(BaseException):
    """Ray could not answer (an actor restarted too often, a node lost). A BaseException, like
    the runner's BudgetExceeded, so the runner stops instead of recording the item as invalid."""


class RemoteBackbone(SendBackbone):
    """What the runner sees of a backbone that lives in the workers: spec, model and
    capabilities. Its calls are made in the workers, through RayAnswerer."""

    def __init__(self, spec: str, info: dict[str, Any]) -> None:
        self.name = spec
        self.model_id = info["model_id"]
        self.capabilities = info["capabilities"]
        self.sequential = info["sequential"]
        self.concurrency = info["concurrency"]

    def send(self, request: Request) -> Reply:
        raise MovieMemError(f"{self.name} answers inside the Ray workers; ask through RayAnswerer")


class AnswerWorker:
    """Ray actor body: answers questions with the same LibraryAnswerer as a serial run."""

    def __init__(self, library: str, settings: Settings, cache_server: Any, cache_mode: str, cpus: float) -> None:
        from ..eval.answerer import LibraryAnswerer
        from ..library import Library

        threads = cap_threads(cpus)
        if settings.llm_threads == 0:
            settings = settings.model_copy(update={"llm_threads": threads})
        self.answerer = LibraryAnswerer(Library(library, settings))
        self.server, self.mode = cache_server, cache_mode
        self.backbones: dict[str, MeteredBackbone] = {}
        self._lock = threading.Lock()

    def _backbone(self, spec: str) -> MeteredBackbone:
        with self._lock:
            if spec not in self.backbones:
                from ..backbones import load

                inner: Any = load(spec)
                if self.server is not None:
                    inner = RemoteCache(inner, self.server, self.mode)
                self.backbones[spec] = MeteredBackbone(inner, Budget(), spec)  # no caps here: the driver holds them
            return self.backbones[spec]

    def pid(self) -> int:
        return os.getpid()

    def doctor(self, specs: list[str]) -> tuple[str, int, list[Any]]:
        """The machine checks for the local backbones among `specs`, run before any work is given out."""
        import socket

        from .ray_doctor import worker_checks

        return socket.gethostname(), os.getpid(), worker_checks(specs)

    def describe(self, spec: str) -> dict[str, Any]:
        try:
            b = self._backbone(spec)
        except MovieMemError as exc:
            return {"error": str(exc)}
        return {"model_id": b.model_id, "capabilities": b.capabilities,
                "sequential": bool(getattr(b, "sequential", False)), "concurrency": int(getattr(b, "concurrency", 4))}

    def answer(self, film_id: str, query: Query, policy: str, spec: str) -> tuple[str, Any, Spend, int]:
        """(kind, Answer or error, what the calls spent, pid); errors come back as values so the
        driver records them exactly as a serial run would."""
        spend = Spend()
        try:
            b = self._backbone(spec)
            spend = b.begin_item()
            return "ok", self.answerer(film_id, query, policy, b), spend, os.getpid()
        except MovieMemError as exc:  # a server down (UnreachableError) stays one, so the item is asked again
            return "unreachable" if isinstance(exc, UnreachableError) else "moviemem", str(exc), spend, os.getpid()
        except Exception as exc:  # noqa: BLE001 - recorded with its reason by the runner
            return "error", (type(exc).__name__, str(exc)), spend, os.getpid()


class RayAnswerer:
    """An eval.runner Answerer that answers through a pool of AnswerWorker actors."""

    def __init__(self, actors: list[Any], slots: int) -> None:
        self.actors = actors
        self.slots = slots
        self.load = [0] * len(actors)
        self.home: dict[str, int] = {}
        self.pids: Counter[int] = Counter()  # answers per worker process (a restarted actor has a new pid)
        self._lock = threading.Lock()

    def check_policies(self, policies: Sequence[str]) -> None:
        check_policies(policies)

    def _pick(self, film_id: str) -> int:
        with self._lock:
            i = self.home.get(film_id)
            if i is None or self.load[i] >= self.slots:
                i = min(range(len(self.actors)), key=lambda k: self.load[k])
                self.home[film_id] = i
            self.load[i] += 1
            return i

    def _release(self, i: int) -> None:
        with self._lock:
            self.load[i] -= 1

    def __call__(self, film_id: str, query: Query, policy: str, backbone: Any) -> Any:
        ray = import_ray()
        budget = getattr(backbone, "budget", None)
        if budget is not None:
            budget.check()
        i = self._pick(film_id)
        try:
            kind, payload, spend, pid = ray.get(self.actors[i].answer.remote(film_id, query, policy, backbone.name))
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ClusterLost(f"Ray lost the answer to {film_id}/{query.key} ({policy}, {backbone.name}): "
                              f"{type(exc).__name__}: {first}") from None
        finally:
            self._release(i)
        with self._lock:
            self.pids[pid] += 1
        charge = getattr(backbone, "charge_spend", None)
        if charge is not None:
            charge(spend)
        if kind == "ok":
            return payload
        if kind == "moviemem":
            raise MovieMemError(payload)
        if kind == "unreachable":
            raise UnreachableError(payload)
        name, text = payload
        raise type(name, (Exception,), {})(text)  # same type name and text as in a serial run's record


def _cache_dir(cache: str | Path | None, library: Any) -> Path:
    if cache is not None:
        return Path(cache).expanduser().resolve()
    if library.store.is_local:
        return Path(library.path).resolve() / "cache"
    raise MovieMemError(f"the library {library.path} is not a local path: give --cache DIR, a directory on this machine "
                        "for the replay cache")


def bench_on_ray(bench: Benchmark, policies: Sequence[str], backbones: Sequence[str], out: str | Path, *,
                 library: str | Path, settings: Settings | None = None, workers: int | None = None,
                 concurrency: int = 1, max_cost_usd: float | None = None, max_tokens: int | None = None,
                 cache: str | Path | None = None, cache_mode: str | None = None, limit: int | None = None,
                 retry_invalid: bool = False, reask_changed: bool = False,
                 progress: Callable[[Progress], None] | None = None, max_retries: int = 3, on_start: Callable[[RayAnswerer], None] | None = None) -> BenchResult:
    """`run_bench` with the questions answered by `workers` Ray actors (default: one per CPU of
    the cluster), each answering `concurrency` questions at once. Backbones are spec strings
    (each worker loads its own). The replay cache (`cache`, default <library>/cache) is served
    to every worker by one actor on this node."""
    ray = import_ray()
    from ..backbones.cache import MODES
    from ..backbones.settings import get_backbone_settings
    from ..library import Library
    from ..memory.search import ensure_indexes
    from ..retrievers.text import SOURCES

    cluster = describe()
    if not policies:
        raise MovieMemError("no policies given")
    if not backbones:
        raise MovieMemError("no backbones given")
    not_specs = [b for b in backbones if not isinstance(b, str)]
    if not_specs:
        raise MovieMemError(f"with Ray, backbones are given as spec strings (each worker loads its own), "
                            f"not {type(not_specs[0]).__name__} objects")
    if len(set(backbones)) != len(backbones) or len(set(policies)) != len(policies):
        raise MovieMemError("a policy or backbone is named twice")
    if concurrency < 1:
        raise MovieMemError(f"concurrency must be at least 1, not {concurrency}")
    if workers is not None and workers < 1:
        raise MovieMemError(f"--ray-workers must be at least 1, not {workers}")
    n = workers or max(1, int(cluster.cpus))
    if n * concurrency > MAX_CONCURRENCY:
        raise MovieMemError(f"{n} workers x concurrency {concurrency} is more than {MAX_CONCURRENCY} questions at once")
    check_policies(policies)
    settings = settings or get_settings()
    lib = Library(library, settings)
    if lib.store.is_local:
        lib = Library(str(Path(lib.path).resolve()), settings)
    mode = cache_mode or get_backbone_settings().cache_mode
    if mode not in MODES:
        raise MovieMemError(f"unknown cache mode {mode!r}; use one of {', '.join(MODES)}")
    cache_dir = _cache_dir(cache, lib)
    for src in SOURCES.values():  # made once here: workers creating them at once would collide on commits
        ensure_indexes(lib.store, src.where)

    cpus_each = cluster.cpus_per_worker(n)
    server = start_server(cache_dir) if mode != "off" else None
    worker_cls = ray.remote(AnswerWorker).options(num_cpus=cpus_each, max_restarts=max_retries,
                                                  max_task_retries=max_retries, max_concurrency=concurrency)
    actors = [worker_cls.remote(lib.path, settings, server, mode, cpus_each) for _ in range(n)]
    try:
        try:
            reports = ray.get([a.doctor.remote(list(backbones)) for a in actors]) if local_backbones(backbones) else []
            require_healthy(reports)  # a node that cannot run the local model fails here, once
            infos = ray.get([actors[0].describe.remote(s) for s in backbones])
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MovieMemError(f"the Ray answering workers could not start: {type(exc).__name__}: {first}") from None
        for spec, info in zip(backbones, infos):
            if "error" in info:
                raise MovieMemError(f"backbone {spec}: {info['error']}")
        answerer = RayAnswerer(actors, concurrency)
        if on_start is not None:
            on_start(answerer)
        handles = [RemoteBackbone(s, info) for s, info in zip(backbones, infos)]
        return run_bench(bench, policies, handles, out, answerer=answerer, library=lib, concurrency=n * concurrency,
                         max_cost_usd=max_cost_usd, max_tokens=max_tokens, cache=cache_dir, cache_mode=mode,
                         limit=limit, retry_invalid=retry_invalid, reask_changed=reask_changed,
                         progress=progress)
    except ClusterLost as exc:
        raise MovieMemError(f"{exc}; the answers recorded so far stay in {out}: rerun to resume") from None
    finally:
        for a in actors:
            ray.kill(a)
        if server is not None:
            ray.kill(server)
