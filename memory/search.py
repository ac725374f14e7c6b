"""Search primitives over the library's LanceDB tables: the one module outside the store that
touches LanceDB, its indexes and its event loop.

- Full-text (BM25) search runs on LanceDB's native index, pre-filtered on a BTree index over
  `film_id`; the rankings of several tables run concurrently on LanceDB's own event loop
  (its async API: 2-3x faster than the sync one, whose per-call overhead dominates).
- Vector search is cosine over one film's rows, scored in numpy on int8 codes (vector_pack.py):
  a film holds a few thousand text rows, so they are read once per (film, run) into a
  byte-bounded LRU cache; LanceDB's prefiltered flat scan re-reads them on every query and costs
  10x more in a library of 1,000 films. A process's first query on a film reads the film's
  search packs (files beside its media) rather than LanceDB.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP as _LOOP  # LanceDB's event loop (its sync API runs on it)

from ..config import Settings
from . import vector_pack
from .store import MemoryStore


@dataclass(frozen=True)
class TextTable:
    """Where one kind of text lives: its table, text column, id column and the extra columns a hit carries."""

    table: str
    text: str
    id_col: str
    extra: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return ["film_id", self.id_col, "start", "end", self.text, *self.extra]


# the library's searchable text tables (retrievers/text.py names a kind of evidence for each)
TEXT_TABLES: dict[str, TextTable] = {
    "utterances": TextTable("utterances", "text", "idx"),
    "captions": TextTable("captions", "text", "idx", ("kind",)),
    "onscreen": TextTable("onscreen", "text", "idx"),
    "events": TextTable("events", "description", "event_id"),
    "passages": TextTable("passages", "text", "idx", ("source", "first_row", "last_row")),
}


# ----------------------------------------------------------------------------- indexes

_index_lock = threading.Lock()
_indexed: set[tuple[str, str]] = set()
_dims: dict[tuple[str, str], int | None] = {}


def ensure_indexes(store: MemoryStore, src: TextTable) -> bool:
    """Create (once) the BM25 index on the text column and the BTree index on film_id.
    Rows added later are still found: LanceDB searches unindexed rows by brute force until
    `MemoryStore.optimize()` folds them into the index. False when the table does not exist."""
    from lancedb.index import FTS, BTree

    key = (store.uri, src.table)
    if key in _indexed:
        return True
    tbl = store.table(src.table)
    if tbl is None:
        return False
    with _index_lock:
        if key in _indexed:
            return True
        have = {tuple(i.columns) for i in tbl.list_indices()}
        wanted: list[tuple[tuple[str, ...], Callable[[], Any]]] = [((src.text,), lambda: tbl.create_index(src.text, replace=False, config=FTS(with_position=False, stem=True,
                                                                              remove_stop_words=True))),
                  (("film_id",), lambda: tbl.create_index("film_id", replace=False, config=BTree()))]
        for cols, create in wanted:
            if cols in have:
                continue
            try:
                create()
            except (RuntimeError, ValueError, OSError) as exc:  # another process made it meanwhile
                if "exist" not in str(exc).lower() and "conflict" not in str(exc).lower():
                    raise
        _indexed.add(key)
    return True


def vector_dim(store: MemoryStore, table: str) -> int | None:
    """The table's vector width (fixed when it is created; reading the schema costs ms, so it is kept)."""
    key = (store.uri, table)
    if key not in _dims:
        _dims[key] = store.vector_dim(table)
    return _dims[key]


# ----------------------------------------------------------------------------- full text


async def _bm25(tbl: Any, src: TextTable, where: str, terms: str, n: int) -> list[dict[str, Any]]:
    q = tbl.query().nearest_to_text(terms, columns=src.text).where(where)
    return (await q.select(src.columns + ["_score"]).limit(n).to_arrow()).to_pylist()  # type: ignore[no-any-return]  # LanceDB's async table is untyped here


async def _gather(coros: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*coros))


