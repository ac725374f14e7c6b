"""The run log on disk: the one place that writes and reads a run directory's files (records.py types them).

Run directory layout (plain JSON, readable without moviemem):
- run.json       what was asked: benchmark, format, policies, backbones, library, caps (records.RunHeader)
- items.jsonl    the validated benchmark items (so reports need no other file)
- results.jsonl  one line per (policy, backbone, item): status answered | invalid (with the
                 reason), the score, and every Answer in full (evidence, trace, usage) (records.ResultRecord)

The runner writes through it; the summary, the report, the inspector, compare, judge and filter read
through it, so none of them imports the runner. A line cut short by a kill is dropped on reading (its item
runs again), so nothing is lost or duplicated. Lines are appended under a lock and flushed one by one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..backbones.retry import redact
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text
from ..foundation.urls import redact_urls
from .formats import Item, text_lines, validate_rows
from .records import Config, Grid, JudgementLine, ResultRecord, RunHeader, parse

RESULTS = "results.jsonl"
ITEMS = "items.jsonl"
MANIFEST = "run.json"
LOCK = ".writer.lock"


def jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        to_dict = getattr(obj, "to_dict", None)
        data = to_dict() if callable(to_dict) else {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {k: jsonable(v) for k, v in data.items()}
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and obj != obj:
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def record_key(policy: str, backbone: str, item_id: str) -> str:
    return f"{policy}\t{backbone}\t{item_id}"


def item_digest(item: Item) -> str:
    """An item's content (question, options, answer, film, every key): what its answer was given to."""
    # as items.jsonl holds it (None left out), so an item read back from there has the digest it was answered with
    text = json.dumps(item.model_dump(mode="json", exclude_none=True), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def benchmark_digest(items: Iterable[Item]) -> str:
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps(it.model_dump(mode="json"), sort_keys=True).encode())
    return h.hexdigest()[:16]


def backbone_spec(b: Any) -> str:
    """The name a backbone goes by in records, run.json and reports: never with URL credentials."""
    return redact_urls(b if isinstance(b, str) else str(getattr(b, "name", type(b).__name__)))


def iter_log(run_dir: str | Path) -> Iterator[ResultRecord]:
    """Records of a run directory, one line read at a time, so a caller that keeps only what it needs holds
    no more than that of a large log. A last line cut short by a kill is ignored; a repeated key keeps its
    first record."""
    for _, rec in iter_log_at(run_dir):
        yield rec


def iter_log_at(run_dir: str | Path) -> Iterator[tuple[int, ResultRecord]]:
    """`iter_log`, each record with the byte offset of its line, for `read_at` to read it again alone."""
    path = Path(run_dir) / RESULTS
    if not path.exists():
        return
    seen: set[str] = set()
    offset = 0
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break  # an unterminated last line: written when the process died
            rec = parse(ResultRecord, line, f"{path}: line {lineno}")
            if rec.key not in seen:
                seen.add(rec.key)
                yield offset, rec
            offset += len(line)


def read_at(run_dir: str | Path, offsets: Iterable[int]) -> list[ResultRecord]:
    """The records whose lines start at `offsets` (from `iter_log_at`), read one by one."""
    path = Path(run_dir) / RESULTS
    out = []
    with path.open("rb") as f:
        for offset in offsets:
            f.seek(offset)
            out.append(parse(ResultRecord, f.readline(), f"{path}: byte {offset}"))
    return out


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

    def write(self, rec: ResultRecord | JudgementLine) -> None:
        data = rec.line() if isinstance(rec, ResultRecord) else rec
        line = self.redact(json.dumps(data, ensure_ascii=False, allow_nan=False)) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, redact(json.dumps(obj, ensure_ascii=False, indent=1, default=str)) + "\n")


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


def lean(rec: ResultRecord) -> ResultRecord:
    """A record without what only the inspector shows: each answer's evidence spans and its trace steps other
    than parses (`fallback_parsed` reads those). The record's evidence scores stay. Most of a log's bytes, so
    summaries of a large run hold little; never written back."""
    for a in rec.answers.values():
        a.evidence = []
        a.trace = [s for s in a.trace if s.kind == "parse"]
    return rec


def log_grid(run_dir: str | Path, unfit: bool = False, slim: bool = False) -> tuple[list[Item], Grid]:
    """Items (validated again) and the records of each (policy, backbone), in item order. Records of prompts
    that did not fit the context are left out (never scored, never paired) unless `unfit` asks for them.
    The log is read a line at a time; `slim` keeps each record `lean`."""
    return _read_grid(run_dir, unfit, slim, None)


def log_grid_at(run_dir: str | Path, unfit: bool = False,
                slim: bool = False) -> tuple[list[Item], Grid, dict[str, dict[Config, int]]]:
    """`log_grid`, and where each of its records starts in the log (item id -> configuration -> byte offset), for
    `read_at` to read a record again in full after a `slim` read: the log is read once for both."""
    offsets: dict[str, dict[Config, int]] = {}
    items, grid = _read_grid(run_dir, unfit, slim, offsets)
    return items, grid, offsets


def _read_grid(run_dir: str | Path, unfit: bool, slim: bool,
               offsets: dict[str, dict[Config, int]] | None) -> tuple[list[Item], Grid]:
    header = read_header(run_dir)
    rows = read_items(run_dir)
    items = validate_rows(((i + 1, r) for i, r in enumerate(rows)), header.format, str(Path(run_dir) / ITEMS))
    by_key: dict[Config, dict[str, ResultRecord]] = {}
    for offset, r in iter_log_at(run_dir):
        if r.status == "transient" or (r.status == "unfit" and not unfit):
            continue  # no answer to score: the configuration shows as incomplete until a rerun asks again
        if offsets is not None:
            offsets.setdefault(r.item_id, {})[r.config] = offset
        by_key.setdefault(r.config, {})[r.item_id] = lean(r) if slim else r
    order = {it.id: i for i, it in enumerate(items)}
    out = {k: sorted((r for iid, r in v.items() if iid in order), key=lambda r: order[r.item_id])
           for k, v in by_key.items()}
    return items, out


def scored_log(run_dir: str | Path, slim: bool = False) -> tuple[list[Item], Grid, dict[Config, int]]:
    """`log_grid` read once, split: the records that can be scored (every configuration a key, even one
    whose every prompt was too long), and per configuration the items whose prompt did not fit the context."""
    items, grid = log_grid(run_dir, unfit=True, slim=slim)
    unfit = {key: sum(r.status == "unfit" for r in recs) for key, recs in grid.items()}
    return items, {key: [r for r in recs if r.status != "unfit"] for key, recs in grid.items()}, unfit
