"""Search primitives over one film's rows of the library's LanceDB tables: the one module outside
the store that touches LanceDB's tables, indexes and event loop for searching.

A film holds a few thousand text rows, so a search reads the film's rows of a finished run once
(from its search packs, files beside its media, or else from LanceDB, pre-filtered on a BTree index
over `film_id`) into a byte-bounded LRU cache, and ranks them here in numpy:
- vectors: cosine on int8 codes (vector_pack.py); LanceDB's prefiltered flat scan re-reads the rows
  on every query and costs 10x more in a library of 1,000 films;
- words: BM25 over the film's own rows (bm25.py): the same analysis and scores as LanceDB's
  full-text index, but with the film's own statistics, so that a film ranks the same in any library.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..foundation.config import Settings
from . import vector_pack
from .bm25 import Bm25Index
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


def ensure_indexes(store: MemoryStore, src: TextTable) -> bool:
    """Create (once) the BTree index on film_id that reading one film's rows is pre-filtered on.
    False when the table does not exist. (Libraries made before moviemem ranked words in process
    also hold a LanceDB full-text index on the text column; nothing reads it now.)"""
    from lancedb.index import BTree

    key = (store.uri, src.table)
    if key in _indexed:
        return True
    tbl = store.table(src.table)
    if tbl is None:
        return False
    with _index_lock:
        if key in _indexed:
            return True
        if ("film_id",) not in {tuple(i.columns) for i in tbl.list_indices()}:
            try:
                tbl.create_index("film_id", replace=False, config=BTree())
            except (RuntimeError, ValueError, OSError) as exc:  # another process made it meanwhile
                if "exist" not in str(exc).lower() and "conflict" not in str(exc).lower():
                    raise
        _indexed.add(key)
    return True


def _loop() -> Any:
    """LanceDB's event loop (its sync API runs on it), imported only when LanceDB is read."""
    from lancedb.background_loop import LOOP

    return LOOP


async def _gather(coros: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*coros))


def _async_table(store: MemoryStore, table: str) -> Any:
    tbl: Any = store.table(table)
    return tbl._table  # the async table under LanceDB's sync wrapper: the async API runs the rankings concurrently


# ----------------------------------------------------------------------------- film vectors


# ----------------------------------------------------------------------------- a film's rows


@dataclass
class FilmRows:
    """One film's rows of one table (one finished run) held in memory, with what ranks them: unit
    vectors (zero for a row that has none) and, made on the first word search, a BM25 index over
    the text. The rows are read as an Arrow table and become Python values on the first search."""

    rows: pa.Table
    text: str  # the text column
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray | None  # caption kinds
    matrix: np.ndarray  # (n, dim) float32, rows scaled to unit length

    @functools.cached_property
    def nbytes(self) -> int:
        """Roughly what the entry holds: vectors, times, the Arrow rows, ~200 bytes of Python values
        a row and the word index (whose size is counted as if made: it is made on the first search)."""
        return int(self.matrix.nbytes + self.start.nbytes + self.end.nbytes + 2 * self.rows.nbytes + 300 * len(self.rows))

    @functools.cached_property
    def has_vector(self) -> np.ndarray:
        return np.asarray(np.einsum("ij,ij->i", self.matrix, self.matrix) > 0)

    @functools.cached_property
    def words(self) -> Bm25Index:
        """The BM25 index (2-4 ms for a film's 1,500 lines; once per film and run in a process)."""
        return Bm25Index(self.rows.column(self.text).to_pylist())

    def search(self, vec: np.ndarray, mask: np.ndarray, n: int) -> list[tuple[dict[str, Any], float]]:
        """The n rows nearest to `vec` by cosine among those `mask` shows."""
        mask = mask & self.has_vector
        visible = int(mask.sum())
        if not visible or n < 1:
            return []
        # einsum, not BLAS: a threaded gemv this small is 10-30x slower when the cores are busy
        sims = np.einsum("ij,j->i", self.matrix, vec / (np.linalg.norm(vec) or 1.0))
        sims = np.where(mask, sims, -np.inf)
        top = np.argpartition(-sims, min(n, visible) - 1)[: min(n, visible)]
        top = top[np.argsort(-sims[top], kind="stable")]
        return self._hits([(int(i), float(sims[i])) for i in top])

    def search_words(self, query: str, mask: np.ndarray, n: int) -> list[tuple[dict[str, Any], float]]:
        """The n best rows by BM25 among those `mask` shows that hold a word of the query."""
        return self._hits(self.words.top(query, mask, n))

    def _hits(self, ranked: list[tuple[int, float]]) -> list[tuple[dict[str, Any], float]]:
        cols = self._columns
        return [({name: values[i] for name, values in cols.items()}, score) for i, score in ranked]

    @functools.cached_property
    def _columns(self) -> dict[str, list[Any]]:
        """The rows as Python lists, column by column (made on the first search: ~0.1 ms a column)."""
        return {name: self.rows.column(name).to_pylist() for name in self.rows.column_names}


