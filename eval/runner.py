"""The benchmark runner: a grid of policies x backbones x items, resumable item by item.

Run directory layout (plain JSON, readable without moviemem):
- run.json       what was asked: benchmark, format, policies, backbones, library, caps (records.RunHeader)
- items.jsonl    the validated benchmark items (so reports need no other file)
- results.jsonl  one line per (policy, backbone, item): status answered | invalid (with the
                 reason), the score, and every Answer in full (evidence, trace, usage) (records.ResultRecord)

Resuming: a rerun reads results.jsonl and skips the keys it holds; a line cut short by a kill
is dropped (its item runs again), so nothing is lost or duplicated. Lines are appended under a
lock and flushed one by one.

Changed items: each record carries its item's digest (`item_digest`). A rerun whose benchmark holds other
content under an id the directory already answered is refused before anything is written: the old answer
would be scored against the new question. `reask_changed` drops those answers instead (their spend kept
in run.json's `retired_spend`, as --retry-invalid does) and asks the items again.

Caps: `max_cost_usd` and `max_tokens` bound what the run directory spends on calls that reach
a model (replay-cache hits are free). They are checked before every backbone call; when one is
reached, no new call starts, items in flight stop unrecorded (they run again on resume), and
the result says where the run stopped.

The runner reaches films only through an `Answerer` (default: `Library.film(id).ask`), so it
can be sharded or run elsewhere without knowing moviemem's internals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from filelock import FileLock, Timeout

from ..agents.registry import parse_policy_spec
from ..backbones import Backbone, Reply, Request
from ..backbones.base import Wrapper
from ..backbones.retry import redact
from ..backbones.types import CONTEXT
from ..foundation.errors import BackboneCrashed, MovieMemError, UnreachableError
from ..foundation.files import atomic_write_text
from ..foundation.urls import redact_urls, url_secrets
from . import evidence, metrics
from .formats import Benchmark, Item, formats, item_category, text_lines
from .mf2_protocol import policy_protocols
from .records import LOG_VERSION, AnswerRecord, Config, Grid, RecordUsage, ResultRecord, RunHeader, Status, parse
from .records import Spend as Spend  # the runner's budget counts in it (scale/ray_bench.py imports it from here)
from .tasks import Query, task_for

RESULTS = "results.jsonl"
MAX_CONCURRENCY = 1024  # items answered at once: the driver's threads, and requests in flight
ITEMS = "items.jsonl"
MANIFEST = "run.json"
LOCK = ".writer.lock"


class BudgetExceeded(BaseException):
    """A cap was reached: the call was not made. A BaseException, like KeyboardInterrupt, so a
    policy that turns its backbone's errors into invalid answers cannot swallow the stop."""


# ----------------------------------------------------------------------------- answerer protocol


class Answerer(Protocol):
    """Answers one query about one film with one policy and backbone; returns an Answer
    (anything with choice, text, confidence, invalid, error, evidence, trace, usage)."""

    def __call__(self, film_id: str, query: Query, policy: str, backbone: Any) -> Any: ...


class LibraryAnswerer:
    """The default Answerer: `library.film(film_id).ask(...)`, one Film object per film."""

    def __init__(self, library: Any):
        self.library = library
        self._films: dict[str, Any] = {}
        self._lock = threading.Lock()

    def film(self, film_id: str) -> Any:
        with self._lock:
            if film_id not in self._films:
                self._films[film_id] = self.library.film(film_id)
            return self._films[film_id]

    def __call__(self, film_id: str, query: Query, policy: str, backbone: Any) -> Any:
        return self.film(film_id).ask(query.question, options=list(query.options) or None, kind=query.kind,
                                      policy=policy, backbone=backbone, until=query.until)  # get_policy reads the spec

    def check_policies(self, policies: Sequence[str]) -> None:
        check_policies(policies)


def check_policies(policies: Sequence[str]) -> None:
    """Refuse unknown policy names and settings (`name[key=value,...]`) before any call is made."""
    from ..agents.registry import get_policy

    for p in policies:
        get_policy(p)


# ----------------------------------------------------------------------------- budget and metering


