"""The run log on disk: the one place that writes and reads a run directory's files (records.py types them).

Run directory layout (plain JSON, readable without moviemem):
- run.json       what was asked: benchmark, format, policies, backbones, library, caps (records.RunHeader)
- items.jsonl    the validated benchmark items (so reports need no other file)
- results.jsonl  one line per (policy, backbone, item): status answered | invalid (with the
                 reason), the score, and every Answer in full (evidence, trace, usage) (records.ResultRecord)
- judge.jsonl    one line per (record, repeat, judge backbone): the judge's scores (records.JudgementLine; judge.py)
- calls/         every model call as sent and as answered: calls.jsonl (records.CallLine, one line a call) and
                 texts.jsonl (the texts they sent, in pieces cut at content-defined line ends, each piece once:
                 a film's transcript is stored once however many questions read it). An answer names its calls
                 (AnswerRecord.call_ids); a run written before them has none, and reads as before.

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
import re
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from filelock import FileLock, Timeout

from ..backbones.retry import redact
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text
from ..foundation.urls import redact_urls
from .formats import Item, text_lines, validate_rows
from .records import (
    CallLine,
    CallOptions,
    Config,
    Grid,
    JudgementLine,
    MessageLine,
    PartLine,
    RecordUsage,
    ReplyLine,
    ResultRecord,
    RunHeader,
    ToolCallLine,
    parse,
)

if TYPE_CHECKING:
    from ..agents.types import SentCall
    from ..backbones.types import Message, ToolCall

RESULTS = "results.jsonl"
ITEMS = "items.jsonl"
MANIFEST = "run.json"
LOCK = ".writer.lock"
JUDGE = "judge.jsonl"
CALLS = "calls"
CALL_LINES = "calls.jsonl"
CALL_TEXTS = "texts.jsonl"
PIECE_MAX = 4096  # characters: a piece of stored text ends at the first content-chosen line end past PIECE_MIN, or here
PIECE_MIN = 256


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

    def write(self, rec: ResultRecord | JudgementLine | Mapping[str, Any]) -> None:
        data = rec.line() if isinstance(rec, ResultRecord) else rec
        line = self.redact(json.dumps(data, ensure_ascii=False, allow_nan=False)) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def read_judgements(run_dir: str | Path) -> list[JudgementLine]:
    """judge.jsonl's lines, as the judge wrote them; a line cut short by a kill ends the read (it is judged again on
    resume), and a line that is not a judgement is a one-line error naming it."""
    out: list[JudgementLine] = []
    for n, obj in enumerate(_read_jsonl_objects(Path(run_dir) / JUDGE, strict=True), 1):
        if not isinstance(obj.get("key"), str) or not isinstance(obj.get("repeat"), int):
            raise MovieMemError(f"{Path(run_dir) / JUDGE}: line {n} is not a judgement; the file was edited or is damaged")
        out.append(cast(JudgementLine, obj))
    return out


def judgement_writer(run_dir: Path, secrets: Iterable[str] = ()) -> JsonlWriter:
    """The writer of judge.jsonl, its torn last line (a kill) cut off first so the next line starts on its own."""
    path = run_dir / JUDGE
    if path.exists():
        _cut_torn_tail(path)
    return JsonlWriter(path, secrets)


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


def log_grid(run_dir: str | Path, unfit: bool = False, slim: bool = False,
             items: list[Item] | None = None) -> tuple[list[Item], Grid]:
    """Items (validated again, unless the caller has them) and the records of each (policy, backbone), in item
    order. Records of prompts that did not fit the context are left out (never scored, never paired) unless
    `unfit` asks for them. The log is read a line at a time; `slim` keeps each record `lean`."""
    return _read_grid(run_dir, unfit, slim, items)


def run_items(run_dir: str | Path) -> list[Item]:
    """A run's items.jsonl validated again as its format's items (an edited file is refused as any input is)."""
    rows = read_items(run_dir)
    return validate_rows(((i + 1, r) for i, r in enumerate(rows)), read_header(run_dir).format,
                         str(Path(run_dir) / ITEMS))


def _read_grid(run_dir: str | Path, unfit: bool, slim: bool, items: list[Item] | None) -> tuple[list[Item], Grid]:
    items = run_items(run_dir) if items is None else items
    by_key: dict[Config, dict[str, ResultRecord]] = {}
    for _, r in iter_log_at(run_dir):
        if r.status == "transient" or (r.status == "unfit" and not unfit):
            continue  # no answer to score: the configuration shows as incomplete until a rerun asks again
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


# ----------------------------------------------------------------------------- calls as sent

_BREAKS = re.compile(r"(?<=\n)|(?<=[.!?] )")  # line ends, and sentence ends inside a long line


def text_pieces(text: str) -> list[str]:
    """`text` cut where its own content says (a line end whose line hashes to 0 mod 8, past PIECE_MIN characters;
    always by PIECE_MAX): two prompts that share a prefix share every piece that ends inside it, so a film's
    transcript, sent before each of its questions, is stored once and each question adds a piece or two."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for part in _BREAKS.split(text):
        while len(part) > PIECE_MAX:  # one long run of text with no break: cut by size alone
            cut = PIECE_MAX - size
            cur.append(part[:cut])
            out.append("".join(cur))
            cur, size, part = [], 0, part[cut:]
        cur.append(part)
        size += len(part)
        if size >= PIECE_MAX or (size >= PIECE_MIN and zlib.crc32(part.encode()) % 8 == 0):
            out.append("".join(cur))
            cur, size = [], 0
    if cur:
        out.append("".join(cur))
    return [p for p in out if p]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _read_jsonl_objects(path: Path, strict: bool = False) -> Iterator[dict[str, Any]]:
    """The JSON objects of an append-only file, a torn last line (a kill) left out. A damaged line is skipped (a
    call log explains answers and never decides one, so it costs that call's text, not the run), or with `strict`
    is a one-line error."""
    for n, _, obj in _jsonl_lines(path):
        if obj is not None:
            yield obj
        elif strict:
            raise MovieMemError(f"{path}: line {n} is not a JSON object; the file was edited or is damaged")