_vec_lock = threading.Lock()
_vec_cache: OrderedDict[tuple[str, str, str], FilmRows] = OrderedDict()
_vec_bytes = 0


def vector_cache_budget() -> int:
    """Bytes the cache may hold (`MOVIEMEM_VECTOR_CACHE_MB`, 512 by default): bounded by size, not by
    entries, so that a bench cycling over 20 films x 4 kinds still hits (an entry count of 64 did not)."""
    return _budget(os.environ.get("MOVIEMEM_VECTOR_CACHE_MB"))


@functools.lru_cache(maxsize=8)
def _budget(_env: str | None) -> int:
    """Settings() costs ~1 ms (environment and moviemem.toml parsed): read once per value of the variable."""
    return Settings().vector_cache_mb * 2**20


def _seconds(rows: pa.Table, name: str) -> np.ndarray:
    """A time column as float64 numpy (times are never null: schema.py)."""
    return vector_pack.buffer_view(rows.column(name).combine_chunks().cast(pa.float64()), np.float64)


def _film_rows(rows: pa.Table, codes: np.ndarray, src: TextTable) -> FilmRows:
    kind = np.array(rows.column("kind").to_pylist(), dtype=object) if "kind" in src.extra else None
    return FilmRows(rows, src.text, _seconds(rows, "start"), _seconds(rows, "end"), kind, vector_pack.unit_rows(codes))


async def _read_rows(tbl: Any, src: TextTable, base: str) -> tuple[pa.Table, np.ndarray]:
    """The run's rows from LanceDB and their vectors as int8 codes (what a pack holds; zero for a
    row without a vector, which word search still finds)."""
    data = await tbl.query().where(base).select(src.columns + ["vector"]).to_arrow()
    vec_col = data.column("vector").combine_chunks()
    dim = vec_col.type.list_size if pa.types.is_fixed_size_list(vec_col.type) else 1
    if vec_col.null_count:
        vec_col = vec_col.fill_null(pa.scalar([0.0] * dim, type=vec_col.type))
    flat = vec_col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    matrix = flat.reshape(len(data), dim) if len(data) else np.zeros((0, dim), dtype=np.float32)
    return data.drop_columns(["vector"]).combine_chunks(), vector_pack.quantize(matrix)


def film_rows_many(store: MemoryStore, film_id: str, wanted: Sequence[tuple[TextTable, str]],
                   meanwhile: Callable[[], object] | None = None) -> list[FilmRows]:
    """The rows of one film's finished run in each table (`base` names film and run, so a rerun
    stage gets a new entry and the old one ages out), from the process cache, else from the film's
    search packs (vector_pack.py: a millisecond), else from LanceDB, read concurrently on its loop
    while `meanwhile()` runs here (the query's embedding, say); what LanceDB gave is then packed
    for the next process. Must not be called from LanceDB's loop."""
    keys = [(store.uri, src.table, base) for src, base in wanted]
    found: dict[tuple[str, str, str], FilmRows] = {}
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
        packed = vector_pack.read(paths[key], src.columns) if key in paths else None
        if packed is not None:
            found[key] = _film_rows(*packed, src)
        elif ensure_indexes(store, src):
            unpacked.append((key, src, base))
        else:  # the stage finished without ever making the table (no film wrote such rows yet)
            found[key] = _film_rows(pa.table({c: pa.array([], type=pa.float64() if c in ("start", "end") else pa.string())
                                               for c in src.columns}), np.zeros((0, 1), dtype=np.int8), src)
    pending = None
    if unpacked:  # tables are opened here: opening one inside a coroutine would wait on LanceDB's loop from that loop
        coros = [_read_rows(_async_table(store, src.table), src, base) for _, src, base in unpacked]
        pending = asyncio.run_coroutine_threadsafe(_gather(coros), _loop().loop)
    if meanwhile is not None:
        meanwhile()
    if pending is not None:
        for (key, src, _), (rows, codes) in zip(unpacked, pending.result(), strict=True):
            found[key] = _film_rows(rows, codes, src)
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
        read: list[tuple[pa.Table, np.ndarray]] = _loop().run(_gather(coros))
        for (_, _, path), (rows, codes) in zip(todo, read, strict=True):
            vector_pack.write(path, rows, codes)
    return len(todo)
