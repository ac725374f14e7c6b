"""The user-facing Library and Film: compose memory, ingest (and later graph and agents)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .foundation.config import Settings, get_settings
from .foundation.errors import MovieMemError
from .foundation.progress import QuietReporter, Reporter
from .memory.bundle import export_film, import_film
from .memory.schema import FilmRow
from .memory.store import MemoryStore
from .memory.view import FilmMemory

if TYPE_CHECKING:
    from .agents.narration import Description, Narration
    from .backbones import Backbone
    from .graph import NarrativeGraph
    from .ingest.collections import CollectionItem


# cues per embedding pass of a collection import: large enough for full parallel batches, small
# enough that a kill mid-pass loses little work
IMPORT_CHUNK_CUES = 4000


class Film(FilmMemory):
    """One film's memory. `window()` and `until()` return restricted Films."""

    def __repr__(self) -> str:
        cut = f", until={self.cutoff}" if self.cutoff is not None else ""
        return f"Film({self.film_id!r}, {self.info.title!r}, {self.info.duration_s:.0f} s{cut})"

    def _repr_html_(self) -> str:
        """The film in a notebook: title, length, what its memory holds, its stages, a few stills."""
        from .agents.calls import uniform
        from .agents.display import film_html

        stills = [f.image for f in uniform([f for f in self.frames(strip=True) if f.image], 6)]
        return film_html(self.summary(), stills, self.store.root if self.store.is_local else None)

    def graph(self, *, break_cycles: bool = True) -> NarrativeGraph:
        """The event graph of what this view shows (empty until the events stage has run)."""
        from .graph import NarrativeGraph

        return NarrativeGraph.from_memory(self, break_cycles=break_cycles)

    def ask(self, question: str, options: list[str] | None = None, kind: str | None = None, policy: str = "hybrid",
            backbone: Any = "local", until: float | None = None, **settings: Any) -> Any:
        """Answer a question about this film: kind "mcq" (with options), "claim" (TRUE/FALSE) or
        "open"; `until` shows the policy only what is on screen by then. A backbone spec is
        loaded behind the library's replay cache. Returns an agents.Answer."""
        from .agents import ask
        from .backbones.prefix_states import asking

        # a local backbone files the film's saved prompt state under this film, in this library's cache folder
        with asking(self.film_id, Path(self.store.root) / "cache" if self.store.is_local else None):
            return ask(self, question, options, kind, policy=policy, backbone=self._backbone(backbone), until=until,
                       **settings)

    def _backbone(self, backbone: str | Backbone | None) -> Backbone:
        """A spec is loaded behind the library's replay cache; a Backbone object is used as given."""
        if backbone is not None and not isinstance(backbone, str):
            return backbone
        from .backbones.registry import open_for_library

        settings = get_settings()
        return open_for_library(backbone or settings.backbone, self.store.root if self.store.is_local else None,
                                settings.cache_mode)

    def describe(self, out: str | Path | None = None, *, backbone: str | Backbone | None = None,
                 **options: Any) -> Description:
        """An audio-description track placed in the dialogue gaps (see agents.narration.describe)."""
        from .agents.narration import describe

        return describe(self, self._backbone(backbone), out=out, **options)

    def narrate(self, start: float, end: float, *, backbone: str | Backbone | None = None,
                **options: Any) -> Narration:
        """A Movie101v2-style narration of [start, end) (see agents.narration.narrate)."""
        from .agents.narration import narrate

        return narrate(self, self._backbone(backbone), start, end, **options)