def _jsonl_lines(path: Path) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """Each whole line of an append-only file: its number, its byte offset and its JSON object (None when the
    line is not one); a torn last line (a kill) is left out."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                obj = None
            yield n, offset, obj if isinstance(obj, dict) else None
            offset += len(line)


class CallWriter:
    """Appends an answer's calls to calls/ (texts first, so a call line never names a text that is not there);
    each text piece and each call is written once, across reruns too. Redacted as every run file is."""

    def __init__(self, run_dir: Path, secrets: Iterable[str] = ()):
        folder = run_dir / CALLS
        folder.mkdir(exist_ok=True)
        self._texts_known = {str(o.get("id")) for o in _read_jsonl_objects(folder / CALL_TEXTS)}
        self._calls_known = {str(o.get("id")) for o in _read_jsonl_objects(folder / CALL_LINES)}
        self._texts = JsonlWriter(folder / CALL_TEXTS, secrets)
        self._calls = JsonlWriter(folder / CALL_LINES, secrets)
        self._lock = threading.Lock()

    def _store(self, text: str) -> list[str]:
        ids = []
        for piece in text_pieces(self._texts.redact(text)):
            pid = _digest(piece)
            if pid not in self._texts_known:
                self._texts.write({"id": pid, "text": piece})
                self._texts_known.add(pid)
            ids.append(pid)
        return ids

    def write(self, key: str, query: str, sent: Sequence[SentCall]) -> list[str]:
        """The calls of one answer; their ids, for the answer's record."""
        ids = []
        with self._lock:
            for n, call in enumerate(sent):
                line = self._line(key, query, n, call)
                if line["id"] not in self._calls_known:
                    self._calls.write(line)
                    self._calls_known.add(line["id"])
                ids.append(str(line["id"]))
        return ids

    def _line(self, key: str, query: str, n: int, call: SentCall) -> dict[str, Any]:
        req, rep = call.request, call.reply
        schema = self._store(json.dumps(req.json_schema, sort_keys=True)) if req.json_schema else None
        tools = self._store(json.dumps([jsonable(t) for t in req.tools], sort_keys=True)) if req.tools else None
        line = CallLine(
            id="", key=key, query=query, n=n, prompt=call.prompt, version=call.version,
            messages=[self._message(m) for m in req.messages],
            options=CallOptions(max_tokens=req.max_tokens, temperature=req.temperature, json_schema=schema, tools=tools,
                                tool_choice=req.tool_choice, logprobs=req.logprobs, seed=req.seed,
                                shared_prefix=req.shared_prefix),
            reply=ReplyLine(text=self._texts.redact(rep.text), tool_calls=_tool_calls(rep.tool_calls),
                            finish_reason=rep.finish_reason, invalid=rep.invalid, error=rep.error, model=rep.model,
                            cached=rep.cached, logprobs=rep.logprobs),
            usage=RecordUsage.model_validate(jsonable(rep.usage)))
        data = line.model_dump(mode="json", exclude_defaults=True)
        data["id"] = _digest(json.dumps(data, sort_keys=True))
        return {"id": data.pop("id"), **data}

    def _message(self, m: Message) -> MessageLine:
        from ..backbones.types import Audio, Clip, Image, Text

        parts = []
        for p in m.parts:
            if isinstance(p, Text):
                parts.append(PartLine(text=self._store(p.text)))
            elif isinstance(p, Image):
                parts.append(PartLine(image=_medium_ref(p.path, p.data, p.url, p.mime)))
            elif isinstance(p, Clip):
                parts.append(PartLine(video=f"{p.path} [{p.start:g}-{'end' if p.end is None else f'{p.end:g}'} s]"))
            elif isinstance(p, Audio):
                parts.append(PartLine(audio=_medium_ref(p.path, p.data, None, p.mime)))
        return MessageLine(role=m.role, parts=parts, tool_calls=_tool_calls(m.tool_calls), tool_call_id=m.tool_call_id,
                           name=m.name)

    def close(self) -> None:
        self._texts.close()
        self._calls.close()


