"""Rebuilding some stages of a film already in the library (`characters --merge`, `scenes --summarizer`).

A text film's stages read only its stored rows, so they rerun from the library alone (its source file may
be gone: an import from a temporary copy); a film with video is ingested again from its source with only
those stages asked for. Every other finished stage stays as it is, and the film keeps its title, year and
metadata."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..foundation.errors import MovieMemError

if TYPE_CHECKING:
    from ..library import Library


def check_rebuildable(lib: Library, film_id: str) -> None:
    """A one-line error, before anything is written, when the film's stages cannot be rerun here."""
    info = lib.film(film_id).info
    if info.has_video and not Path(info.source_path).is_file():
        raise MovieMemError(f"film {film_id!r} was read from {info.source_path or 'no file'}, which is gone: "
                            "its stages cannot be rebuilt here")


def rebuild(lib: Library, film_id: str, stages: list[str]) -> None:
    """Runs `stages` for the film (and any stage they need that never finished)."""
    from ..foundation.progress import QuietReporter
    from ..ingest.pipeline import _lock, _select, _write_packs, run_stages
    from ..ingest.registry import ordered_stages
    from ..ingest.stage import Inputs

    check_rebuildable(lib, film_id)
    info = lib.film(film_id).info
    if info.has_video:
        lib.ingest(info.source_path, film_id=film_id, stages=stages)
        return
    reporter = QuietReporter()
    lock = _lock(lib.store, film_id, reporter, 6 * 3600)
    try:
        lib.store.reopen()
        row = lib.store.film_row(film_id)
        if row is None:
            raise MovieMemError(f"film {film_id!r} is no longer in the library")
        chosen, only = _select(stages, ordered_stages())
        run_stages(lib.store, lib.settings, Inputs(video=None, probe=None, film=row, text_source="text"), chosen,
                   reporter, only)
        _write_packs(lib.store, film_id, reporter)
    finally:
        lock.release()
