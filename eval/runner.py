"""The benchmark runner: a grid of policies x backbones x items, resumable item by item.

The run directory's files are written and read through log.py (which describes them); nothing but the
CLI and scale/ calls into this module. Resuming: a rerun reads results.jsonl and skips the keys it holds.

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

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..agents.registry import parse_policy_spec
from ..backbones.types import CONTEXT
from ..foundation.errors import BackboneCrashed, MovieMemError, UnreachableError
from ..foundation.files import atomic_write_text
from ..foundation.urls import url_secrets
from . import evidence
from .answerer import Answerer, LibraryAnswerer
from .budget import Budget, BudgetExceeded, MeteredBackbone
from .formats import Benchmark, Item, formats, item_category
from .log import (
    ITEMS,
    MANIFEST,
    RESULTS,
    CallWriter,
    JsonlWriter,
    backbone_spec,
    benchmark_digest,
    item_digest,
    iter_log,
    jsonable,
    only_writer,
    read_header,
    read_items,
    read_log,
    record_key,
    write_json,
)
from .mf2_protocol import policy_protocols
from .outputs import BenchJson, BenchJsonRow
from .records import LOG_VERSION, AnswerRecord, Measures, Provenance, RecordUsage, ResultRecord, RunHeader, Spend, Status
from .run import RunLog
from .tasks import Task, task_for

MAX_CONCURRENCY = 1024  # items answered at once: the driver's threads, and requests in flight


# ----------------------------------------------------------------------------- records


def answer_record(ans: Any, call_ids: list[str] | None = None) -> AnswerRecord:
    """The full Answer: every evidence field (frame paths included), the trace and usage; its calls as sent are in
    the run's call log, named by `call_ids`."""
    u = getattr(ans, "usage", None)
    return AnswerRecord(
        choice=getattr(ans, "choice", None), text=getattr(ans, "text", "") or "",
        confidence=getattr(ans, "confidence", None), invalid=bool(getattr(ans, "invalid", False)),
        error=getattr(ans, "error", None), reason=getattr(ans, "reason", None),
        grounded=bool(getattr(ans, "grounded", True)), policy=getattr(ans, "policy", None),
        backbone=getattr(ans, "backbone", None),
        evidence=[jsonable(e) for e in getattr(ans, "evidence", []) or []],
        trace=[jsonable(s.to_dict() if hasattr(s, "to_dict") else s) for s in getattr(ans, "trace", []) or []],
        usage=RecordUsage.model_validate(jsonable(u)) if u is not None else RecordUsage(),
        calls=int(getattr(ans, "calls", 0) or 0), replayed_calls=int(getattr(ans, "replayed_calls", 0) or 0),
        **({"call_ids": call_ids} if call_ids else {}),
    )


def _usage_sum(answers: dict[str, AnswerRecord]) -> RecordUsage:
    us = [a.usage for a in answers.values()]
    priced = [u.cost_usd for u in us if u.cost_usd is not None]
    return RecordUsage(input_tokens=sum(u.input_tokens for u in us), output_tokens=sum(u.output_tokens for u in us),
                       cached_input_tokens=sum(u.cached_input_tokens for u in us),
                       restored_input_tokens=sum(u.restored_input_tokens for u in us), images=sum(u.images for u in us),
                       latency_s=sum(u.latency_s or 0 for u in us), cost_usd=sum(priced) if priced else None)


# ----------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Starting:
    """An item about to be asked: what a progress line names while it waits for its answer."""

    policy: str
    backbone: str
    item_id: str
    film_id: str


@dataclass
class Progress:
    """What the runner tells its `progress` callback: after each record (`last`), and as each item starts
    (`starting`, `last` None), so a long wait can be followed."""

    done: int  # records in the run directory for this grid
    total: int
    spend: Spend  # this invocation
    last: ResultRecord | None = None
    starting: Starting | None = None


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


def _retire(run_dir: Path, records: list[ResultRecord], changed: set[str], retry_invalid: bool, retired: Spend,
            warnings: list[str]) -> list[ResultRecord]:
    """The records a rerun keeps; those it asks again leave results.jsonl, their spend added to `retired`.
    Transport faults are no answer: always asked again; invalid answers and prompts that did not fit the
    context (a larger context may take them) only when asked to."""
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
    return keep