def _tool_calls(calls: Iterable[ToolCall]) -> list[ToolCallLine]:
    return [ToolCallLine(name=c.name, arguments=jsonable(c.arguments)) for c in calls]


def _medium_ref(path: Path | None, data: bytes | None, url: str | None, mime: str | None) -> str:
    if path is not None:
        return str(path)
    if url is not None and not url.startswith("data:"):
        return redact_urls(url)
    raw = data if data is not None else (url or "").encode()
    return f"<{mime or 'data'} {len(raw)} bytes sha256:{hashlib.sha256(raw).hexdigest()[:12]}>"


class CallLog:
    """A run's calls as sent, read back: by id, by record key, and each message's text joined from its pieces.
    Only where each line starts is held; a call or a piece is read when asked for (issue 62: a large run's calls
    read whole took several times their files' size)."""

    def __init__(self, run_dir: str | Path):
        folder = Path(run_dir) / CALLS
        self._texts_path, self._calls_path = folder / CALL_TEXTS, folder / CALL_LINES
        self._texts: dict[str, int] = {}
        for at, o in _jsonl_objects_at(self._texts_path):
            if "id" in o:
                self._texts.setdefault(str(o["id"]), at)
        self._calls: dict[str, int] = {}
        for at, o in _jsonl_objects_at(self._calls_path):
            try:
                line = CallLine.model_validate(o)
            except ValueError:
                continue
            self._calls.setdefault(line.id, at)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def of(self, ids: Iterable[str]) -> list[CallLine]:
        known = [self._calls[i] for i in ids if i in self._calls]
        if not known:
            return []
        with self._calls_path.open("rb") as f:
            return [CallLine.model_validate(_object_at(f, at)) for at in known]

    def text(self, ids: Iterable[str] | None) -> str:
        """A text from its pieces; a piece the store lacks (a damaged line) shows as a marked gap."""
        ids = list(ids or ())
        if not any(i in self._texts for i in ids):
            return "".join(f"[missing text {i}]" for i in ids)
        with self._texts_path.open("rb") as f:
            return "".join(str(_object_at(f, self._texts[i]).get("text", "")) if i in self._texts
                           else f"[missing text {i}]" for i in ids)


def _jsonl_objects_at(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`_read_jsonl_objects`, each object with the byte offset of its line (a damaged line skipped)."""
    return ((offset, obj) for _, offset, obj in _jsonl_lines(path) if obj is not None)


def _object_at(f: BinaryIO, offset: int) -> dict[str, Any]:
    """The JSON object on the line at `offset` (one `_jsonl_objects_at` read as an object)."""
    f.seek(offset)
    return cast(dict[str, Any], json.loads(f.readline()))
