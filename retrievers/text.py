"""Text retrieval over utterances, captions, on-screen text and events, inside LanceDB.

All films share one table per kind, so every query is pre-filtered by the film's visibility
filter (film, finished run, window or until-cutoff) on a BTree index over `film_id`, and the
full-text query uses LanceDB's native BM25 index. Hybrid search fuses the vector and the
full-text rankings of every kind with reciprocal-rank fusion (Cormack et al., SIGIR 2009).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
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
}
KINDS = tuple(SOURCES)


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
            raise MovieMemError(f"unknown text kind(s) {unknown or list(kinds)}; use {', '.join(KINDS)}")
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
        jobs: list[tuple[Source, str, str]] = []
        for kind in self.kinds:
            src = SOURCES[kind]
            where = self._filter(film, src)
            if where is None or not ensure_indexes(film.store, src):
                continue
            if self.mode in ("vector", "hybrid"):
                jobs.append((src, "vector", where))
            if self.mode in ("fts", "hybrid") and fts_terms(query):
                jobs.append((src, "fts", where))
        if not jobs:
            return []
        vecs = {}
        for src, how, _ in jobs:
            if how == "vector" and src.kind not in vecs:
                vecs[src.kind] = self._query_vector(film, src, query)

        # open the tables here: opening one inside a coroutine would wait on LanceDB's loop from that loop
        tables = {src.table: film.store.table(src.table)._table for src, _, _ in jobs}  # AsyncTable handles
        coros = [self._search(tables[src.table], src, how, where, query, vecs.get(src.kind), n)
                 for src, how, where in jobs]
        if self.parallel:
            results = _LOOP.run(_gather(coros))
        else:
            results = [_LOOP.run(c) for c in coros]
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

    async def _search(self, tbl: Any, src: Source, how: str, where: str, query: str, vec: np.ndarray | None,
                      n: int) -> list[tuple[Evidence, float]]:
        """One ranking. The async table API runs all rankings of a query concurrently on LanceDB's
        own event loop: 2-3x faster than the sync API, whose per-call overhead dominates here."""
        cols = ["film_id", src.id_col, "start", "end", src.text] + (["kind"] if src.kind == "caption" else [])
        if how == "vector":
            if vec is None:
                return []
            q = tbl.query().nearest_to(vec).column("vector").distance_type("cosine").where(where + " AND vector IS NOT NULL")
            score_col = "_distance"
        else:
            q = tbl.query().nearest_to_text(fts_terms(query), columns=src.text).where(where)
            score_col = "_score"
        rows = (await q.select(cols + [score_col]).limit(n).to_arrow()).to_pylist()
        out = []
        for r in rows:
            s = float(r[score_col])
            score = 1.0 - s if how == "vector" else s
            out.append((row_evidence(src, r, score), score))
        return out


async def _gather(coros: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*coros))


def row_evidence(src: Source, r: dict[str, Any], score: float = 0.0) -> Evidence:
    """One table row as Evidence; the id (`kind:row`) is stable within the film."""
    return Evidence(kind=src.kind, film_id=r["film_id"], start=float(r["start"]), end=float(r["end"]),
                    text=r[src.text], score=score, id=f"{src.kind}:{r[src.id_col]}")