def _closing(budget: Budget, counts: dict[str, int], total: int, stopped_at: list[str], max_cost_usd: float | None,
             warnings: list[str]) -> str | None:
    """Where a cap stopped the run (None: it did not), and the warnings its counts call for."""
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
    return stopped


def _answer_item(task: Task, answerer: Answerer, fmt: str, digests: dict[str, str], stopped_at: list[str],
                 lock: threading.Lock, calls: CallWriter, policy: str, mb: MeteredBackbone,
                 item: Item) -> ResultRecord | None:
    """One item asked, scored and measured as its record; None when a cap stopped it (`stopped_at` says where).
    Its calls as sent go to the call log first, so a record never names a call that is not there."""
    t0 = time.perf_counter()
    item_spend = mb.begin_item()
    answers: dict[str, AnswerRecord] = {}
    failure: str | None = None
    unreachable = False
    for q in task.queries(item):
        try:
            ans = answerer(item.film_id, q, policy, mb)
            sent = calls.write(record_key(policy, mb.name, item.id), q.key, getattr(ans, "sent", None) or [])
            answers[q.key] = answer_record(ans, sent)
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
    reason: str | None
    if failure is not None:
        scored_correct, detail, reason = None, {}, failure
    else:
        sc = task.score(item, answers)
        scored_correct, detail, reason = sc.correct, jsonable(sc.detail.model_dump(exclude_unset=True)), sc.invalid_reason
    measures: Measures = {}  # written only when measured: a line without them reads as before
    unfit = any(a.reason == CONTEXT for a in answers.values())  # a prompt the model never read
    gold = getattr(item, "evidence", None) or []
    if gold and answers and not unfit:  # nothing was sent: no evidence to measure
        measures["evidence"] = evidence.record_evidence([list(g) for g in gold], answers, scored_correct)
    fault = bool(item_spend.transient) or unreachable
    n_search = evidence.searches(answers)
    if n_search is not None:
        measures["searches"] = n_search
    status: Status = ("transient" if fault else "unfit" if unfit else "invalid") if reason else "answered"
    return ResultRecord(
        log_version=LOG_VERSION, key=record_key(policy, mb.name, item.id), policy=policy, backbone=mb.name,
        item_id=item.id, item_digest=digests[item.id], film_id=item.film_id, format=fmt,
        category=item_category(item), status=status,
        reason=f"transport fault: {reason}" if reason and fault else f"context: {reason}" if unfit else reason,
        correct=None if unfit else scored_correct, detail=detail, answers=answers,
        usage=_usage_sum(answers), grounded=all(a.grounded for a in answers.values()) if answers else False,
        spend=item_spend, wall_s=round(time.perf_counter() - t0, 4),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **measures)


def _drive(one: Callable[[str, MeteredBackbone, Item], ResultRecord | None], todo: list[tuple[str, MeteredBackbone, Item]],
           metered: list[MeteredBackbone], backbones: Sequence[Any], run_dir: Path, concurrency: int, budget: Budget,
           counts: dict[str, int], total: int, progress: Callable[[Progress], None] | None) -> None:
    """Ask `todo` with `concurrency` items in flight, appending each record as it comes; no new item starts once
    a cap is reached, and Ctrl-C or a crash stops the items in flight unrecorded."""
    writer = JsonlWriter(run_dir / RESULTS, _secrets(metered, backbones))
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
                if progress is not None:
                    p, mb, it = nxt
                    progress(Progress(counts["answered"] + counts["invalid"] + counts["unfit"], total, budget.now,
                                      starting=Starting(p, mb.name, it.id, it.film_id)))
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
                writer.write(rec)
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


def _cache_warnings(metered: list[MeteredBackbone]) -> list[str]:
    """What a replay cache found wrong on opening (one model_id answering for two specs)."""
    found = []
    for mb in metered:
        b: Any = mb
        while b is not None:
            if getattr(b, "warning", None):
                found.append(str(b.warning))
            b = getattr(b, "inner", None)
    return found