class Library:
    """A directory (or object-store URI) holding the memories of many films."""

    def __init__(self, path: str | Path | None = None, settings: Settings | None = None, *, create: bool = True):
        """`create=False`: a local directory that does not exist is an error (a mistyped path would
        otherwise read as a new, empty library)."""
        self.settings = settings or get_settings()
        self.path = str(path) if path is not None else str(self.settings.library_dir)
        if not create and "://" not in self.path and not Path(self.path).is_dir():
            raise MovieMemError(f"no library at {self.path} (ingest a film first, or pass --library DIR)")
        self.store = MemoryStore(self.path)

    def __repr__(self) -> str:
        return f"Library({self.path!r})"

    def films(self) -> list[FilmRow]:
        return self.store.film_rows()

    def film(self, film_id: str) -> Film:
        return Film(self.store, film_id)

    def __contains__(self, film_id: str) -> bool:
        return self.store.film_row(film_id) is not None

    def ingest(self, path: str | Path, *, film_id: str | None = None, title: str | None = None, year: int | None = None,
               subtitles: str | Path | None = None, captions: str | Path | None = None, encoding: str | None = None, stages: list[str] | None = None,
               replace: bool = False, reporter: Reporter | None = None, lock_wait_s: float = 6 * 3600, **kw: Any) -> Film:
        """Ingest a video. If another process is ingesting the same film, the wait is logged
        (logger moviemem.ingest) and FilmBusyError is raised after `lock_wait_s` seconds."""
        from .ingest.pipeline import ingest_video

        fid = ingest_video(self.store, self.settings, path, film_id=film_id, title=title, year=year, subtitles=subtitles,
                           captions=captions, encoding=encoding, stages=stages, replace=replace,
                           reporter=reporter or QuietReporter(), lock_wait_s=lock_wait_s, **kw)
        return self.film(fid)

    def ingest_text(self, path: str | Path, *, film_id: str | None = None, title: str | None = None,
                    year: int | None = None, as_: str = "utterances", duration_s: float | None = None,
                    encoding: str | None = None, meta: dict[str, Any] | None = None, replace: bool = False,
                    reporter: Reporter | None = None, lock_wait_s: float = 6 * 3600,
                    captions: str | Path | None = None, **kw: Any) -> Film:
        """A film without video, from subtitles, a script or an audio-description track, and
        optionally a description track beside the dialogue (film lock waits as in `ingest`)."""
        from .ingest.pipeline import ingest_text

        fid = ingest_text(self.store, self.settings, path, film_id=film_id, title=title, year=year, as_=as_,
                          duration_s=duration_s, encoding=encoding, meta=meta, replace=replace,
                          reporter=reporter or QuietReporter(), lock_wait_s=lock_wait_s, captions=captions, **kw)
        return self.film(fid)

    def import_collection(self, kind: str, root: str | Path, *, limit: int | None = None,
                          reporter: Reporter | None = None, on_film: Any = None,
                          timings: dict[str, float] | None = None, encoding: str | None = None,
                          films: Sequence[str] | None = None, release: str | Path | None = None) -> list[Film]:
        """Every film of an MF² or Movie101v2 release as a film without video (resumable: done films are cached).

        Films go in chunks of about IMPORT_CHUNK_CUES cues. A helper thread parses a chunk and
        embeds its texts in one parallel pass while this thread commits the previous chunk film
        by film, so a kill loses no committed film and a rerun skips them. `timings` (if given)
        gets the busy seconds of each phase (parse and embed overlap commit) and cue counts. `encoding`: the
        release's text encoding where it is not UTF-8 (a byte-order mark is read either way); `films`: the
        release's numbers of the films to import (all when None); `release`: a copy of the MF² release whose
        MOVIES_DICT gives each film its title and year."""
        from .ingest.collections import items
        from .ingest.texttracks import remembered_tracks

        reporter = reporter or QuietReporter()
        if limit is not None and limit < 1:  # a negative one would drop the last films
            raise MovieMemError(f"limit must be at least 1, not {limit}")
        todo = items(kind, Path(root), films=films, encoding=encoding,
                     release=Path(release) if release is not None else None)[:limit]
        stats = timings if timings is not None else {}
        for key in ("parse_s", "embed_s", "commit_s", "wait_s", "cues", "embedded"):
            stats.setdefault(key, 0.0)
        imported = {it.film_id for it in todo if self._imported(it)}
        done: list[Film] = []
        with remembered_tracks(), _Ahead(self._embedded_chunks(todo, imported, stats, encoding)) as chunks:
            for chunk in chunks:
                t0 = time.perf_counter()
                for it in chunk:
                    done.append(self.ingest_text(it.path, film_id=it.film_id, title=it.title, year=it.year,
                                                 as_=it.as_, meta=it.meta, reporter=reporter, encoding=encoding))
                    if on_film is not None:
                        on_film(len(done), len(todo), it.film_id)
                # each film adds one-row fragments to these tables; compacted, reads stay fast
                self.store.optimize(["stages", "films", "segments"])
                stats["commit_s"] += time.perf_counter() - t0
            stats["wait_s"] += chunks.waited
        return done

    def _imported(self, it: CollectionItem) -> bool:
        """Whether the film's text stage already holds this file, embedded by this embedder."""
        from .foundation.digests import file_sha256

        stage = "transcript" if it.as_ == "utterances" else "captions"
        run = self.store.finished_runs(it.film_id).get(stage)
        if run is None or run.status != "done" or not it.path.is_file():
            return False
        params = json.loads(run.params or "{}")
        return bool(params.get("sha256") == file_sha256(it.path) and params.get("embedder") == self.settings.embedder)

    def _embedded_chunks(self, todo: list[CollectionItem], imported: set[str],
                         stats: dict[str, float], encoding: str | None = None
                         ) -> Iterator[tuple[list[CollectionItem], Callable[[], None]]]:
        """Consecutive films of about IMPORT_CHUNK_CUES cues, their texts embedded and held by the
        embedder until the callback given with them releases them. Films in `imported` add no text;
        an unreadable track adds none either and fails in its own ingest, in film order."""
        from .ingest.stages.transcript import subtitle_items
        from .ingest.texttracks import load_track
        from .models.embedder import get_embedder

        group: list[CollectionItem] = []
        texts: list[str] = []
        for n, it in enumerate(todo, 1):
            t0 = time.perf_counter()
            group.append(it)
            try:
                track = load_track(it.path, encoding=encoding)
            except MovieMemError:
                track = None
            if track is not None:
                stats["cues"] += len(track.cues)
                if it.film_id not in imported:  # what its text stage embeds: dialogue, a text a speaker turn
                    said = subtitle_items(track) if it.as_ == "utterances" else [{"text": c.text} for c in track.cues]
                    texts.extend(u["text"] for u in said)
            stats["parse_s"] += time.perf_counter() - t0
            if len(texts) >= IMPORT_CHUNK_CUES or n == len(todo):
                t1 = time.perf_counter()
                embedder = get_embedder(self.settings.embedder, self.settings) if texts else None
                stats["embedded"] += embedder.preload(texts) if embedder is not None else 0
                stats["embed_s"] += time.perf_counter() - t1
                yield group, (functools.partial(embedder.release, texts) if embedder is not None else _nothing)
                group, texts = [], []

    def delete(self, film_id: str) -> None:
        if film_id not in self:
            raise MovieMemError(f"film {film_id!r} is not in the library")
        self.store.delete_film(film_id)

    def export(self, film_id: str, out: str | Path) -> Path:
        return export_film(self.store, film_id, Path(out))

    def import_bundle(self, bundle: str | Path, *, film_id: str | None = None, replace: bool = False) -> Film:
        return self.film(import_film(self.store, Path(bundle), film_id=film_id, replace=replace))


