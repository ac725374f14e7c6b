"""Text retrieval over utterances, captions, on-screen text and events, inside LanceDB.

All films share one table per kind. The full-text query uses LanceDB's native BM25 index,
pre-filtered by the film's visibility filter (film, finished run, window or until-cutoff) on a
BTree index over `film_id`. Vector search is exact cosine over the film's own rows: a film holds
a few thousand text rows (about 3 MB of vectors), so they are read once per (film, run) into an
LRU cache and scored in numpy; LanceDB's prefiltered flat scan re-reads them on every query and
costs 10x more in a library of 1,000 films. Hybrid search fuses the vector and the full-text
rankings of every kind with reciprocal-rank fusion (Cormack et al., SIGIR 2009).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP as _LOOP  # LanceDB's event loop (its sync API runs on it)

from ..errors import MovieMemError
from ..memory.store import MemoryStore, sql_str
from ..memory.view import FilmMemory
from .base import Evidence, Retriever, visible_filter

Mode = Literal["vector", "fts", "hybrid"]
RRF_K = 60  # the constant of reciprocal-rank fusion


@dataclass(frozen=True)
class Source:
    """Where one kind of text lives: table, text column, id column, owning stage."""

    kind: str
    table: str
    text: str
    id_col: str
    stage: str


SOURCES: dict[str, Source] = {
    "utterance": Source("utterance", "utterances", "text", "idx", "transcript"),
    "caption": Source("caption", "captions", "text", "idx", "captions"),
    "onscreen": Source("onscreen", "onscreen", "text", "idx", "ocr"),
    "event": Source("event", "events", "description", "event_id", "events"),
    "passage": Source("passage", "passages", "text", "idx", "passages"),
}
KINDS = ("utterance", "caption", "onscreen", "event")  # single rows; "passage" (grouped rows) is asked for by name


# ----------------------------------------------------------------------------- indexes

_index_lock = threading.Lock()
_indexed: set[tuple[str, str]] = set()
_dims: dict[tuple[str, str], int | None] = {}


def ensure_indexes(store: MemoryStore, src: Source) -> bool:
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
        wanted = [((src.text,), lambda: tbl.create_index(src.text, replace=False, config=FTS(with_position=False, stem=True,
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


# ----------------------------------------------------------------------------- query helpers

_WORD = re.compile(r"[\w']+", re.UNICODE)


def fts_terms(query: str) -> str:
    """The words of a question, without punctuation the query parser might read as syntax."""
    return " ".join(_WORD.findall(query))


def embedder_for(film: FilmMemory, src: Source) -> str | None:
    """The text embedder the table's rows were embedded with (recorded in the stage params)."""
    for run in film.stages():
        if run.stage == src.stage:
            return json.loads(run.params or "{}").get("embedder")
    return None


@functools.lru_cache(maxsize=512)
def _embed(name: str, query: str) -> tuple[float, ...]:
    from ..models.embedder import get_embedder

    return tuple(float(x) for x in get_embedder(name).embed([query])[0])


def embed_query(name: str, query: str) -> np.ndarray:
    return np.asarray(_embed(name, query), dtype=np.float32)


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: sum of 1 / (k + rank) over the rankings that hold an item."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


# ----------------------------------------------------------------------------- film vectors


@dataclass
class FilmVectors:
    """One film's rows of one table (one finished run), with unit vectors, held in memory."""

    rows: list[dict[str, Any]]
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray | None  # caption kinds
    matrix: np.ndarray  # (n, dim) float32, rows scaled to unit length

    @functools.cached_property
    def nbytes(self) -> int:
        """Roughly what the entry holds: vectors, times and ~200 bytes of Python per row plus its text."""
        text = sum(len(v) for r in self.rows for v in r.values() if isinstance(v, str))
        return self.matrix.nbytes + self.start.nbytes + self.end.nbytes + 200 * len(self.rows) + text

    def search(self, vec: np.ndarray, mask: np.ndarray, n: int) -> list[tuple[dict[str, Any], float]]:
        visible = int(mask.sum())
        if not visible or n < 1:
            return []
        # einsum, not BLAS: a threaded gemv this small is 10-30x slower when the cores are busy
        sims = np.einsum("ij,j->i", self.matrix, vec / (np.linalg.norm(vec) or 1.0))
        sims = np.where(mask, sims, -np.inf)
        top = np.argpartition(-sims, min(n, visible) - 1)[: min(n, visible)]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.rows[i], float(sims[i])) for i in top]


