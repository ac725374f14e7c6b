"""What a stage is and what it is given: the Stage base, its context (Ctx) and its Outcome.

At the bottom of the ingest folder: every stage module (built-in or plug-in) imports this,
and this imports no stage, so stages never import each other through the registry."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..foundation.config import Settings
from ..foundation.errors import MovieMemError
from ..foundation.progress import Reporter
from ..memory.schema import ROW_MODELS, TABLE_OWNER, FilmRow, Row, StageRow, owned_tables, vector_columns
from ..memory.store import MemoryStore, sql_str
from .probe import Probe
from .texttracks import TextTrack

if TYPE_CHECKING:
    import numpy as np

    from ..backbones import Backbone


@dataclass
class Inputs:
    """What the user handed to `ingest` besides settings."""

    video: Path | None
    probe: Probe | None
    film: FilmRow
    subtitles: TextTrack | None = None
    subtitles_sha: str = ""
    text_source: str = "subtitles"  # subtitles | text (films without video)
    captions: TextTrack | None = None
    captions_sha: str = ""

    def video_file(self, stage: str) -> Path:
        """The video a pixel or audio stage reads; such a stage is skipped for a film without one (skip_reason)."""
        if self.video is None:
            raise MovieMemError(f"the {stage} stage needs the film's video file, and this film has none")
        return self.video


@dataclass
class Ctx:
    store: MemoryStore
    settings: Settings
    inputs: Inputs
    reporter: Reporter
    run_id: str = ""
    upstream: dict[str, StageRow] = field(default_factory=dict)
    written: int = 0
    replace: bool = False  # asked by name with --replace: a stage may drop what it would otherwise keep
    runs: dict[str, StageRow] | None = None  # the film's finished runs, where the pipeline holds them
    read: dict[tuple[str, str, bool], list[Any]] = field(default_factory=dict)  # rows read, shared by the stages of one ingest

    @property
    def film_id(self) -> str:
        return self.inputs.film.film_id

    def write(self, rows: Sequence[Row], dim: int | None = None, vectors: np.ndarray | None = None) -> int:
        for r in rows:
            r.film_id, r.run_id = self.film_id, self.run_id
        n = self.store.append(rows, dim, vectors)
        self.written += n
        return n

    def write_embedded(self, rows: Sequence[Row], texts: list[str]) -> int:
        """Write rows with the text embedder's vectors of `texts` (one a row), handed to the store as
        one matrix: as Python floats in each row, a 384-d vector would take ~12 KB a row."""
        if not rows:
            return 0
        from ..models.embedder import get_embedder

        emb = get_embedder(self.settings.embedder, self.settings)
        return self.write(rows, emb.dim, emb.embed(texts))

    def _upstream_filter(self, table: str) -> str:
        run = self.upstream[TABLE_OWNER[table]]
        return f"film_id = {sql_str(self.film_id)} AND run_id = {sql_str(run.run_id)}"

    def rows(self, table: str, vectors: bool = False) -> list[Any]:
        """Rows of an upstream stage's finished run; their vectors (None unless `vectors`) are what most
        of a row's memory would be (a 384-d vector ~12 KB as Python floats), and validating them costs
        (a film's utterances with theirs take ~40 ms). Nothing is read from a run that wrote no row."""
        run = self.upstream[TABLE_OWNER[table]]
        if not run.rows:
            return []
        key = (table, run.run_id, vectors)  # a finished run's rows never change: read them once an ingest
        if key not in self.read:
            self.read[key] = self.store.rows(table, self._upstream_filter(table), vectors=vectors)
        return list(self.read[key])

    def vectors(self, table: str, key: str = "idx") -> dict[int, np.ndarray]:
        """The vectors of an upstream run's rows by `key`, read as arrays (validating them as rows
        costs more than the stage's own work); rows without one are left out."""
        if not self.upstream[TABLE_OWNER[table]].rows:
            return {}
        col = vector_columns(ROW_MODELS[table])[0]
        got = self.store.query(table, self._upstream_filter(table), [key, col])
        keys, vecs = got.column(key).to_pylist(), got.column(col).combine_chunks()
        if vecs.null_count or not len(vecs):
            return {k: np.asarray(v, dtype=np.float32) for k, v in zip(keys, vecs.to_pylist()) if v is not None}
        flat = vecs.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        return dict(zip(keys, flat.reshape(len(keys), -1)))

    def has_rows(self, table: str) -> bool:
        """Whether an upstream stage's finished run wrote any row, without reading them."""
        return bool(self.upstream[TABLE_OWNER[table]].rows) and self.store.count(table, self._upstream_filter(table)) > 0

    def run_dir(self, stage: str) -> Path:
        return self.store.media_dir(self.film_id) / stage / self.run_id

    def progress(self, done: int, total: int | None = None) -> None:
        self.reporter.update(done, total)


@dataclass
class Outcome:
    model: str = ""
    note: str = ""


class Stage:
    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[int] = 1

    @property
    def owns(self) -> list[str]:
        return owned_tables(self.name)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None

    def finished_params(self, ctx: Ctx, *, with_rows: bool = False) -> dict[str, Any] | None:
        """The params of this stage's finished run for the film (None when it has none, or with
        `with_rows` none that wrote rows): how a stage tells what it made before, to keep it."""
        run = (ctx.runs if ctx.runs is not None else ctx.store.finished_runs(ctx.film_id)).get(self.name)
        if run is None or run.status != "done" or (with_rows and not run.rows):
            return None
        return dict(json.loads(run.params or "{}"))

    def run(self, ctx: Ctx) -> Outcome:
        raise NotImplementedError


def chosen_backbone(ctx: Ctx) -> str | None:
    """The text backbone the user passed (--backbone), or None: stages that can use a model run it
    only when asked, never with the settings' default."""
    s = ctx.settings
    return s.backbone if "backbone" in s.model_fields_set and s.backbone else None


def chosen_backbone_label(ctx: Ctx) -> str | None:
    """The chosen backbone as stage params record it: a URL's user:password never reaches the library."""
    from ..foundation.urls import redact_urls

    spec = chosen_backbone(ctx)
    return redact_urls(spec) if spec else None


def load_chosen_backbone(ctx: Ctx) -> Backbone:
    """The chosen backbone, its replies through the library's replay cache (a rerun asks only
    what a stopped run had not finished)."""
    from ..backbones.registry import open_for_library

    spec = chosen_backbone(ctx)
    if spec is None:
        raise MovieMemError("no text backbone chosen: pass --backbone SPEC")
    return open_for_library(spec, ctx.store.root if ctx.store.is_local else None, ctx.settings.cache_mode)


def pooled_or_embedded(ctx: Ctx, texts: Sequence[str],
                       members: Sequence[Sequence[tuple[np.ndarray | None, str]] | None]) -> tuple[list[list[float]], int | None]:
    """Each text's vector from its rows (each row's vector and text): their mean, each row weighed by
    its words as the encoder's mean over tokens weighs them, normalised, when it has rows and all of
    them have a vector (a passage, a scene: its lines were embedded already, and encoding the whole
    again cost more than the film's transcript; MF² dev retrieval: README); else its own encoding."""
    out: list[list[float] | None] = []
    for rows in members:
        if rows and len(vectors := [v for v, _ in rows if v is not None]) == len(rows):
            weights = np.asarray([max(1, len(text.split())) for _, text in rows], dtype=np.float32)
            total = (np.stack(vectors) * weights[:, None]).sum(axis=0)
            out.append((total / max(float(np.linalg.norm(total)), 1e-12)).tolist())
        else:
            out.append(None)
    todo = [i for i, v in enumerate(out) if v is None]
    dim = len(next((v for v in out if v is not None), []) or []) or None
    if todo:
        encoded, dim = embed_texts(ctx, [texts[i] for i in todo])
        for i, v in zip(todo, encoded):
            out[i] = v
    return [v for v in out if v is not None], dim


def embed_texts(ctx: Ctx, texts: list[str]) -> tuple[list[list[float]], int]:
    from ..models.embedder import get_embedder

    emb = get_embedder(ctx.settings.embedder, ctx.settings)
    vecs = emb.embed(texts)
    return vecs.tolist(), emb.dim


