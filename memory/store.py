"""The library: one embedded LanceDB database plus a media folder for frame images.

Writes follow one protocol so that a crash at any point loses no finished work and
duplicates nothing: data rows are tagged with the `run_id` of the stage run that made
them; a run becomes visible only when its `stages` row is marked done; anything a
crashed or superseded run left behind is invisible and removed on the next run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, cast, overload

import numpy as np
import pyarrow as pa
from filelock import FileLock
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from ..foundation.errors import MovieMemError
from .schema import ROW_MODELS, FilmRow, Row, StageRow, arrow_schema, check_film_id, to_arrow, vector_columns

FINISHED = ("done", "skipped")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def params_hash(params: dict[str, Any]) -> str:
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def finished(stage_rows: Iterable[StageRow]) -> dict[str, StageRow]:
    """The visible run of each stage among a film's stage rows: its latest finished row."""
    best: dict[str, StageRow] = {}
    for r in stage_rows:
        if r.status in FINISHED and (r.stage not in best or r.finished_at > best[r.stage].finished_at):
            best[r.stage] = r
    return best


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _is_conflict(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "conflict" in text or "commit" in text and "retry" in text


def _reopen(state: Any) -> None:
    """Before a retry: forget the open tables, so the next attempt starts from each table's
    latest version (a conflict against a version this process never saw repeats forever otherwise)."""
    store = state.args[0] if state.args else None
    if isinstance(store, MemoryStore):
        store._tables.clear()


# concurrent writers (other films' ingests, Ray workers) can collide on a table commit
_retry_conflicts = retry(
    retry=retry_if_exception(_is_conflict), stop=stop_after_attempt(8),
    wait=wait_random_exponential(multiplier=0.05, max=2.0), before_sleep=_reopen, reraise=True,
)


class MemoryStore:
    """Tables and media of one library directory (or object-store URI)."""

    def __init__(self, uri: str | Path):
        self.uri = str(uri)
        self.is_local = "://" not in self.uri
        if self.is_local:
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        self._tables: dict[str, Any] = {}
        self._evolved: set[str] = set()  # tables checked for columns added since they were made
        self._state: str | None = None  # the library's fingerprint when the open tables were last refreshed
        self._begun: dict[str, StageRow] = {}  # rows of the runs this process began and has not finished

    @functools.cached_property
    def db(self) -> Any:
        """The LanceDB connection, made on first use: importing LanceDB costs over a second, which
        a command answered from search packs and saved answers (`search`, `films`) never pays."""
        import lancedb

        return lancedb.connect(self.uri)

    # -- paths -------------------------------------------------------------
    @property
    def root(self) -> Path:
        if not self.is_local:
            raise MovieMemError(f"media files need a local library path, not {self.uri}")
        return Path(self.uri)

    def media_dir(self, film_id: str) -> Path:
        return self.root / "media" / check_film_id(film_id)

    def locks_dir(self) -> Path:
        d = self.root / "locks"
        d.mkdir(parents=True, exist_ok=True)
        return d

    # -- tables ------------------------------------------------------------
    def table(self, name: str) -> Any | None:
        if name in self._tables:
            return self._tables[name]
        try:
            tbl = self.db.open_table(name)
        except (ValueError, FileNotFoundError):
            return None
        self._tables[name] = tbl
        return tbl

    def refresh(self, state: str | None = None) -> None:
        """Bring the open tables up to the library's latest writes. LanceDB keeps an open table at
        the version it opened, so a long-lived reader (the MCP server) would otherwise serve a film
        that another process has since deleted or replaced. Local: the tables are opened again when
        the library's fingerprint (catalog.py; `state`, when the caller has just read it) differs
        from the one they were opened under. An object store has no fingerprint: its open tables
        are checked out at their latest version."""
        if not self.is_local:
            for tbl in list(self._tables.values()):
                tbl.checkout_latest()
            return
        from .catalog import fingerprint

        state = state or fingerprint(self.root)
        if state != self._state:
            self._tables.clear()
            self._state = state

    def reopen(self) -> None:
        """Forget the open tables, so the next read sees every commit made before this call. An ingest
        calls it once it holds the film's lock: a table opened before (the pre-lock look at the film)
        stays at that version and would hide a film another process finished meanwhile."""
        self._tables.clear()
        self._state = None

    def _vector_type(self, name: str) -> pa.FixedSizeListType | None:
        """The stored vector column's type (None: no such table, or its rows have no vector)."""
        tbl = self.table(name)
        if tbl is None:
            return None
        for col in vector_columns(ROW_MODELS[name]):
            return cast(pa.FixedSizeListType, tbl.schema.field(col).type)
        return None

    def vector_dim(self, name: str) -> int | None:
        typ = self._vector_type(name)
        return None if typ is None else int(typ.list_size)

    def _ensure(self, name: str, dim: int | None) -> Any:
        tbl = self.table(name) or self._create(name, dim)
        self._add_new_columns(name, tbl)
        existing = self.vector_dim(name)
        if dim is not None and existing is not None and existing != dim:
            raise MovieMemError(
                f"table {name} holds {existing}-d vectors but this model makes {dim}-d ones; "
                "use the same embedding model for the whole library or a new library"
            )
        return tbl

    def _add_new_columns(self, name: str, tbl: Any) -> None:
        """A table made by an older version lacks the columns added to its row model since (all
        with defaults): they are added, empty, before rows that carry them are appended. Readers
        see the model's defaults in the older rows."""
        if name in self._evolved:
            return
        model = ROW_MODELS[name]
        have = set(tbl.schema.names)
        missing = [f for f in arrow_schema(model, self.vector_dim(name) or 1 if vector_columns(model) else None)
                   if f.name not in have]
        if missing:
            tbl.add_columns(pa.schema([f.with_nullable(True) for f in missing]))
        self._evolved.add(name)

    def _create(self, name: str, dim: int | None) -> Any:
        model = ROW_MODELS[name]
        schema = arrow_schema(model, dim if vector_columns(model) else None)
        # Two processes creating one table at once both commit a first version, and LanceDB
        # lands the second as an overwrite that drops the rows appended meanwhile: create
        # under the library's lock, after looking again ("_": no film id's lock file can be named so).
        guard = FileLock(str(self.locks_dir() / "_tables.lock")) if self.is_local else contextlib.nullcontext()
        with guard:
            tbl = self.table(name)
            if tbl is not None:
                return tbl
            try:
                tbl = self.db.create_table(name, schema=schema)
            except (ValueError, OSError) as exc:  # created meanwhile by a process outside this lock
                if "exist" not in str(exc).lower():
                    raise
                tbl = self.db.open_table(name)
        self._tables[name] = tbl
        return tbl

    @_retry_conflicts
    def append(self, rows: Sequence[Row], dim: int | None = None, vectors: np.ndarray | None = None) -> int:
        """Add rows; `vectors`: their vectors as one matrix (see schema.to_arrow), `dim` wide."""
        if not rows:
            return 0
        model = type(rows[0])
        if vector_columns(model) and dim is None:
            dim = self.vector_dim(model.table) or len(next((cast(Any, r).vector for r in rows if getattr(r, "vector", None)), []) or [0])
        tbl = self._ensure(model.table, dim if vector_columns(model) else None)
        typ = self._vector_type(model.table)  # a table made before vectors were float16 keeps float32
        size, value_type = (typ.list_size, typ.value_type) if typ is not None else (dim, None)
        tbl.add(to_arrow(rows, model, size, value_type, vectors))
        return len(rows)

    @_retry_conflicts
    def delete(self, name: str, where: str) -> None:
        tbl = self.table(name)
        if tbl is not None:
            tbl.delete(where)

    def count(self, name: str, where: str | None = None) -> int:
        tbl = self.table(name)
        return 0 if tbl is None else tbl.count_rows(where)

    def _delete_any(self, name: str, where: str) -> None:
        """Delete only where a row matches: every delete commits a table version, a fresh film's
        sweeps match nothing, and piled-up versions slow later writes and reads."""
        if self.count(name, where) > 0:
            self.delete(name, where)

    def query(self, name: str, where: str | None = None, columns: list[str] | None = None) -> pa.Table:
        tbl = self.table(name)
        if tbl is None:
            return arrow_schema(ROW_MODELS[name], 1).empty_table() if vector_columns(ROW_MODELS[name]) else arrow_schema(ROW_MODELS[name]).empty_table()
        q = tbl.search()
        if where:
            q = q.where(where)
        if columns:
            q = q.select(columns)
        return q.limit(None).to_arrow()

    @overload
    def rows(self, name: Literal["stages"], where: str | None = None, columns: list[str] | None = None, *,
             vectors: bool = True) -> list[StageRow]: ...

    @overload
    def rows(self, name: Literal["films"], where: str | None = None, columns: list[str] | None = None, *,
             vectors: bool = True) -> list[FilmRow]: ...

    @overload
    def rows(self, name: str, where: str | None = None, columns: list[str] | None = None, *,
             vectors: bool = True) -> list[Row]: ...

    def rows(self, name: str, where: str | None = None, columns: list[str] | None = None, *,
             vectors: bool = True) -> list[Any]:
        """Rows as models; with `columns`, only those are read, and without `vectors` no vector column is
        (the others take their defaults, None for vectors)."""
        model = ROW_MODELS[name]
        if not vectors:
            skip = set(vector_columns(model))
            columns = [c for c in (columns or list(model.model_fields)) if c not in skip]
        tbl = self.table(name)
        if columns is not None and tbl is not None:  # a table made before a column was added lacks it
            have = set(tbl.schema.names)
            columns = [c for c in columns if c in have]
        return [model.model_validate(r) for r in self.query(name, where, columns).to_pylist()]

    # -- stage runs --------------------------------------------------------
    def stage_rows(self, film_id: str) -> list[StageRow]:
        return self.rows("stages", f"film_id = {sql_str(film_id)}")

    def finished_runs(self, film_id: str) -> dict[str, StageRow]:
        """The visible run of each stage: its latest finished row."""
        return finished(self.stage_rows(film_id))

    def begin_run(self, film_id: str, stage: str, params: dict[str, Any], phash: str, model: str = "",
                  code_version: str = "", resume: bool = False) -> str:
        """Record a running stage; with resume, reuse an unfinished run of the same params."""
        if resume:
            for r in self.stage_rows(film_id):
                if r.stage == stage and r.status == "running" and r.params_hash == phash:
                    return r.run_id
        run_id = uuid.uuid4().hex[:16]
        row = StageRow(film_id=film_id, run_id=run_id, stage=stage, params=json.dumps(params, sort_keys=True, default=str),
                       params_hash=phash, model=model, code_version=code_version, started_at=now())
        self.append([row])
        self._begun[run_id] = row
        return run_id

    def skip_run(self, film_id: str, stage: str, owned: Iterable[str], params: dict[str, Any], phash: str, reason: str,
                 *, code_version: str = "", sweep: bool = True) -> StageRow:
        """Record a skipped run as one finished row (no running row to mark: nothing runs), then drop
        every other run's rows of this stage (`sweep`: False when the film never ran it)."""
        at = now()
        row = StageRow(film_id=film_id, run_id=uuid.uuid4().hex[:16], stage=stage, params=json.dumps(params, sort_keys=True, default=str),
                       params_hash=phash, code_version=code_version, status="skipped", reason=reason, started_at=at,
                       finished_at=at)
        self.append([row])
        if sweep:
            self.sweep(film_id, stage, owned, keep=row.run_id)
        return row

    @_retry_conflicts
    def _mark(self, film_id: str, run_id: str, values: dict[str, Any]) -> None:
        tbl: Any = self.table("stages")
        tbl.update(where=f"film_id = {sql_str(film_id)} AND run_id = {sql_str(run_id)}", values=values)

    def finish_run(self, film_id: str, stage: str, run_id: str, owned: Iterable[str], *, rows: int,
                   status: str = "done", reason: str = "", model: str | None = None, sweep: bool = True) -> StageRow:
        """Make a run visible, then drop every other run's rows of this stage (`sweep`: False when
        the film never ran it before, so there is nothing to drop); returns the finished row."""
        values: dict[str, Any] = {"status": status, "reason": reason, "rows": rows, "finished_at": now()}
        if model is not None:
            values["model"] = model
        self._mark(film_id, run_id, values)
        if sweep:
            self.sweep(film_id, stage, owned, keep=run_id)
        begun = self._begun.pop(run_id, None) or StageRow(film_id=film_id, run_id=run_id, stage=stage)
        return begun.model_copy(update=values)

    def fail_run(self, film_id: str, run_id: str, error: str) -> None:
        self._begun.pop(run_id, None)
        self._mark(film_id, run_id, {"status": "failed", "error": error[:2000], "finished_at": now()})

    def sweep(self, film_id: str, stage: str, owned: Iterable[str], keep: str | None) -> None:
        """Delete rows of `stage`'s tables and stage rows that do not belong to run `keep`."""
        fid = sql_str(film_id)
        other = f" AND run_id != {sql_str(keep)}" if keep else ""
        for name in owned:
            self._delete_any(name, f"film_id = {fid}{other}")
        self._delete_any("stages", f"film_id = {fid} AND stage = {sql_str(stage)}{other}")
        if self.is_local:
            runs_dir = self.media_dir(film_id) / stage
            if runs_dir.is_dir():
                for d in runs_dir.iterdir():
                    if d.name != keep:
                        shutil.rmtree(d, ignore_errors=True)

    # -- films -------------------------------------------------------------
    def film_rows(self) -> list[FilmRow]:
        """Films whose probe run is finished (a film mid-import or mid-probe is not listed).
        Two queries however many films: the visible probe run of every film, then the films rows."""
        probe: dict[str, StageRow] = {}
        for r in self.rows("stages", "stage = 'probe'"):
            if r.status in FINISHED and (r.film_id not in probe or r.finished_at > probe[r.film_id].finished_at):
                probe[r.film_id] = r
        films = self.rows("films")
        out = [f for f in films if f.film_id in probe and probe[f.film_id].run_id == f.run_id]
        return sorted(out, key=lambda f: f.film_id)

    def film_row(self, film_id: str, runs: dict[str, StageRow] | None = None) -> FilmRow | None:
        """The visible films row (`runs`: the film's finished_runs when the caller has them already)."""
        runs = self.finished_runs(film_id) if runs is None else runs
        if "probe" not in runs:
            return None
        rows = self.rows("films", f"film_id = {sql_str(film_id)} AND run_id = {sql_str(runs['probe'].run_id)}")
        return rows[0] if rows else None

    @_retry_conflicts
    def update_film(self, film_id: str, values: dict[str, Any]) -> None:
        """Edit descriptive fields (title, year, meta) of the visible films row in place."""
        run = self.finished_runs(film_id).get("probe")
        if run is None:
            raise MovieMemError(f"film {film_id!r} is not in the library")
        sql = {k: ("NULL" if v is None else sql_str(v) if isinstance(v, str) else repr(v)) for k, v in values.items()}
        films: Any = self.table("films")
        films.update(where=f"film_id = {sql_str(film_id)} AND run_id = {sql_str(run.run_id)}", values_sql=sql)

    def delete_film(self, film_id: str) -> None:
        fid = sql_str(check_film_id(film_id))
        for name in ROW_MODELS:
            if name != "stages":
                self.delete(name, f"film_id = {fid}")
        self.delete("stages", f"film_id = {fid}")
        if self.is_local:
            shutil.rmtree(self.media_dir(film_id), ignore_errors=True)

    def optimize(self, names: Iterable[str] | None = None, keep_versions: dt.timedelta = dt.timedelta(minutes=10)) -> None:
        """Compact the small fragments that many appends leave (keeps reads fast) and drop table
        versions older than `keep_versions` (a reader may still be on a recent one); all tables by default."""
        for name in ROW_MODELS if names is None else names:
            tbl = self.table(name)
            if tbl is not None:
                try:
                    tbl.optimize(cleanup_older_than=keep_versions)
                except Exception:  # noqa: BLE001 - compaction is an optimisation; a conflict just skips it
                    pass