_vec_lock = threading.Lock()
_vec_cache: OrderedDict[tuple[str, str, str], FilmVectors] = OrderedDict()
_vec_bytes = 0


def vector_cache_budget() -> int:
    """Bytes the cache may hold (`MOVIEMEM_VECTOR_CACHE_MB`, 512 by default): bounded by size, not by
    entries, so that a bench cycling over 20 films x 4 kinds still hits (an entry count of 64 did not)."""
    from ..config import Settings

    return max(0, Settings().vector_cache_mb) * 2**20


def _cols(src: Source) -> list[str]:
    extra = {"caption": ["kind"], "passage": ["source", "first_row", "last_row"]}.get(src.kind, [])
    return ["film_id", src.id_col, "start", "end", src.text] + extra


async def _load_vectors(tbl: Any, src: Source, base: str) -> FilmVectors:
    data = await tbl.query().where(base + " AND vector IS NOT NULL").select(_cols(src) + ["vector"]).to_arrow()
    vec_col = data.column("vector").combine_chunks()
    dim = vec_col.type.list_size if pa.types.is_fixed_size_list(vec_col.type) else 0
    flat = vec_col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    matrix = flat.reshape(len(data), dim) if len(data) else np.zeros((0, max(dim, 1)), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms > 0, norms, 1.0)
    rows = data.drop_columns(["vector"]).to_pylist()
    kind = np.asarray([r["kind"] for r in rows], dtype=object) if src.kind == "caption" else None
    return FilmVectors(rows, data.column("start").to_numpy(), data.column("end").to_numpy(), kind, matrix)


def film_vectors(store: MemoryStore, tbl: Any, src: Source, base: str) -> FilmVectors:
    """The cached vectors of one film's finished run (`base` names film and run, so a rerun stage
    gets a new entry and the old one ages out). Must not be called from LanceDB's loop."""
    key = (store.uri, src.table, base)
    with _vec_lock:
        hit = _vec_cache.get(key)
        if hit is not None:
            _vec_cache.move_to_end(key)
            return hit
    fv = _LOOP.run(_load_vectors(tbl, src, base))
    size, budget = fv.nbytes, vector_cache_budget()  # read on a miss only: a miss costs milliseconds anyway
    global _vec_bytes
    with _vec_lock:
        if key not in _vec_cache and size <= budget:
            _vec_cache[key] = fv
            _vec_bytes += size
        while _vec_bytes > budget and _vec_cache:
            _vec_bytes -= _vec_cache.popitem(last=False)[1].nbytes
    return fv


# ----------------------------------------------------------------------------- retriever