class Budget:
    """Spending of a run directory against its caps; thread-safe."""

    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None, spent: Spend | None = None):
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.before = spent or Spend()  # what earlier invocations spent
        self.now = Spend()  # this invocation
        self.exceeded: str | None = None
        self.reserved = 0  # output tokens that calls in flight may still spend
        self._lock = threading.Lock()

    def check(self, reserve: int = 0) -> None:
        """Before a call: refuse it unless what is spent, what calls in flight may still spend
        and this call's output limit (`reserve`, its max_tokens) fit under the token cap; then
        hold `reserve` until `charge`. Input tokens are known only when a call returns."""
        with self._lock:
            if self.exceeded:
                raise BudgetExceeded(self.exceeded)
            cost = self.before.cost_usd + self.now.cost_usd
            tokens = self.before.tokens + self.now.tokens
            if self.max_cost_usd is not None and cost >= self.max_cost_usd:
                self.exceeded = f"cost cap ${self.max_cost_usd:.2f} reached (${cost:.4f} spent)"
            elif self.max_tokens is not None and tokens + self.reserved + reserve > self.max_tokens:
                self.exceeded = (f"token cap {self.max_tokens} reached ({tokens} tokens spent; the next call may "
                                 f"produce {reserve} more)")
            if self.exceeded:
                raise BudgetExceeded(self.exceeded)
            self.reserved += reserve

    def release(self, reserved: int) -> None:
        with self._lock:
            self.reserved -= reserved

    def charge(self, reply: Any, item_spend: Spend | None, reserved: int = 0) -> None:
        self.release(reserved)
        fresh = Spend(transient=int(bool(getattr(reply, "transient", False))))
        if getattr(reply, "cached", False):
            fresh.cache_hits = 1
        else:
            u = reply.usage
            fresh.calls = 1
            fresh.tokens = int(u.input_tokens) + int(u.output_tokens)
            if u.cost_usd is None:
                fresh.unpriced_calls = 1
            else:
                fresh.cost_usd = float(u.cost_usd)
        self.add(fresh, item_spend)

    def add(self, fresh: Spend, item_spend: Spend | None = None) -> None:
        """Count spending measured elsewhere (a Ray worker's calls) against the run and the item."""
        with self._lock:
            self.now.add(fresh)
            if item_spend is not None:
                item_spend.add(fresh)


class MeteredBackbone(Wrapper):
    """Wraps a backbone: checks the budget before each call and charges what came back,
    both to the run and to the item being answered on this thread."""

    def __init__(self, inner: Backbone, budget: Budget, spec: str):
        super().__init__(inner, name=spec)
        self.budget = budget
        self._local = threading.local()

    def begin_item(self) -> Spend:
        self._local.spend = Spend()
        return self._local.spend

    def _item(self) -> Spend | None:
        return getattr(self._local, "spend", None)

    def charge_spend(self, spend: Spend) -> None:
        """Charge calls made with this backbone's spec in another process to the run and the
        item being answered on this thread (scale/ray_bench.py answers items in Ray workers)."""
        self.budget.add(spend, self._item())

    def _metered(self, call: Callable[[], Any], reserves: list[int]) -> list[Any]:
        """Check the caps with the calls' output limits held, call, then charge what came back."""
        self.budget.check(sum(reserves))
        try:
            replies: list[Any] = call()
        except BaseException:
            self.budget.release(sum(reserves))
            raise
        for reply, reserve in zip(replies, reserves):
            self.budget.charge(reply, self._item(), reserve)
        return replies

    def send(self, request: Request) -> Reply:
        reply: Reply = self._metered(lambda: [self.inner.send(request)], [request.max_tokens])[0]
        return reply


