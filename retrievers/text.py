"""Text retrieval over utterances, captions, on-screen text, events and passages.

All films share one LanceDB table per kind. A film's rows of its finished run are read once per
process (from the film's search packs when they exist) and ranked in numpy: vectors by cosine on
int8 codes, words by BM25 over the film's own rows (memory/search.py, memory/bm25.py, memory/vector_pack.py),
both masked to what the film's view shows (window, until-cutoff, caption kinds). Hybrid search
fuses the vector and the word rankings of every kind (or, pooled, of all the kinds' rows together)
with reciprocal-rank fusion (Cormack et al., SIGIR 2009).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import numpy as np

from ..foundation.errors import MovieMemError
from ..memory.schema import TABLE_OWNER
from ..memory.search import TEXT_TABLES, FilmRows, TextTable, film_rows_many
from ..memory.view import FilmMemory
from .base import Retriever
from .types import Evidence

Mode = Literal["vector", "fts", "hybrid"]
RRF_K = 60  # the constant of reciprocal-rank fusion


@dataclass(frozen=True)
class Source:
    """One kind of evidence and the table its text lives in."""

    kind: str
    where: TextTable

    @property
    def table(self) -> str:
        return self.where.table


SOURCES: dict[str, Source] = {
    "utterance": Source("utterance", TEXT_TABLES["utterances"]),
    "caption": Source("caption", TEXT_TABLES["captions"]),
    "onscreen": Source("onscreen", TEXT_TABLES["onscreen"]),
    "event": Source("event", TEXT_TABLES["events"]),
    "passage": Source("passage", TEXT_TABLES["passages"]),
}
KINDS = ("utterance", "caption", "onscreen", "event")  # single rows; "passage" (grouped rows) is asked for by name


# ----------------------------------------------------------------------------- query helpers

_WORD = re.compile(r"[\w']+", re.UNICODE)


def fts_terms(query: str) -> str:
    """The words of a question, without punctuation the query parser might read as syntax."""
    return " ".join(_WORD.findall(query))


def embedder_for(film: FilmMemory, src: Source) -> str | None:
    """The text embedder the table's rows were embedded with (recorded in the stage params)."""
    for run in film.stages():
        if run.stage == TABLE_OWNER[src.table]:
            embedder: str | None = json.loads(run.params or "{}").get("embedder")
            return embedder
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
    ranking contributes before fusion; pool: hybrid ranks the kinds' rows together (one vector ranking
    per embedder, one word ranking), so the best hit of any kind comes first. By default each kind is
    ranked alone and every kind's best hit ties under fusion, however poor: a mix of kinds, which
    suits units as unlike as captions and half-minute passages (pooling them lowered archival's
    evidence recall on the synthetic film from 0.64 to 0.59), not the one best line of a place.
    """

    name = "text"

    def __init__(self, mode: Mode | str = "hybrid", kinds: Sequence[str] = KINDS, *,
                 caption_kinds: Sequence[str] | None = None, embedder: str | None = None,
                 candidates: int = 20, pool: bool = False):
        if mode not in get_args(Mode):  # a settings string (archival's `search`, a gather setting) is checked here
            raise MovieMemError(f"unknown text retrieval mode {mode!r}; use vector, fts or hybrid")
        unknown = [k for k in kinds if k not in SOURCES]
        if unknown or not kinds:
            raise MovieMemError(f"unknown text kind(s) {unknown or list(kinds)}; use {', '.join(SOURCES)}")
        self.mode: Mode = cast(Mode, mode)
        self.kinds = tuple(kinds)
        self.caption_kinds = tuple(caption_kinds) if caption_kinds else None
        self.embedder = embedder
        self.candidates = candidates
        self.pool = pool
        self.name = f"text-{mode}"  # type: ignore[misc]  # a text retriever is named after its mode, per instance

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        n = max(k, self.candidates)
        sources = [SOURCES[kind] for kind in self.kinds]
        bases = [(src, film.run_filter(src.table)) for src in sources]
        wanted = [(src, base) for src, base in bases if base is not None]
        terms = fts_terms(query) if self.mode in ("fts", "hybrid") else ""
        if not wanted or (self.mode == "fts" and not terms):
            return []
        vecs: dict[str, tuple[str, np.ndarray] | None] = {}

        def embed() -> None:
            if self.mode in ("vector", "hybrid"):
                for src, _ in wanted:
                    name = self.embedder or embedder_for(film, src)
                    vecs[src.kind] = (name, embed_query(name, query or " ")) if name else None  # no name: never embedded

        loaded = film_rows_many(film.store, film.film_id, [(src.where, base) for src, base in wanted], meanwhile=embed)
        # hybrid fuses a vector and a word ranking per kind, or (pool) one of each across kinds
        rankings: dict[str, list[tuple[Evidence, float]]] = {}
        for (src, _), rows in zip(wanted, loaded, strict=True):
            mask = self._mask(film, src, rows)
            named = vecs.get(src.kind)
            if named is not None:
                name, vec = named
                if len(rows.rows) and rows.matrix.shape[1] != len(vec):
                    raise MovieMemError(f"{src.table} holds {rows.matrix.shape[1]}-d vectors but the query embedder "
                                        f"{name!r} makes {len(vec)}-d ones")
                found = rows.search(vec, mask, n)
                rankings.setdefault(f"vector:{name}" if self.pool else f"{src.kind}:vector", []).extend(
                    (row_evidence(src, r, score), score) for r, score in found)
            if terms:
                found = rows.search_words(terms, mask, n)
                rankings.setdefault("words" if self.pool else f"{src.kind}:words", []).extend(
                    (row_evidence(src, r, score), score) for r, score in found)
        return self._combine([sorted(hits, key=lambda h: -h[1]) for hits in rankings.values()])

    def _mask(self, film: FilmMemory, src: Source, rows: FilmRows) -> np.ndarray:
        """The rows this view shows: its window or until-cutoff, and the caption kinds asked for."""
        mask = film.time_mask(src.table, rows.start, rows.end)
        if rows.kind is not None and self.caption_kinds:
            mask &= np.isin(rows.kind, list(self.caption_kinds))
        return mask

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


def row_evidence(src: Source, r: dict[str, Any], score: float = 0.0) -> Evidence:
    """One table row as Evidence; the id (`kind:row`) is stable within the film. A passage
    names the rows it groups (`source`, `rows`), so hits can be merged and cited by line."""
    rows = (r["source"], int(r["first_row"]), int(r["last_row"])) if src.kind == "passage" else None
    return Evidence(kind=src.kind, film_id=r["film_id"], start=float(r["start"]), end=float(r["end"]),
                    text=r[src.where.text], score=score, id=f"{src.kind}:{r[src.where.id_col]}", rows=rows)