class TextRetriever(Retriever):
    """Vector, full-text or hybrid search over the film's text memory.

    kinds: which of utterance / caption / onscreen / event to search; caption_kinds: restrict
    captions (frame / clip / imported); embedder: the query embedder (default: the one the
    rows were embedded with, read from the stage's params); candidates: how many rows each
    ranking contributes before fusion.
    """

    name = "text"

    def __init__(self, mode: Mode = "hybrid", kinds: Sequence[str] = KINDS, *,
                 caption_kinds: Sequence[str] | None = None, embedder: str | None = None,
                 candidates: int = 20, parallel: bool = True):
        if mode not in ("vector", "fts", "hybrid"):
            raise MovieMemError(f"unknown text retrieval mode {mode!r}; use vector, fts or hybrid")
        unknown = [k for k in kinds if k not in SOURCES]
        if unknown or not kinds:
            raise MovieMemError(f"unknown text kind(s) {unknown or list(kinds)}; use {', '.join(SOURCES)}")
        self.mode: Mode = mode
        self.kinds = tuple(kinds)
        self.caption_kinds = tuple(caption_kinds) if caption_kinds else None
        self.embedder = embedder
        self.candidates = candidates
        self.parallel = parallel
        self.name = f"text-{mode}"

    def _filter(self, film: FilmMemory, src: Source) -> str | None:
        where = visible_filter(film, src.table)
        if where is None:
            return None
        if src.kind == "caption" and self.caption_kinds:
            where += " AND kind IN (" + ", ".join(sql_str(k) for k in self.caption_kinds) + ")"
        return where

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        n = max(k, self.candidates)
        vector: list[Source] = []
        fts_where: list[tuple[Source, str]] = []  # BM25 filters in SQL; vector search masks cached rows instead
        for kind in self.kinds:
            src = SOURCES[kind]
            where = self._filter(film, src)
            if where is None or not ensure_indexes(film.store, src):
                continue
            if self.mode in ("vector", "hybrid"):
                vector.append(src)
            if self.mode in ("fts", "hybrid") and fts_terms(query):
                fts_where.append((src, where))
        if not vector and not fts_where:
            return []
        # open the tables here: opening one inside a coroutine would wait on LanceDB's loop from that loop
        tables = {src.table: film.store.table(src.table)._table for src in vector + [s for s, _ in fts_where]}
        fts = [self._fts(tables[src.table], src, where, query, n) for src, where in fts_where]
        # BM25 runs on LanceDB's loop while the vector rankings are scored here, in numpy
        pending = asyncio.run_coroutine_threadsafe(_gather(fts), _LOOP.loop) if fts and self.parallel else None
        results = [self._vector(film, tables[src.table], src, query, n) for src in vector]
        if pending is not None:
            results += pending.result()
        else:
            results += [_LOOP.run(c) for c in fts]
        return self._combine(results)

    def _combine(self, results: list[list[tuple[Evidence, float]]]) -> list[Evidence]:
        found: dict[str, Evidence] = {}
        for ranking in results:
            for ev, _ in ranking:
                found.setdefault(ev.id, ev)
        if self.mode == "hybrid":
            scores = rrf([[ev.id for ev, _ in ranking] for ranking in results])
        else:  # one signal: keep its own score (cosine similarity, or BM25)
            scores = {}
            for ranking in results:
                for ev, s in ranking:
                    scores[ev.id] = max(scores.get(ev.id, -np.inf), s)
        out = []
        for key, ev in found.items():
            ev.score = float(scores[key])
            ev.retriever = self.name
            out.append(ev)
        return out

    def _query_vector(self, film: FilmMemory, src: Source, query: str) -> np.ndarray | None:
        name = self.embedder or embedder_for(film, src)
        if not name:
            return None  # rows carry no recorded embedder (vectors were never computed)
        vec = embed_query(name, query or " ")
        key = (film.store.uri, src.table)
        if key not in _dims:  # the width is fixed when a table is created; reading the schema costs ms
            _dims[key] = film.store.vector_dim(src.table)
        dim = _dims[key]
        if dim is not None and dim != len(vec):
            raise MovieMemError(f"{src.table} holds {dim}-d vectors but embedder {name!r} makes {len(vec)}-d ones")
        return vec

    def _vector(self, film: FilmMemory, tbl: Any, src: Source, query: str, n: int) -> list[tuple[Evidence, float]]:
        """Exact cosine over the film's cached rows, masked to what this view shows."""
        vec = self._query_vector(film, src, query)
        base = film.run_filter(src.table)
        if vec is None or base is None:
            return []
        fv = film_vectors(film.store, tbl, src, base)
        mask = film.time_mask(src.table, fv.start, fv.end)
        if fv.kind is not None and self.caption_kinds:
            mask &= np.isin(fv.kind, list(self.caption_kinds))
        return [(row_evidence(src, r, score), score) for r, score in fv.search(vec, mask, n)]

    async def _fts(self, tbl: Any, src: Source, where: str, query: str, n: int) -> list[tuple[Evidence, float]]:
        """One BM25 ranking; the async table API lets the rankings of all kinds run concurrently
        on LanceDB's own event loop (2-3x faster than the sync API, whose per-call overhead dominates)."""
        q = tbl.query().nearest_to_text(fts_terms(query), columns=src.text).where(where)
        rows = (await q.select(_cols(src) + ["_score"]).limit(n).to_arrow()).to_pylist()
        return [(row_evidence(src, r, float(r["_score"])), float(r["_score"])) for r in rows]


async def _gather(coros: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*coros))


def row_evidence(src: Source, r: dict[str, Any], score: float = 0.0) -> Evidence:
    """One table row as Evidence; the id (`kind:row`) is stable within the film. A passage
    names the rows it groups (`source`, `rows`), so hits can be merged and cited by line."""
    rows = (r["source"], int(r["first_row"]), int(r["last_row"])) if src.kind == "passage" else None
    return Evidence(kind=src.kind, film_id=r["film_id"], start=float(r["start"]), end=float(r["end"]),
                    text=r[src.text], score=score, id=f"{src.kind}:{r[src.id_col]}", rows=rows)
