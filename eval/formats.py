"""Benchmark formats: one pydantic model per task, JSONL readers that name the bad line, and
adapters for the public releases (MF² metadata.csv, MovieCORE json, Movie101 narration files).

Every item has `id` and `film_id`. A benchmark file is JSONL (one item a line) of one format;
`load_benchmark` detects the format from the first item's keys unless told. Users add formats
with `FORMATS.register(name, ItemModel, keys=[...])` and readers for other file layouts with
`ADAPTERS.register(name, reader)` (or `moviemem.register("format" | "adapter", ...)`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agents.types import MAX_TEXT_CHARS  # a question, option, claim or reference
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text
from ..foundation.limits import MAX_BENCHMARK_BYTES, check_size, parse_json, read_capped
from ..foundation.plugins import Registry, first_doc_line
from ..foundation.timefmt import check_time
from ..memory.schema import check_film_id
from .records import BenchmarkMeta

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
RELATION_TYPES = ("before", "after", "overlap", "causal", "precondition", "hierarchical", "coreference", "flashback")
MAX_ERRORS_SHOWN = 5
MAX_OPTIONS = 10  # answer letters A-J: the most any policy's prompt and agents/parsing.py can take



def _film_time(v: float) -> float:
    try:
        return check_time(v, "value")
    except MovieMemError as exc:
        raise ValueError(str(exc)) from None


def _ordered(span: tuple[float, float]) -> tuple[float, float]:
    if span[1] < span[0]:
        raise ValueError(f"span end {span[1]} is before its start {span[0]}")
    return span


NEWLINE = b"\n"
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
FilmTime = Annotated[float, AfterValidator(_film_time)]  # every time an item gives passes check_time, once, here
Span = Annotated[tuple[FilmTime, FilmTime], AfterValidator(_ordered)]


class Item(BaseModel):
    """One benchmark item. Unknown keys are kept (`extra`), so a file round-trips."""

    model_config = ConfigDict(extra="allow", frozen=True)
    format: ClassVar[str] = ""

    id: str = Field(min_length=1)
    film_id: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("film_id")
    @classmethod
    def _film_id(cls, v: str) -> str:
        try:
            return check_film_id(v)
        except MovieMemError as exc:
            raise ValueError(str(exc)) from None


class MCQ(Item):
    """CHNB-style multiple choice: `answer` is the letter of the right option."""

    format: ClassVar[str] = "mcq"
    question: Text
    options: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)]]
    answer: str
    category: str | None = None
    evidence: list[Span] = Field(default_factory=list)

    @field_validator("options")
    @classmethod
    def _options(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError(f"needs at least 2 options, has {len(v)}")
        if len(v) > MAX_OPTIONS:
            raise ValueError(f"has {len(v)} options; policies take at most {MAX_OPTIONS} (A-{LETTERS[MAX_OPTIONS - 1]})")
        for i, opt in enumerate(v):
            if not isinstance(opt, str) or not opt.strip():
                raise ValueError(f"option {LETTERS[i]} is missing or empty")
        return v

    @model_validator(mode="after")
    def _answer(self) -> MCQ:
        letters = LETTERS[: len(self.options)]
        if not (isinstance(self.answer, str) and len(self.answer) == 1 and self.answer in letters):
            raise ValueError(f"bad answer letter {self.answer!r}: use one of {', '.join(letters)}")
        return self


class ClaimPair(Item):
    """MF²: a true claim and a minimally different false one, judged one at a time."""

    format: ClassVar[str] = "claims"
    true_claim: Text
    false_claim: Text
    category: str | None = None
    granularity: str | None = None  # MF²: Single (one moment), Multi (several), Global (the whole film)
    evidence: list[Span] = Field(default_factory=list)


class Relation(Item):
    """NEST: the relation between two events. `flashback` marks items of the flashback subset
    (by default: label == 'flashback')."""

    format: ClassVar[str] = "relations"
    event_a: str = Field(min_length=1)
    event_b: str = Field(min_length=1)
    label: str
    flashback: bool | None = None

    @field_validator("label")
    @classmethod
    def _label(cls, v: str) -> str:
        if v not in RELATION_TYPES:
            raise ValueError(f"bad relation label {v!r}: use one of {', '.join(RELATION_TYPES)}")
        return v

    @property
    def category(self) -> str | None:
        return self.label

    @property
    def in_flashback_subset(self) -> bool:
        return self.flashback if self.flashback is not None else self.label == "flashback"


class Localization(Item):
    """Where an event happens: the gold scene span [start, end] (seconds); `scene` its index."""

    format: ClassVar[str] = "localization"
    event: Text
    start: FilmTime
    end: FilmTime
    scene: int | None = None
    category: str | None = None

    @model_validator(mode="after")
    def _span(self) -> Localization:
        if self.end <= self.start:
            raise ValueError(f"scene end {self.end} is not after its start {self.start}")
        return self


class OpenQuestion(Item):
    """MovieCORE-style open question with a reference answer (judged)."""

    format: ClassVar[str] = "open"
    question: Text
    reference: Text
    category: str | None = None


class Narration(Item):
    """Movie101v2-style clip narration: describe [start, end]; judged against `reference`."""

    format: ClassVar[str] = "narration"
    start: FilmTime
    end: FilmTime
    reference: Text
    characters: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _span(self) -> Narration:
        if self.end <= self.start:
            raise ValueError(f"clip end {self.end} is not after its start {self.start}")
        return self


# ----------------------------------------------------------------------------- registries


@dataclass(frozen=True)
class FormatSpec:
    name: str
    model: type[Item]
    keys: frozenset[str]  # keys whose presence identifies the format
    description: str = ""


Adapter = Callable[..., list[Item]]
def _format(name: str, model: type[Item], meta: dict[str, Any]) -> tuple[FormatSpec, dict[str, Any]]:
    """`name` becomes a JSONL format whose lines validate against `model`; `keys` identify its lines."""
    if not (isinstance(model, type) and issubclass(model, Item)):
        raise MovieMemError(f"format {name!r}: the target must be a subclass of moviemem.eval.formats.Item")
    if set(meta) - {"keys", "description"} or not meta.get("keys"):
        raise MovieMemError(f"format {name!r} takes keys=[...] (the keys that identify its lines) and an optional description")
    return FormatSpec(name, model, frozenset(meta["keys"]), meta.get("description") or first_doc_line(model)), {}


def _adapter(name: str, reader: Adapter, meta: dict[str, Any]) -> tuple[Adapter, dict[str, Any]]:
    """`name` becomes a reader `reader(path, **options) -> list[Item]` for a non-JSONL layout."""
    if set(meta) - {"description"} or not callable(reader):
        raise MovieMemError(f"adapter {name!r}: the target must be a callable reader; the one option is description")
    return reader, {"description": meta.get("description") or first_doc_line(reader)}


FORMATS: Registry[FormatSpec] = Registry("format", "moviemem.formats", check=_format)  # entry points name a FormatSpec
ADAPTERS: Registry[Adapter] = Registry("adapter", "moviemem.adapters", check=_adapter)  # entry points name a reader


def item_category(item: Item) -> str | None:
    """The category used for per-category tables (the relation label for relations)."""
    value = getattr(item, "category", None)
    return None if value is None else str(value)


def formats() -> dict[str, FormatSpec]:
    """Every format that loads (built-in, registered, or from the `moviemem.formats` entry points)."""
    return {name: spec for name, spec in FORMATS.load_all().items() if isinstance(spec, FormatSpec)}


def adapters() -> dict[str, str]:
    return {name: ADAPTERS.entry(name).meta.get("description", "") for name in ADAPTERS.names()}


FORMATS.register("mcq", MCQ, keys=["question", "options", "answer"])
FORMATS.register("claims", ClaimPair, keys=["true_claim", "false_claim"])
FORMATS.register("relations", Relation, keys=["event_a", "event_b", "label"])
FORMATS.register("localization", Localization, keys=["event", "start", "end"])
FORMATS.register("open", OpenQuestion, keys=["question", "reference"])
FORMATS.register("narration", Narration, keys=["start", "end", "reference"])


# ----------------------------------------------------------------------------- loading


@dataclass
class Benchmark:
    """Validated items of one format, with where they came from."""

    format: str
    items: list[Item]
    path: str = ""
    source: str = ""  # "jsonl" or the adapter's name
    meta: BenchmarkMeta = field(default_factory=lambda: BenchmarkMeta())  # what was done to it after loading

    def __len__(self) -> int:
        return len(self.items)

    def film_ids(self) -> list[str]:
        return sorted({it.film_id for it in self.items})


class _Errors:
    """Collects per-line problems and raises them together (in line order) as one MovieMemError."""

    def __init__(self, path: str):
        self.path = path
        self.found: list[tuple[int | str, str]] = []

    def add(self, where: int | str, msg: str) -> None:
        self.found.append((where, msg))

    def raise_if_any(self) -> None:
        if not self.found:
            return
        ordered = sorted(self.found, key=lambda wm: (0, wm[0], "") if isinstance(wm[0], int) else (1, 0, str(wm[0])))
        lines = [f"{self.path}:{w}: {m}" for w, m in ordered]
        shown = lines[:MAX_ERRORS_SHOWN]
        more = len(lines) - len(shown)
        raise MovieMemError("\n".join(shown + ([f"... and {more} more"] if more else [])))


def _pydantic_msg(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        if e["type"] == "missing":
            msg = f"missing field {loc!r}"
        elif loc and loc not in msg:
            msg = f"{loc}: {msg}"
        parts.append(msg)
    return "; ".join(parts)


def detect_format(row: dict[str, Any]) -> str:
    """The registered format whose identifying keys the row has (the most specific wins)."""
    if isinstance(row.get("format"), str) and row["format"] in FORMATS:
        return str(row["format"])
    matches = [s for s in formats().values() if s.keys <= row.keys()]
    if not matches:
        raise MovieMemError(f"cannot tell the format from keys {sorted(row)}; pass --format "
                            f"({', '.join(FORMATS)})")
    return max(matches, key=lambda s: len(s.keys)).name


def validate_rows(rows: Iterable[tuple[int | str, dict[str, Any]]], fmt: str, path: str,
                  library: Any = None, errors: _Errors | None = None) -> list[Item]:
    """Items from (line, row) pairs; every problem names its line. `library` (anything with
    `__contains__(film_id)`) makes a film id it lacks an error. Problems already found while
    reading the file come in `errors` and are reported together with these."""
    model = FORMATS.get(fmt).model
    errors = errors or _Errors(path)
    items: list[Item] = []
    seen: dict[str, int | str] = {}
    known: dict[str, bool] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            errors.add(where, f"expected a JSON object, got {type(row).__name__}")
            continue
        try:
            item = model.model_validate(row)
        except ValidationError as exc:
            errors.add(where, _pydantic_msg(exc))
            continue
        if item.id in seen:
            errors.add(where, f"duplicate id {item.id!r} (first on line {seen[item.id]})")
            continue
        seen[item.id] = where
        if library is not None:
            if item.film_id not in known:
                known[item.film_id] = item.film_id in library
            if not known[item.film_id]:
                errors.add(where, f"film {item.film_id!r} is not in the library")
                continue
        items.append(item)
    errors.raise_if_any()
    if not items:
        raise MovieMemError(f"{path}: no items")
    return items


def text_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) for each non-blank line, split on "\n" only: JSON strings may hold
    U+2028 and other characters that `str.splitlines` would take for line ends."""
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if line.strip():
            yield n, line