def _nothing() -> None:
    return None


class _Ahead:
    """Runs a generator of (item, release) pairs one item ahead in a helper thread: the next
    chunk is parsed and embedded while the caller commits this one. Each item's release runs once
    the caller is done with it, or when the loop ends early (an error, a break)."""

    def __init__(self, source: Iterator[tuple[Any, Callable[[], None]]]):
        self._source = source
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="import-ahead")
        self._next: Future[tuple[Any, Callable[[], None]] | None] | None = None
        self.waited = 0.0

    def _pull(self) -> tuple[Any, Callable[[], None]] | None:
        return next(self._source, None)

    def __enter__(self) -> _Ahead:
        self._next = self._pool.submit(self._pull)
        return self

    def __iter__(self) -> Iterator[Any]:
        while self._next is not None:
            t0 = time.perf_counter()
            got = self._next.result()
            self.waited += time.perf_counter() - t0
            self._next = self._pool.submit(self._pull) if got is not None else None
            if got is None:
                return
            item, release = got
            try:
                yield item
            finally:
                release()

    def __exit__(self, *exc: object) -> None:
        pending, self._next = self._next, None
        try:
            got = pending.result() if pending is not None else None  # the chunk in flight, if any
            if got is not None:
                got[1]()
        except Exception:  # noqa: BLE001 - the error that ended the loop is the one to report
            if exc[0] is None:
                raise
        finally:
            self._pool.shutdown(wait=True)