def _secrets(metered: list[MeteredBackbone], backbones: Sequence[Any]) -> list[str]:
    """What a run file must never hold: the backbones' credentials, and the specs' own URL credentials too (a
    backbone answering elsewhere, on Ray workers, names no secrets here)."""
    return [v for mb in metered for v in mb.secrets()] + [v for b in backbones if isinstance(b, str) for v in url_secrets(b)]


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
    records = _retire(run_dir, records, changed, retry_invalid, retired, warnings)
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
    write_json(manifest_path, header.line())

    spent = Spend()
    spent.add(retired)
    for r in records:
        spent.add(r.spend)
    budget = Budget(max_cost_usd, max_tokens, spent)
    cache_path = Path(cache) if cache is not None else (Path(lib_path) / "cache" if lib_path else None)
    metered = [MeteredBackbone(_load_backbone(b, cache_path, cache_mode), budget, spec)
               for b, spec in zip(backbones, specs)]
    warnings += _cache_warnings(metered)
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

    calls = CallWriter(run_dir, _secrets(metered, backbones))
    one = functools.partial(_answer_item, task, answerer, bench.format, digests, stopped_at, lock, calls)
    try:
        _drive(one, todo, metered, backbones, run_dir, concurrency, budget, counts, total, progress)
    finally:
        calls.close()
    _record_prompts(manifest_path, header, run_dir)

    stopped = _closing(budget, counts, total, stopped_at, max_cost_usd, warnings)
    return BenchResult(run_dir, len(items), total, counts["answered"], counts["invalid"], budget.now, stopped,
                       warnings, round(time.perf_counter() - started, 3), counts["unfit"])


# ----------------------------------------------------------------------------- summaries


def _resolved_settings(spec: str) -> dict[str, Any]:
    """A policy's full settings (defaults with the spec's overrides); the overrides alone for an unknown policy."""
    from ..agents import get_policy

    name, overrides = parse_policy_spec(spec)
    try:
        return cast("dict[str, Any]", jsonable(cast(Any, get_policy(name, **overrides)).settings))
    except MovieMemError:
        return overrides


def _record_provenance(path: Path, header: RunHeader, old: Provenance | None, metered: list[MeteredBackbone],
                       policies: Sequence[str], warnings: list[str], library: Any = None,
                       film_ids: Sequence[str] = ()) -> None:
    """run.json gets what produced the numbers; a rerun whose provenance differs says what changed."""
    from . import provenance

    films = provenance.film_stages(library, list(film_ids)) if library is not None else {}
    prov = provenance.collect({mb.name: mb.inner for mb in metered}, {p: _resolved_settings(p) for p in policies}, films)
    changes = provenance.differences(old, prov)
    if changes:
        warnings.append("provenance differs from the earlier run in this directory: " + "; ".join(changes))
    before: Provenance = old or {}  # configurations of earlier invocations stay described
    prov["backbones"] = {**(before.get("backbones") or {}), **prov["backbones"]}
    prov["policies"] = {**(before.get("policies") or {}), **prov["policies"]}
    prov["changes"] = [*(before.get("changes") or []), *changes]
    header.provenance = prov
    write_json(path, header.line())


def _record_prompts(path: Path, header: RunHeader, run_dir: Path) -> None:
    """The prompt ids and versions each policy's answers sent, read from the records once they are written."""
    from . import provenance

    header.provenance = {**(header.provenance or {}), "prompts": provenance.prompts(iter_log(run_dir))}
    write_json(path, header.line())


def bench_json(result: BenchResult) -> BenchJson:
    """The `moviemem bench --json` object."""
    rows: list[BenchJsonRow] = []
    for s in RunLog(result.run_dir).rows:
        acc = s.get("accuracy")
        rows.append({"policy": s["policy"], "backbone": s["backbone"], "n": s["n"],
                     "accuracy": acc["value"] if acc else None, "ci_low": acc["ci_low"] if acc else None,
                     "ci_high": acc["ci_high"] if acc else None, "median_input_tokens": s["median_input_tokens"]})
    return cast(BenchJson, jsonable({"run_dir": str(result.run_dir), "items": result.items, "answered": result.answered,
            "invalid": result.invalid, "backbone_calls": result.spend.calls, "cache_hits": result.spend.cache_hits,
            "cost_usd": round(result.spend.cost_usd, 6), "stopped": result.stopped, "warnings": result.warnings,
            "wall_s": result.wall_s, "results": rows}))