def bm25_start(store: MemoryStore, searches: Sequence[tuple[TextTable, str]], terms: str, n: int) -> Future[list[Any]]:
    """Start one BM25 ranking per (table, filter) on LanceDB's loop and return at once, so the
    caller can score vectors meanwhile; `.result()` gives one list of rows (with `_score`) per search.
    Tables are opened here: opening one inside a coroutine would wait on LanceDB's loop from that loop."""
    coros = [_bm25(_async_table(store, src.table), src, where, terms, n) for src, where in searches]
    return asyncio.run_coroutine_threadsafe(_gather(coros), _LOOP.loop)


def _async_table(store: MemoryStore, table: str) -> Any:
    tbl: Any = store.table(table)
    return tbl._table  # the async table under LanceDB's sync wrapper: the async API runs the rankings concurrently


# ----------------------------------------------------------------------------- film vectors


@dataclass
class FilmVectors:
    """One film's rows of one table (one finished run), with unit vectors, held in memory.
    The rows are read as an Arrow table and become Python values on the first search."""

    rows: pa.Table
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray | None  # caption kinds
    matrix: np.ndarray  # (n, dim) float32, rows scaled to unit length

    @functools.cached_property
    def nbytes(self) -> int:
        """Roughly what the entry holds: vectors, times, the Arrow rows and ~200 bytes of Python values a row."""
        return int(self.matrix.nbytes + self.start.nbytes + self.end.nbytes + 2 * self.rows.nbytes + 200 * len(self.rows))

    def search(self, vec: np.ndarray, mask: np.ndarray, n: int) -> list[tuple[dict[str, Any], float]]:
        visible = int(mask.sum())
        if not visible or n < 1:
            return []
        # einsum, not BLAS: a threaded gemv this small is 10-30x slower when the cores are busy
        sims = np.einsum("ij,j->i", self.matrix, vec / (np.linalg.norm(vec) or 1.0))
        sims = np.where(mask, sims, -np.inf)
        top = np.argpartition(-sims, min(n, visible) - 1)[: min(n, visible)]
        top = top[np.argsort(-sims[top], kind="stable")]
        cols = self._columns
        return [({name: values[i] for name, values in cols.items()}, float(sims[i])) for i in top]

    @functools.cached_property
    def _columns(self) -> dict[str, list[Any]]:
        """The rows as Python lists, column by column (made on the first search: ~0.1 ms a column)."""
        return {name: self.rows.column(name).to_pylist() for name in self.rows.column_names}


_vec_lock = threading.Lock()
_vec_cache: OrderedDict[tuple[str, str, str], FilmVectors] = OrderedDict()
_vec_bytes = 0


def vector_cache_budget() -> int:
    """Bytes the cache may hold (`MOVIEMEM_VECTOR_CACHE_MB`, 512 by default): bounded by size, not by
    entries, so that a bench cycling over 20 films x 4 kinds still hits (an entry count of 64 did not)."""
    return _budget(os.environ.get("MOVIEMEM_VECTOR_CACHE_MB"))


@functools.lru_cache(maxsize=8)
def _budget(_env: str | None) -> int:
    """Settings() costs ~1 ms (environment and moviemem.toml parsed): read once per value of the variable."""
    return max(0, Settings().vector_cache_mb) * 2**20


def _film_vectors(rows: pa.Table, codes: np.ndarray, src: TextTable) -> FilmVectors:
    kind = rows.column("kind").to_numpy(zero_copy_only=False) if "kind" in src.extra else None
    return FilmVectors(rows, rows.column("start").to_numpy(), rows.column("end").to_numpy(), kind,
                       vector_pack.unit_rows(codes))


async def _read_rows(tbl: Any, src: TextTable, base: str) -> tuple[pa.Table, np.ndarray]:
    """The run's rows from LanceDB and their vectors as int8 codes (what a pack holds)."""
    data = await tbl.query().where(base + " AND vector IS NOT NULL").select(src.columns + ["vector"]).to_arrow()
    vec_col = data.column("vector").combine_chunks()
    dim = vec_col.type.list_size if pa.types.is_fixed_size_list(vec_col.type) else 0
    flat = vec_col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    matrix = flat.reshape(len(data), dim) if len(data) else np.zeros((0, max(dim, 1)), dtype=np.float32)
    return data.drop_columns(["vector"]).combine_chunks(), vector_pack.quantize(matrix)