# ----------------------------------------------------------------------------- records


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        to_dict = getattr(obj, "to_dict", None)
        data = to_dict() if callable(to_dict) else {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {k: _jsonable(v) for k, v in data.items()}
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and obj != obj:
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def answer_record(ans: Any) -> AnswerRecord:
    """The full Answer: every evidence field (frame paths included), the trace and usage."""
    u = getattr(ans, "usage", None)
    return AnswerRecord(
        choice=getattr(ans, "choice", None), text=getattr(ans, "text", "") or "",
        confidence=getattr(ans, "confidence", None), invalid=bool(getattr(ans, "invalid", False)),
        error=getattr(ans, "error", None), reason=getattr(ans, "reason", None),
        grounded=bool(getattr(ans, "grounded", True)), policy=getattr(ans, "policy", None),
        backbone=getattr(ans, "backbone", None),
        evidence=[_jsonable(e) for e in getattr(ans, "evidence", []) or []],
        trace=[_jsonable(s.to_dict() if hasattr(s, "to_dict") else s) for s in getattr(ans, "trace", []) or []],
        usage=RecordUsage.model_validate(_jsonable(u)) if u is not None else RecordUsage(),
        calls=int(getattr(ans, "calls", 0) or 0), replayed_calls=int(getattr(ans, "replayed_calls", 0) or 0),
    )


def record_key(policy: str, backbone: str, item_id: str) -> str:
    return f"{policy}\t{backbone}\t{item_id}"


def _usage_sum(answers: dict[str, AnswerRecord]) -> RecordUsage:
    us = [a.usage for a in answers.values()]
    priced = [u.cost_usd for u in us if u.cost_usd is not None]
    return RecordUsage(input_tokens=sum(u.input_tokens for u in us), output_tokens=sum(u.output_tokens for u in us),
                       cached_input_tokens=sum(u.cached_input_tokens for u in us), images=sum(u.images for u in us),
                       latency_s=sum(u.latency_s or 0 for u in us), cost_usd=sum(priced) if priced else None)


def iter_log(run_dir: str | Path) -> Iterator[ResultRecord]:
    """Records of a run directory, one line read at a time, so a caller that keeps only what it needs holds
    no more than that of a large log. A last line cut short by a kill is ignored; a repeated key keeps its
    first record."""
    path = Path(run_dir) / RESULTS
    if not path.exists():
        return
    seen: set[str] = set()
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break  # an unterminated last line: written when the process died
            rec = parse(ResultRecord, line, f"{path}: line {lineno}")
            if rec.key not in seen:
                seen.add(rec.key)
                yield rec


def read_log(run_dir: str | Path, repair: bool = False) -> list[ResultRecord]:
    """Records of a run directory (`iter_log`), in a list. A last line cut short by a kill is cut off the
    file when `repair`."""
    records = list(iter_log(run_dir))
    path = Path(run_dir) / RESULTS
    if repair and path.exists():
        _cut_torn_tail(path)
    return records


def _cut_torn_tail(path: Path) -> None:
    """Cut an unterminated last line (a write a kill cut short) off the file."""
    with path.open("r+b") as f:
        end = f.seek(0, os.SEEK_END)
        pos, chunk = end, 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            block = f.read(pos - start)
            nl = block.rfind(b"\n")
            if nl >= 0:
                good = start + nl + 1
                break
            pos = start
        else:
            good = 0
        if good < end:
            f.truncate(good)


def read_items(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of a run directory's items.jsonl; a damaged line is a one-line error naming the file and line."""
    path = Path(run_dir) / ITEMS
    if not path.exists():
        raise MovieMemError(f"{run_dir} is not a run directory: no {ITEMS}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise MovieMemError(f"{path} is not UTF-8 text; the file was edited or is damaged") from None
    rows = []
    for n, line in text_lines(text):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise MovieMemError(f"{path}: line {n} is not JSON ({exc.msg}); the file was edited or is damaged") from None
        if not isinstance(rows[-1], dict) or "id" not in rows[-1]:
            raise MovieMemError(f"{path}: line {n} is not an item (a JSON object with an id); the file was edited "
                                "or is damaged")
    return rows


def read_header(run_dir: str | Path) -> RunHeader:
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        raise MovieMemError(f"{run_dir} is not a run directory: no {MANIFEST}")
    return parse(RunHeader, path.read_bytes(), str(path))


class JsonlWriter:
    """Appends records to a run directory's JSONL file (results.jsonl, judge.jsonl), each line flushed
    and synced, and redacted first: a reply may echo a key or the user:password its server was sent
    (`secrets`: the backbones' credential values, backbones.retry.redact)."""

    def __init__(self, path: Path, secrets: Iterable[str] = ()):
        self.path = path
        self.secrets = list(secrets)
        self._lock = threading.Lock()
        self._f = path.open("a", encoding="utf-8")

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def write(self, rec: dict[str, Any]) -> None:
        line = self.redact(json.dumps(rec, ensure_ascii=False, allow_nan=False)) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, redact(json.dumps(obj, ensure_ascii=False, indent=1, default=str)) + "\n")


# ----------------------------------------------------------------------------- the run


@dataclass
class Progress:
    done: int  # records in the run directory for this grid
    total: int
    spend: Spend  # this invocation
    last: ResultRecord | None = None


@dataclass
class BenchResult:
    run_dir: Path
    items: int
    total: int  # grid size: policies x backbones x items
    answered: int
    invalid: int
    spend: Spend
    stopped: str | None = None
    warnings: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    unfit: int = 0  # prompts longer than the backbone's context: not sent, not scored

    @property
    def complete(self) -> bool:
        return self.answered + self.invalid + self.unfit == self.total


def backbone_spec(b: Any) -> str:
    """The name a backbone goes by in records, run.json and reports: never with URL credentials."""
    return redact_urls(b if isinstance(b, str) else str(getattr(b, "name", type(b).__name__)))


def _load_backbone(b: Any, cache: Path | None, cache_mode: str | None) -> Any:
    from ..backbones import load

    if isinstance(b, str):
        return load(b, cache=cache if cache is not None else False, cache_mode=cache_mode)
    if cache is not None:
        from ..backbones import ReplayCache

        return ReplayCache(b, cache, cache_mode)
    return b


def _order(items: Sequence[Item]) -> list[Item]:
    """Items of one film together (in file order of first appearance), so a local model reuses
    the film's shared context prefix from its prompt cache."""
    first: dict[str, int] = {}
    for i, it in enumerate(items):
        first.setdefault(it.film_id, i)
    return sorted(items, key=lambda it: first[it.film_id])


def _check_sizes(limit: int | None, concurrency: int, max_cost_usd: float | None, max_tokens: int | None) -> None:
    """A bench's numbers, checked before its run directory is made."""
    if limit is not None and limit < 1:  # 0 would mean no limit, and a negative one would drop the last items
        raise MovieMemError(f"limit must be at least 1, not {limit}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise MovieMemError(f"concurrency must be between 1 and {MAX_CONCURRENCY}, not {concurrency}")
    for name, cap in (("max cost", max_cost_usd), ("max tokens", max_tokens)):
        if cap is not None and not 0 <= cap < math.inf:  # NaN fails too: a NaN cap would never stop anything
            raise MovieMemError(f"{name} must be a finite number >= 0, not {cap}")


def item_digest(item: Item) -> str:
    """An item's content (question, options, answer, film, every key): what its answer was given to."""
    # as items.jsonl holds it (None left out), so an item read back from there has the digest it was answered with
    text = json.dumps(item.model_dump(mode="json", exclude_none=True), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _changed(records: Sequence[ResultRecord], digests: dict[str, str], run_dir: Path, reask: bool,
             warnings: list[str]) -> set[str]:
    """Keys of the records answered for other content under an id of this benchmark (`digests`: by id), every
    configuration's: refused unless `reask`, then returned to be dropped and asked again. Records without a
    digest (an older moviemem's) are matched by id alone, and a warning says so."""
    ours = [r for r in records if r.item_id in digests]
    stale = [r for r in ours if r.item_digest is not None and r.item_digest != digests[r.item_id]]
    ids = sorted({r.item_id for r in stale})
    if ids and not reask:
        raise MovieMemError(f"{len(ids)} item(s) changed since {run_dir} answered them under the same id (first: "
                            f"{ids[0]!r}); pass --reask-changed to ask them again, or use another --out")
    if ids:
        warnings.append(f"asking {len(ids)} changed item(s) again; their {len(stale)} earlier answer(s) are superseded")
    blind = sum(r.item_digest is None for r in ours)
    if blind:
        warnings.append(f"{blind} earlier answer(s) in {run_dir} carry no item digest (an older moviemem wrote them): "
                        "matched to this benchmark's items by id alone, so a change to those items goes unnoticed")
    return {r.key for r in stale}


@contextlib.contextmanager
def only_writer(run_dir: Path) -> Iterator[None]:
    """A run directory has one writer at a time (bench or judge): a second bench on the same --out
    would ask and pay for every item again, a --retry-invalid rewrite would drop the other's
    appends, and two judges would each judge every answer."""
    lock = FileLock(str(run_dir / LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise MovieMemError(f"another bench or judge is writing to {run_dir}; wait for it to finish or use another "
                            "--out") from None
    try:
        yield
    finally:
        lock.release()


def _one_writer(fn: Callable[..., BenchResult]) -> Callable[..., BenchResult]:
    """A bench creates its run directory and holds it as `only_writer`."""

    @functools.wraps(fn)
    def locked(bench: Benchmark, policies: Sequence[str], backbones: Sequence[Any], out: str | Path,
               **kw: Any) -> BenchResult:
        if not policies or not backbones:
            raise MovieMemError(f"no {'policies' if not policies else 'backbones'} given")
        _check_sizes(kw.get("limit"), kw.get("concurrency", 1), kw.get("max_cost_usd"), kw.get("max_tokens"))
        run_dir = Path(out)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MovieMemError(f"cannot create run directory {run_dir}: {exc.strerror or exc}") from None
        with only_writer(run_dir):
            return fn(bench, policies, backbones, out, **kw)

    return locked


@_one_writer
def run_bench(bench: Benchmark, policies: Sequence[str], backbones: Sequence[Any], out: str | Path, *,
              answerer: Answerer | None = None, library: Any = None, concurrency: int = 1,
              max_cost_usd: float | None = None, max_tokens: int | None = None,
              cache: str | Path | None = None, cache_mode: str | None = None, limit: int | None = None,
              retry_invalid: bool = False, reask_changed: bool = False,
              progress: Callable[[Progress], None] | None = None) -> BenchResult:
    """Answer every item of `bench` with every policy x backbone; results go to `out`.

    `backbones` are spec strings (loaded with the replay cache at `cache`, default
    <library>/cache) or Backbone objects. `retry_invalid` reruns items recorded invalid;
    `reask_changed` asks again the items whose content changed under an id already answered.
    """
    started = time.perf_counter()
    if answerer is None:
        if library is None:
            raise MovieMemError("run_bench needs a library or an answerer")
        answerer = LibraryAnswerer(library)
    check = getattr(answerer, "check_policies", None)
    if check is not None:
        check(policies)
    task = task_for(bench.format)
    items = list(bench.items)[:limit]
    specs = [backbone_spec(b) for b in backbones]
    if len(set(specs)) != len(specs) or len(set(policies)) != len(policies):
        raise MovieMemError("a policy or backbone is named twice")

    run_dir = Path(out)  # created and locked by _one_writer
    manifest_path = run_dir / MANIFEST
    old = read_header(run_dir) if manifest_path.exists() else None
    if old is not None and old.format != bench.format:
        raise MovieMemError(f"{run_dir} holds a {old.format} run; use another --out for {bench.format}")

    records = read_log(run_dir, repair=True)
    known = {row["id"]: row for row in (read_items(run_dir) if (run_dir / ITEMS).exists() else [])}  # read before any write
    warnings: list[str] = []
    digests = {it.id: item_digest(it) for it in items}
    changed = _changed(records, digests, run_dir, reask_changed, warnings)
    retired = old.retired_spend if old is not None else Spend()  # spend of records dropped by --retry-invalid
    # transport faults are no answer: always asked again; invalid answers and prompts that did not fit
    # the context (a larger context may take them) only when asked to
    again = {"transient"} | ({"invalid", "unfit"} if retry_invalid else set())
    keep = [r for r in records if r.status not in again and r.key not in changed]
    for r in records:
        if r.status in again or r.key in changed:
            retired.add(r.spend)
    if len(keep) != len(records):
        atomic_write_text(run_dir / RESULTS, "".join(json.dumps(r.line(), ensure_ascii=False) + "\n" for r in keep))
        for status, what in (("invalid", "invalid item(s)"), ("unfit", "item(s) whose prompt did not fit the context"),
                             ("transient", "item(s) that hit transport faults")):
            n = sum(r.status == status for r in records if status in again and r.key not in changed)
            if n:
                warnings.append(f"retrying {n} {what}")
    records = keep
    done = {r.key for r in records}

    protocols = policy_protocols(policies, old.protocols if old else None)  # issue 56; refused before any write
    # items.jsonl: the union of what earlier runs and this one asked, this run's version winning
    known.update({it.id: it.model_dump(mode="json", exclude_none=True) for it in items})
    atomic_write_text(run_dir / ITEMS, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in known.values()))
    lib_path = getattr(library, "path", None) or getattr(getattr(answerer, "library", None), "path", None)
    if lib_path and "://" not in str(lib_path):
        lib_path = str(Path(lib_path).resolve())
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    header = RunHeader(
        log_version=LOG_VERSION, benchmark=bench.path, format=bench.format, source=bench.source,
        policies=sorted(set(old.policies if old else []) | set(policies)),
        backbones=sorted(set(old.backbones if old else []) | set(specs)),
        library=str(lib_path) if lib_path else old.library if old else None,
        created=(old.created if old else None) or now, updated=now,
        max_cost_usd=max_cost_usd, max_tokens=max_tokens, items_digest=benchmark_digest(items),
        retired_spend=retired, task_description=formats()[bench.format].description)
    if protocols:
        header.protocols = protocols
    _write_json(manifest_path, header.line())

    spent = Spend()
    spent.add(retired)
    for r in records:
        spent.add(r.spend)
    budget = Budget(max_cost_usd, max_tokens, spent)
    cache_path = Path(cache) if cache is not None else (Path(lib_path) / "cache" if lib_path else None)
    metered = [MeteredBackbone(_load_backbone(b, cache_path, cache_mode), budget, spec)
               for b, spec in zip(backbones, specs)]
    _record_provenance(manifest_path, header, old.provenance if old else None, metered, policies, warnings,
                       library or getattr(answerer, "library", None), [it.film_id for it in items])

    grid = [(p, mb, it) for mb in metered for p in policies for it in _order(items)]
    total = len(grid)
    todo = [(p, mb, it) for p, mb, it in grid if record_key(p, mb.name, it.id) not in done]
    grid_keys = {record_key(p, mb.name, it.id) for p, mb, it in grid}
    counts = {s: sum(1 for r in records if r.status == s and r.key in grid_keys)
              for s in ("answered", "invalid", "unfit", "transient")}
    lock = threading.Lock()
    stopped_at: list[str] = []

    def one(policy: str, mb: MeteredBackbone, item: Item) -> ResultRecord | None:
        t0 = time.perf_counter()
        item_spend = mb.begin_item()
        answers: dict[str, AnswerRecord] = {}
        failure: str | None = None
        unreachable = False
        for q in task.queries(item):
            try:
                answers[q.key] = answer_record(answerer(item.film_id, q, policy, mb))
            except BudgetExceeded:
                with lock:
                    stopped_at.append(f"policy={policy} backbone={mb.name} item={item.id}")
                return None
            except BackboneCrashed:
                raise  # the model's process died: every later item would fail the same way, so the run stops
            except MovieMemError as exc:
                failure = f"{q.key}: {exc}"
                unreachable = isinstance(exc, UnreachableError)  # a server down, not the item: asked again on rerun
                break
            except Exception as exc:  # noqa: BLE001 - recorded with its reason, never dropped
                failure = f"{q.key}: {type(exc).__name__}: {exc}"
                break
        written = {k: a.line() for k, a in answers.items()}  # as tasks (plug-ins among them) and metrics read answers
        reason: str | None
        if failure is not None:
            scored_correct, detail, reason = None, {}, failure
        else:
            sc = task.score(item, written)
            scored_correct, detail, reason = sc.correct, sc.detail, sc.invalid_reason
        measures: dict[str, Any] = {}  # written only when measured: a line without them reads as before
        unfit = any(a.reason == CONTEXT for a in answers.values())  # a prompt the model never read
        gold = getattr(item, "evidence", None) or []
        if gold and answers and not unfit:  # nothing was sent: no evidence to measure
            measures["evidence"] = evidence.record_evidence([list(g) for g in gold], written, scored_correct)
        fault = bool(item_spend.transient) or unreachable
        n_search = evidence.searches(written)
        if n_search is not None:
            measures["searches"] = n_search
        status: Status = ("transient" if fault else "unfit" if unfit else "invalid") if reason else "answered"
        return ResultRecord(
            log_version=LOG_VERSION, key=record_key(policy, mb.name, item.id), policy=policy, backbone=mb.name,
            item_id=item.id, item_digest=digests[item.id], film_id=item.film_id, format=bench.format, category=item_category(item), status=status,
            reason=f"transport fault: {reason}" if reason and fault else f"context: {reason}" if unfit else reason,
            correct=None if unfit else scored_correct, detail=_jsonable(detail), answers=answers,
            usage=_usage_sum(answers), grounded=all(a.grounded for a in answers.values()) if answers else False,
            spend=item_spend, wall_s=round(time.perf_counter() - t0, 4),
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **measures)

    # the specs' own URL credentials too: a backbone answering elsewhere (Ray workers) names no secrets here
    secrets = [v for mb in metered for v in mb.secrets()] + [v for b in backbones if isinstance(b, str) for v in url_secrets(b)]
    writer = JsonlWriter(run_dir / RESULTS, secrets)
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        pending: set[Future[Any]] = set()
        queue = iter(todo)
        exhausted = False
        while True:
            while not exhausted and not budget.exceeded and len(pending) < concurrency:
                nxt = next(queue, None)
                if nxt is None:
                    exhausted = True
                    break
                pending.add(pool.submit(one, *nxt))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                try:
                    rec = fut.result()
                except BackboneCrashed as exc:
                    kept = counts["answered"] + counts["invalid"] + counts["unfit"]
                    raise BackboneCrashed(f"{exc}; the {kept} answer(s) recorded in {run_dir} stay: rerun to resume") from None
                if rec is None:
                    continue
                writer.write(rec.line())
                counts[rec.status] += 1
                if progress is not None:
                    progress(Progress(counts["answered"] + counts["invalid"] + counts["unfit"], total, budget.now, rec))
    except BaseException:
        # Ctrl-C or a crash: items in flight stop at their next backbone call and are not recorded
        budget.exceeded = budget.exceeded or "interrupted"
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        writer.close()
    _record_prompts(manifest_path, header, run_dir)

    stopped = None
    if budget.exceeded:
        n_done = counts["answered"] + counts["invalid"] + counts["unfit"]
        where = sorted(stopped_at)[0] if stopped_at else "before the next item"
        stopped = (f"{budget.exceeded}: stopped after {n_done}/{total} items, at {where}; "
                   f"rerun with a higher cap to resume")
    if counts["transient"]:
        warnings.append(f"{counts['transient']} item(s) got no reply from the model (transport faults, not scored); "
                        f"rerun to ask them again")
    if counts["unfit"]:
        warnings.append(f"{counts['unfit']} item(s) had a prompt longer than the backbone's context: not sent, "
                        "not scored and left out of paired tests (a larger context and --retry-invalid ask them again)")
    if budget.now.unpriced_calls and max_cost_usd is not None:
        warnings.append(f"{budget.now.unpriced_calls} call(s) had no known price and count $0 against --max-cost")
    return BenchResult(run_dir, len(items), total, counts["answered"], counts["invalid"], budget.now, stopped,
                       warnings, round(time.perf_counter() - started, 3), counts["unfit"])


# ----------------------------------------------------------------------------- summaries


def _resolved_settings(spec: str) -> dict[str, Any]:
    """A policy's full settings (defaults with the spec's overrides); the overrides alone for an unknown policy."""
    from ..agents import get_policy

    name, overrides = parse_policy_spec(spec)
    try:
        return cast("dict[str, Any]", _jsonable(cast(Any, get_policy(name, **overrides)).settings))
    except MovieMemError:
        return overrides


def _record_provenance(path: Path, header: RunHeader, old: dict[str, Any] | None, metered: list[MeteredBackbone],
                       policies: Sequence[str], warnings: list[str], library: Any = None,
                       film_ids: Sequence[str] = ()) -> None:
    """run.json gets what produced the numbers; a rerun whose provenance differs says what changed."""
    from . import provenance

    films = provenance.film_stages(library, list(film_ids)) if library is not None else {}
    prov = provenance.collect({mb.name: mb.inner for mb in metered}, {p: _resolved_settings(p) for p in policies}, films)
    changes = provenance.differences(old, prov)
    if changes:
        warnings.append("provenance differs from the earlier run in this directory: " + "; ".join(changes))
    for group in ("backbones", "policies"):  # configurations of earlier invocations stay described
        prov[group] = {**((old or {}).get(group) or {}), **prov[group]}
    prov["changes"] = [*((old or {}).get("changes") or []), *changes]
    header.provenance = prov
    _write_json(path, header.line())


def _record_prompts(path: Path, header: RunHeader, run_dir: Path) -> None:
    """The prompt ids and versions each policy's answers sent, read from the records once they are written."""
    from . import provenance

    header.provenance = {**(header.provenance or {}), "prompts": provenance.prompts(iter_log(run_dir))}
    _write_json(path, header.line())


def lean(rec: ResultRecord) -> ResultRecord:
    """A record without what only the inspector shows: each answer's evidence spans and its trace steps other
    than parses (`fallback_parsed` reads those). The record's evidence scores stay. Most of a log's bytes, so
    summaries of a large run hold little; never written back."""
    for a in rec.answers.values():
        a.evidence = []
        a.trace = [s for s in a.trace if s.get("kind") == "parse"]
    return rec


def log_grid(run_dir: str | Path, unfit: bool = False, slim: bool = False) -> tuple[list[Item], Grid]:
    """Items (validated again) and the records of each (policy, backbone), in item order. Records of prompts
    that did not fit the context are left out (never scored, never paired) unless `unfit` asks for them.
    The log is read a line at a time; `slim` keeps each record `lean`."""
    from .formats import validate_rows

    header = read_header(run_dir)
    rows = read_items(run_dir)
    items = validate_rows(((i + 1, r) for i, r in enumerate(rows)), header.format, str(Path(run_dir) / ITEMS))
    by_key: dict[Config, dict[str, ResultRecord]] = {}
    for r in iter_log(run_dir):
        if r.status == "transient" or (r.status == "unfit" and not unfit):
            continue  # no answer to score: the configuration shows as incomplete until a rerun asks again
        by_key.setdefault(r.config, {})[r.item_id] = lean(r) if slim else r
    order = {it.id: i for i, it in enumerate(items)}
    out = {k: sorted((r for iid, r in v.items() if iid in order), key=lambda r: order[r.item_id])
           for k, v in by_key.items()}
    return items, out


def fallback_parsed(records: Sequence[ResultRecord]) -> metrics.Estimate:
    """Share of a configuration's valid answers that were read from free text by a fallback
    parser rather than from the model's JSON (each answer's last parse step in its trace)."""
    hows = []
    for rec in records:
        for ans in rec.answers.values():
            parses = [s for s in ans.trace if s.get("kind") == "parse" and not s.get("invalid")]
            if parses:
                hows.append(parses[-1].get("how") == "fallback")
    return metrics.wilson(sum(hows), len(hows))


def scored_log(run_dir: str | Path, slim: bool = False) -> tuple[list[Item], Grid, dict[Config, int]]:
    """`log_grid` read once, split: the records that can be scored (every configuration a key, even one
    whose every prompt was too long), and per configuration the items whose prompt did not fit the context."""
    items, grid = log_grid(run_dir, unfit=True, slim=slim)
    unfit = {key: sum(r.status == "unfit" for r in recs) for key, recs in grid.items()}
    return items, {key: [r for r in recs if r.status != "unfit"] for key, recs in grid.items()}, unfit


def summarise(run_dir: str | Path) -> list[dict[str, Any]]:
    """One row per (policy, backbone): the task's scores over the items it has records for. Records are
    read `lean`: a task summarises scores, details, choices and the record's evidence scores, not the
    spans each answer was shown."""
    task = task_for(read_header(run_dir).format)
    items, grid, unfit = scored_log(run_dir, slim=True)
    by_id = {it.id: it for it in items}
    rows = []
    for (policy, backbone), recs in sorted(grid.items()):
        its = [by_id[r.item_id] for r in recs]
        s = task.summarise(its, [r.line() for r in recs])  # tasks (plug-ins among them) read records as JSON
        usage = [r.usage for r in recs]
        tokens = [u.input_tokens for u in usage]
        priced = [u.cost_usd for u in usage if u.cost_usd is not None]
        s.update({"policy": policy, "backbone": backbone, "n": len(recs),
                  "answered": sum(r.status == "answered" for r in recs),
                  "invalid_n": sum(r.status == "invalid" for r in recs),
                  "unfit_n": unfit.get((policy, backbone), 0),
                  # answers the model gave while shown no evidence from the film: guesses (closed-book's by design)
                  "guesses": metrics.wilson(sum(r.status == "answered" and not r.grounded for r in recs),
                                            sum(r.status == "answered" for r in recs)).to_dict(),
                  "fallback_parsed": fallback_parsed(recs).to_dict(),
                  "median_input_tokens": statistics.median(tokens) if tokens else None,
                  "total_input_tokens": sum(tokens),
                  # what the model really read: billed input less the prefix it reused from its prompt cache
                  "total_processed_tokens": sum(tokens) - sum(u.cached_input_tokens for u in usage),
                  "total_output_tokens": sum(u.output_tokens for u in usage),
                  "cost_usd": sum(priced) if priced else None,
                  "compute_s": round(sum(r.wall_s for r in recs), 3),
                  "latency_s": round(sum(u.latency_s or 0 for u in usage), 3),
                  **evidence.summary(recs)})
        rows.append(s)
    return rows


def bench_json(result: BenchResult) -> dict[str, Any]:
    """The `moviemem bench --json` object."""
    rows = []
    for s in summarise(result.run_dir):
        acc = s.get("accuracy")
        rows.append({"policy": s["policy"], "backbone": s["backbone"], "n": s["n"],
                     "accuracy": acc["value"] if acc else None, "ci_low": acc["ci_low"] if acc else None,
                     "ci_high": acc["ci_high"] if acc else None, "median_input_tokens": s["median_input_tokens"]})
    return cast("dict[str, Any]", _jsonable({"run_dir": str(result.run_dir), "items": result.items, "answered": result.answered,
            "invalid": result.invalid, "backbone_calls": result.spend.calls, "cache_hits": result.spend.cache_hits,
            "cost_usd": round(result.spend.cost_usd, 6), "stopped": result.stopped, "warnings": result.warnings,
            "wall_s": result.wall_s, "results": rows}))


def benchmark_digest(items: Iterable[Item]) -> str:
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps(it.model_dump(mode="json"), sort_keys=True).encode())
    return h.hexdigest()[:16]