def read_benchmark_text(path: Path) -> str:
    """A benchmark file's text: at most MAX_BENCHMARK_BYTES (checked before reading), UTF-8 (a BOM allowed)."""
    data = read_capped(path, MAX_BENCHMARK_BYTES, "benchmark file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MovieMemError(f"{path}: line {data[:exc.start].count(NEWLINE) + 1} is not UTF-8 text") from None


def _jsonl_rows(path: Path, errors: _Errors) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in text_lines(read_benchmark_text(path)):
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as exc:
            errors.add(n, f"invalid JSON ({exc.msg} at column {exc.colno})")
        except ValueError as exc:  # an integer of more digits than int() reads
            errors.add(n, f"invalid JSON ({exc})")
        except RecursionError:
            errors.add(n, "invalid JSON (nested too deep to read)")


def read_jsonl(path: str | Path, fmt: str | None = None, library: Any = None) -> Benchmark:
    path = Path(path)
    errors = _Errors(str(path))
    rows = list(_jsonl_rows(path, errors))
    if not rows:
        errors.raise_if_any()
        raise MovieMemError(f"{path}: no items")
    first = next((row for _, row in rows if isinstance(row, dict)), None)
    if not fmt:
        if first is None:
            raise MovieMemError(f"{path}: no line is a JSON object; a benchmark has one item object a line")
        fmt = detect_format(first)
    return Benchmark(fmt, validate_rows(rows, fmt, str(path), library, errors), str(path), "jsonl")


def load_benchmark(path: str | Path, fmt: str | None = None, library: Any = None, **options: Any) -> Benchmark:
    """A benchmark from a JSONL file of a registered format, or through an adapter
    (`fmt` = mf2, moviecore, movie101 or a registered one; guessed from the file name if None)."""
    path = Path(path)
    if not path.exists():
        raise MovieMemError(f"{path} does not exist")
    if path.is_file():  # an adapter of a plug-in reads the file itself: its size is checked here first
        check_size(path, MAX_BENCHMARK_BYTES, "benchmark file")
    if fmt is None:
        if path.suffix == ".csv":
            fmt = "mf2"
        elif path.suffix == ".json":
            fmt = "moviecore"
        elif (path.is_dir() and (path / "narration").is_dir()) or path.suffix == ".txt":
            fmt = "movie101"
    if fmt is not None and fmt in ADAPTERS:
        items = ADAPTERS.get(fmt)(path, library=library, **options)
        return Benchmark(items[0].format, items, str(path), fmt)
    if options:
        raise MovieMemError(f"options {sorted(options)} apply to adapters only, not to format {fmt!r}")
    if path.is_dir():
        raise MovieMemError(f"{path} is a directory; give a JSONL file or --format movie101")
    return read_jsonl(path, fmt, library)


def write_jsonl(items: Iterable[Item], path: str | Path) -> Path:
    """Write items as JSONL (written to a temporary name, then moved into place)."""
    return atomic_write_text(path, "".join(json.dumps(it.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n"
                                           for it in items))


# ----------------------------------------------------------------------------- adapters

# MF² metadata.csv: one row per claim pair. The release's column names vary between
# versions, so each field is looked up under the names it is known by.
_MF2_COLUMNS = {
    "film": ("film_id", "movie_id", "movie", "id", "video_id"),
    "true": ("true_claim", "claim_true", "fact", "true", "true claim"),
    "false": ("false_claim", "claim_false", "fib", "false", "false claim"),
    "pair": ("pair_id", "claim_id", "qid", "question_id"),
    "category": ("category", "type", "claim_type", "level"),
    "granularity": ("granularity",),
}


def _column(header: list[str], field_name: str) -> str | None:
    lower = {h.strip().lower(): h for h in header}
    return next((lower[c] for c in _MF2_COLUMNS[field_name] if c in lower), None)


def read_mf2(path: Path, *, library: Any = None, film_prefix: str = "mf2-", **_: Any) -> list[Item]:
    """MF² metadata.csv: claim pairs; film ids as the MF² importer makes them (mf2-N)."""
    errors = _Errors(str(path))
    try:
        reader = csv.DictReader(io.StringIO(read_benchmark_text(path), newline=""))
        header = list(reader.fieldnames or [])
        rows = list(reader)
    except csv.Error as exc:  # a field over csv.field_size_limit() (131,072 characters), a NUL
        raise MovieMemError(f"{path} is not a readable CSV: {exc}") from None
    cols = {k: _column(header, k) for k in _MF2_COLUMNS}
    missing = [k for k in ("film", "true", "false") if cols[k] is None]
    if missing:
        names = {"film": "film id", "true": "true claim", "false": "false claim"}
        raise MovieMemError(f"{path}: no {', '.join(names[m] for m in missing)} column in header {header}; "
                            f"known names: " + "; ".join(f"{names[m]}: {', '.join(_MF2_COLUMNS[m])}" for m in missing))
    out: list[tuple[int, dict[str, str]]] = []  # CSV cells: strings
    per_film: dict[str, int] = {}
    for n, r in enumerate(rows, 2):  # line 1 is the header
        raw_film = (r.get(cols["film"]) or "").strip()
        if not raw_film:
            errors.add(n, "empty film id")
            continue
        fid = f"{film_prefix}{raw_film}".lower()
        per_film[fid] = per_film.get(fid, 0) + 1
        pair = (r.get(cols["pair"]) or "").strip() if cols["pair"] else ""
        row = {"id": f"{fid}-{pair or per_film[fid]}", "film_id": fid,
               "true_claim": (r.get(cols["true"]) or "").strip(), "false_claim": (r.get(cols["false"]) or "").strip()}
        for key in ("category", "granularity"):
            if cols[key] and (r.get(cols[key]) or "").strip():
                row[key] = r[cols[key]].strip()
        out.append((n, row))
    errors.raise_if_any()
    return validate_rows(out, "claims", str(path), library)


def read_moviecore(path: Path, *, library: Any = None, film_prefix: str = "", **_: Any) -> list[Item]:
    """MovieCORE annotations: {"video.mp4": [{question, answer, classification}, ...]}; the film
    id is the slug of the video name (with an optional prefix)."""
    data = parse_json(read_benchmark_text(path), str(path))
    if not isinstance(data, dict) or not data or not all(
            isinstance(qas, list) and any(isinstance(qa, dict) and "question" in qa for qa in qas) for qas in data.values()):
        raise MovieMemError(f"{path} is not a MovieCORE annotation file (an object mapping video names to lists of "
                            f"{{question, answer}}); for another benchmark pass --format ({', '.join([*FORMATS, *ADAPTERS])})")
    rows: list[tuple[int | str, dict[str, Any]]] = []
    for video, qas in data.items():
        fid = film_prefix + re.sub(r"[^a-z0-9_-]+", "-", Path(video).stem.lower()).strip("-")
        if not isinstance(qas, list):
            rows.append((f"{video}", qas))
            continue
        for i, qa in enumerate(qas):
            where = f"{video}[{i}]"
            if not isinstance(qa, dict):
                rows.append((where, qa))
                continue
            ref = qa.get("answer")
            if "enhanced_answer" in qa and isinstance(qa["enhanced_answer"], list) and qa["enhanced_answer"]:
                ref = qa["enhanced_answer"][-1].get("content", ref)
            row = {"id": f"{fid}-{i + 1:03d}", "film_id": fid, "question": qa.get("question"), "reference": ref}
            if qa.get("classification"):
                row["category"] = str(qa["classification"])
            rows.append((where, {k: v for k, v in row.items() if v is not None}))
    return validate_rows(rows, "open", str(path), library)


_TIME = re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*$")
_NAME = re.compile(r"\[([^\]]+)\]")


def _hms(text: str) -> float | None:
    m = _TIME.match(text)
    try:
        return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None
    except (ValueError, OverflowError):  # an hour of more digits than int() reads
        return None


def read_movie101(path: Path, *, library: Any = None, film_prefix: str = "movie101-", **_: Any) -> list[Item]:
    """Movie101v2 narration files (`h:m:s|h:m:s|text`, characters in [Name] tags): one item per
    line; a directory means every narration/*.txt in it. Film ids as the importer makes them."""
    files = sorted((path / "narration").glob("*.txt") if path.is_dir() else [path])
    if not files:
        raise MovieMemError(f"{path}: no narration .txt files")
    items: list[Item] = []
    for txt in files:
        fid = f"{film_prefix}{txt.stem}".lower()
        errors = _Errors(str(txt))
        rows: list[tuple[int | str, dict[str, Any]]] = []
        for n, line in text_lines(read_benchmark_text(txt)):
            parts = line.split("|", 2)
            if len(parts) != 3:
                errors.add(n, "expected h:m:s|h:m:s|text")
                continue
            start, end = _hms(parts[0]), _hms(parts[1])
            if start is None or end is None:
                errors.add(n, f"bad time {parts[0] if start is None else parts[1]!r}; expected h:m:s")
                continue
            text = parts[2].strip()
            names = list(dict.fromkeys(_NAME.findall(text)))
            rows.append((n, {"id": f"{fid}-{n:04d}", "film_id": fid, "start": start, "end": end,
                             "reference": _NAME.sub(r"\1", text), "characters": names}))
        errors.raise_if_any()
        items += validate_rows(rows, "narration", str(txt), library)
    return items


ADAPTERS.register("mf2", read_mf2, description="MF² metadata.csv (claim pairs)")
ADAPTERS.register("moviecore", read_moviecore, description="MovieCORE annotation json (open questions)")
ADAPTERS.register("movie101", read_movie101, description="Movie101v2 narration files (clip narration)")


FormatName = Literal["mcq", "claims", "relations", "localization", "open", "narration"]
