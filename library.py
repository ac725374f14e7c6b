"""The user-facing Library and Film: compose memory, ingest (and later graph and agents)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings, get_settings
from .errors import MovieMemError
from .ingest.report import QuietReporter, Reporter
from .memory.bundle import export_film, import_film
from .memory.schema import FilmRow
from .memory.store import MemoryStore
from .memory.view import FilmMemory

if TYPE_CHECKING:
    from .backbones import Backbone
    from .graph import NarrativeGraph
    from .ingest.narration import Description, Narration


class Film(FilmMemory):
    """One film's memory. `window()` and `until()` return restricted Films."""

    def __repr__(self) -> str:
        cut = f", until={self.cutoff}" if self.cutoff is not None else ""
        return f"Film({self.film_id!r}, {self.info.title!r}, {self.info.duration_s:.0f} s{cut})"

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

        return ask(self, question, options, kind, policy=policy, backbone=self._backbone(backbone), until=until,
                   **settings)

    def _backbone(self, backbone: str | Backbone | None) -> Backbone:
        """A spec is loaded behind the library's replay cache; a Backbone object is used as given."""
        if backbone is not None and not isinstance(backbone, str):
            return backbone
        from .ingest.captioner import open_backbone

        settings = get_settings()
        return open_backbone(backbone or settings.backbone, self.store.root if self.store.is_local else None,
                             settings.cache_mode)

    def describe(self, out: str | Path | None = None, *, backbone: str | Backbone | None = None,
                 **options: Any) -> Description:
        """An audio-description track placed in the dialogue gaps (see ingest.narration.describe)."""
        from .ingest.narration import describe

        return describe(self, self._backbone(backbone), out=out, **options)

    def narrate(self, start: float, end: float, *, backbone: str | Backbone | None = None,
                **options: Any) -> Narration:
        """A Movie101v2-style narration of [start, end) (see ingest.narration.narrate)."""
        from .ingest.narration import narrate

        return narrate(self, self._backbone(backbone), start, end, **options)


class Library:
    """A directory (or object-store URI) holding the memories of many films."""

    def __init__(self, path: str | Path | None = None, settings: Settings | None = None):
        self.settings = settings or get_settings()
        self.path = str(path) if path is not None else str(self.settings.library_dir)
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
               replace: bool = False, reporter: Reporter | None = None, **kw: Any) -> Film:
        from .ingest.pipeline import ingest_video

        fid = ingest_video(self.store, self.settings, path, film_id=film_id, title=title, year=year, subtitles=subtitles,
                           captions=captions, encoding=encoding, stages=stages, replace=replace, reporter=reporter or QuietReporter(), **kw)
        return self.film(fid)

    def ingest_text(self, path: str | Path, *, film_id: str | None = None, title: str | None = None,
                    year: int | None = None, as_: str = "utterances", duration_s: float | None = None,
                    encoding: str | None = None, meta: dict[str, Any] | None = None, replace: bool = False,
                    reporter: Reporter | None = None, **kw: Any) -> Film:
        """A film without video, from subtitles, a script or an audio-description track."""
        from .ingest.pipeline import ingest_text

        fid = ingest_text(self.store, self.settings, path, film_id=film_id, title=title, year=year, as_=as_,
                          duration_s=duration_s, encoding=encoding, meta=meta, replace=replace,
                          reporter=reporter or QuietReporter(), **kw)
        return self.film(fid)

    def import_collection(self, kind: str, root: str | Path, *, limit: int | None = None,
                          reporter: Reporter | None = None, on_film: Any = None) -> list[Film]:
        """Every film of an MF² or Movie101v2 release as a film without video (resumable: done films are cached)."""
        from .ingest.collections import items

        reporter = reporter or QuietReporter()
        todo = items(kind, Path(root))[:limit]
        done = []
        for i, it in enumerate(todo, 1):
            done.append(self.ingest_text(it.path, film_id=it.film_id, title=it.title, year=it.year, as_=it.as_,
                                         meta=it.meta, reporter=reporter))
            if on_film is not None:
                on_film(i, len(todo), it.film_id)
        return done

    def delete(self, film_id: str) -> None:
        if film_id not in self:
            raise MovieMemError(f"film {film_id!r} is not in the library")
        self.store.delete_film(film_id)

    def export(self, film_id: str, out: str | Path) -> Path:
        return export_film(self.store, film_id, Path(out))

    def import_bundle(self, bundle: str | Path, *, film_id: str | None = None, replace: bool = False) -> Film:
        return self.film(import_film(self.store, Path(bundle), film_id=film_id, replace=replace))