def film_vectors_many(store: MemoryStore, film_id: str, wanted: Sequence[tuple[TextTable, str]],
                      meanwhile: Callable[[], object] | None = None) -> list[FilmVectors]:
    """The vectors of one film's finished run in each table (`base` names film and run, so a rerun
    stage gets a new entry and the old one ages out), from the process cache, else from the film's
    search packs (vector_pack.py: a millisecond), else from LanceDB, read concurrently on its loop
    alongside any BM25 ranking already started there while `meanwhile()` runs here (the query's
    embedding, say); what LanceDB gave is then packed for the next process. Must not be called
    from LanceDB's loop."""
    keys = [(store.uri, src.table, base) for src, base in wanted]
    found: dict[tuple[str, str, str], FilmVectors] = {}
    with _vec_lock:
        for key in keys:
            hit = _vec_cache.get(key)
            if hit is not None:
                _vec_cache.move_to_end(key)
                found[key] = hit
    missing = [(key, src, base) for key, (src, base) in zip(keys, wanted, strict=True) if key not in found]
    paths = {key: vector_pack.pack_path(store.media_dir(film_id), src.table, base) for key, src, base in missing} \
        if store.is_local else {}
    unpacked = []
    for key, src, base in missing:
        packed = vector_pack.read(paths[key]) if key in paths else None
        if packed is None:
            unpacked.append((key, src, base))
        else:
            found[key] = _film_vectors(*packed, src)
    pending = None
    if unpacked:  # tables are opened here: opening one inside a coroutine would wait on LanceDB's loop from that loop
        coros = [_read_rows(_async_table(store, src.table), src, base) for _, src, base in unpacked]
        pending = asyncio.run_coroutine_threadsafe(_gather(coros), _LOOP.loop)
    if meanwhile is not None:
        meanwhile()
    if pending is not None:
        for (key, src, _), (rows, codes) in zip(unpacked, pending.result(), strict=True):
            found[key] = _film_vectors(rows, codes, src)
            if key in paths:
                vector_pack.write(paths[key], rows, codes)
    if missing:
        budget = vector_cache_budget()  # read on a miss only: a miss costs milliseconds anyway
        global _vec_bytes
        with _vec_lock:
            for key, _, _ in missing:
                fv = found[key]
                if key not in _vec_cache and fv.nbytes <= budget:
                    _vec_cache[key] = fv
                    _vec_bytes += fv.nbytes
            while _vec_bytes > budget and _vec_cache:
                _vec_bytes -= _vec_cache.popitem(last=False)[1].nbytes
    return [found[key] for key in keys]


def write_packs(store: MemoryStore, film_id: str) -> int:
    """The film's search packs for its finished runs of every text table that has none yet (after an
    ingest, so that even the first query on the film reads packs); returns how many were written.
    Leaves the process cache alone. Local libraries only."""
    from .view import FilmMemory

    if not store.is_local:
        return 0
    film = FilmMemory(store, film_id)
    todo = []
    for src in TEXT_TABLES.values():
        base = film.run_filter(src.table) if store.table(src.table) is not None else None
        if base is not None and not (path := vector_pack.pack_path(store.media_dir(film_id), src.table, base)).exists():
            todo.append((src, base, path))
    if todo:
        coros = [_read_rows(_async_table(store, src.table), src, base) for src, base, _ in todo]
        read: list[tuple[pa.Table, np.ndarray]] = _LOOP.run(_gather(coros))  # type: ignore[no-untyped-call]  # LanceDB's loop is unannotated
        for (_, _, path), (rows, codes) in zip(todo, read, strict=True):
            vector_pack.write(path, rows, codes)
    return len(todo)
