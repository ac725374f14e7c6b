"""Run ingest stages for one film: validate everything first, then lock the film and run
each stage that is missing or whose params (or upstream runs) changed."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from slugify import slugify

from ..foundation._version import __version__
from ..foundation.config import Settings
from ..foundation.digests import file_sha256
from ..foundation.errors import FilmBusyError, MovieMemError
from ..foundation.progress import QuietReporter, Reporter
from ..foundation.timefmt import check_time
from ..memory.schema import FilmRow, StageRow, check_film_id
from ..memory.store import MemoryStore, finished, params_hash
from .probe import probe
from .registry import STAGES, ordered_stages
from .registry import stage as stage_named
from .stage import Ctx, Inputs, Stage
from .texttracks import TextTrack, clip_to, load_track


def slug_for(path: Path) -> str:
    """Film id from a file name: 'Ĺa Nuit (1961).mp4' -> 'la-nuit-1961'."""
    slug = slugify(path.stem, max_length=64, word_boundary=True, regex_pattern=r"[^a-z0-9_-]+")
    return slug.strip("-_")[:64] or "film"


log = logging.getLogger("moviemem.ingest")


def _lock(store: MemoryStore, film_id: str, reporter: Reporter, wait_s: float) -> FileLock:
    lock = FileLock(str(store.locks_dir() / f"{film_id}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        message = f"film {film_id!r} is being ingested by another process; waiting up to {wait_s:.0f} s for it to finish"
        log.warning(message)  # the Python API's reporter is quiet: a wait of minutes must still be visible
        reporter.warn(message)
        try:
            lock.acquire(timeout=wait_s)
        except Timeout:
            raise FilmBusyError(f"film {film_id!r} is still being ingested by another process after {wait_s:.0f} s") from None
    return lock


def run_stages(store: MemoryStore, settings: Settings, inputs: Inputs, stages: list[Stage], reporter: Reporter,
               only: set[str] | None = None, replace: bool = False, known: list[StageRow] | None = None) -> None:
    """Run stages in order. With `only`, other stages run just when they have never finished.
    A stage that would now be skipped (e.g. events without --backbone) keeps its finished rows
    unless it is asked for by name, and then dropping them needs `replace`. `known`: the film's
    stage rows, when the caller has just read them."""
    film_id = inputs.film.film_id
    known = store.stage_rows(film_id) if known is None else known
    runs = finished(known)
    ran_before = {r.stage for r in known}  # a stage no run of which was ever recorded has nothing to sweep
    read: dict[tuple[str, str, bool], list[Any]] = {}
    for stage in stages:
        if only is not None and stage.name not in only and stage.name in runs:
            continue
        missing = [n for n in stage.needs if n not in runs]
        if missing:
            raise MovieMemError(f"stage {stage.name} needs {', '.join(missing)}, which has not finished for {film_id!r}")
        ctx = Ctx(store, settings, inputs, reporter, upstream={n: runs[n] for n in stage.needs},
                  replace=replace and only is not None and stage.name in only, runs=runs, read=read)
        params = stage.params(ctx)
        phash = params_hash({"stage": stage.name, "version": stage.version, "params": params,
                             "upstream": {n: r.run_id for n, r in ctx.upstream.items()}})
        current = runs.get(stage.name)
        if current is not None and current.params_hash == phash:
            reporter.finish(stage.name, "cached", current.reason)
            continue
        reason = stage.skip_reason(ctx)
        if reason and current is not None and current.status == "done" and current.rows:
            if only is None or stage.name not in only:
                reporter.finish(stage.name, "cached", f"kept its {current.rows} finished row(s) (now: {reason})")
                continue
            if not replace:
                raise MovieMemError(f"stage {stage.name} would be skipped ({reason}) and drop its {current.rows} "
                                    f"finished row(s) for {film_id!r}; pass --replace to drop them")
        sweep = stage.name in ran_before
        if reason:  # one finished row, written at once
            run = store.skip_run(film_id, stage.name, stage.owns, params, phash, reason, code_version=__version__,
                                 sweep=sweep)
            reporter.finish(stage.name, "skipped", reason)
        else:
            ctx.run_id = store.begin_run(film_id, stage.name, params, phash, code_version=__version__)
            reporter.start(stage.name)
            try:
                outcome = stage.run(ctx)
            except BaseException as exc:
                store.fail_run(film_id, ctx.run_id, f"{type(exc).__name__}: {exc}")
                reporter.finish(stage.name, "failed", str(exc)[:200])
                raise
            run = store.finish_run(film_id, stage.name, ctx.run_id, stage.owns, rows=ctx.written, model=outcome.model,
                                   reason=outcome.note, sweep=sweep)
            reporter.finish(stage.name, "done", outcome.note)
        runs[stage.name] = run
        ran_before.add(stage.name)


def _select(stages: list[str] | None, default: list[Stage]) -> tuple[list[Stage], set[str] | None]:
    """The chosen stages plus everything they need, in pipeline order."""
    if not stages:
        return default, None
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise MovieMemError(f"unknown stage(s): {', '.join(unknown)}; known: {', '.join(STAGES)}")
    wanted, todo = set(), list(stages) + ["probe"]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(stage_named(name).needs)
    return [s for s in default if s.name in wanted], set(stages) | {"probe"}


def _keep_imported(runs: dict[str, StageRow], inputs: Inputs) -> None:
    """Re-ingesting without --subtitles/--captions keeps what was imported before (`runs`: the film's finished runs)."""
    if inputs.subtitles is None and "transcript" in runs:
        params = json.loads(runs["transcript"].params or "{}")
        if params.get("source") in ("subtitles", "text"):
            inputs.text_source = params["source"]
            inputs.subtitles_sha = params.get("sha256", "")
    if inputs.captions is None and "captions" in runs:
        params = json.loads(runs["captions"].params or "{}")
        if params.get("source") == "import":
            inputs.captions_sha = params.get("sha256", "")


def _load_text(path: Path | str, reporter: Reporter, *, duration_s: float | None, encoding: str | None,
               fmt: str | None = None) -> tuple[TextTrack, str]:
    track = load_track(Path(path), fmt=fmt, encoding=encoding)
    if duration_s is not None:
        track = clip_to(track, duration_s)
    for w in track.warnings:
        reporter.warn(w)
    return track, file_sha256(Path(path))


def _commit_film(store: MemoryStore, settings: Settings, inputs: Inputs, stages: list[str] | None, replace: bool,
                 reporter: Reporter, lock_wait_s: float) -> str:
    """Under the film's lock: check the id, refresh title/year, run the stages."""
    film = inputs.film
    lock = _lock(store, film.film_id, reporter, lock_wait_s)
    try:
        store.reopen()  # the id is checked and claimed under the lock, as of now: not as of a read made before it
        known = store.stage_rows(film.film_id)
        runs = finished(known)
        existing = store.film_row(film.film_id, runs)
        if existing is not None and existing.sha256 != film.sha256:
            if not replace:
                # the other source's path is not named: an MCP client asking for this id must not learn it
                raise MovieMemError(f"film id {film.film_id!r} already holds another source (`moviemem show "
                                    f"{film.film_id}` names it); choose another --film-id or pass --replace")
            store.delete_film(film.film_id)
            existing, known, runs = None, [], {}
        if existing is not None and not film.has_video and abs(existing.duration_s - film.duration_s) > 1e-3:  # --duration
            if not replace:
                raise MovieMemError(f"film {film.film_id!r} is {existing.duration_s:g} s long, not {film.duration_s:g} s; "
                                    "pass --replace to rebuild it at the new length")
            store.delete_film(film.film_id)
            existing, known, runs = None, [], {}
        if not film.title:
            film.title = existing.title if existing is not None else Path(film.source_path).stem
        if existing is not None:
            film.year = film.year if film.year is not None else existing.year
            film.meta = film.meta if film.meta != "{}" else existing.meta
            film.created_at = existing.created_at
            changed = {k: getattr(film, k) for k in ("title", "year", "meta") if getattr(film, k) != getattr(existing, k)}
            if changed:
                store.update_film(film.film_id, changed)
        _keep_imported(runs, inputs)
        default = ordered_stages()
        chosen, only = _select(stages, default)
        run_stages(store, settings, inputs, chosen, reporter, only, replace, known)
        _write_packs(store, film.film_id, reporter)
    finally:
        lock.release()
    return film.film_id


def _write_packs(store: MemoryStore, film_id: str, reporter: Reporter) -> None:
    """Search packs for the film's new text runs, so its first query reads them (memory/vector_pack.py).
    They are derived data: failing to write them leaves the ingest done and is said, once."""
    from ..memory.search import write_packs

    try:
        write_packs(store, film_id)
    except Exception as exc:  # noqa: BLE001 - the stages are done; a missing pack only makes a first query slower
        reporter.warn(f"search packs of {film_id!r} not written ({exc}); its first query will read LanceDB")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def ingest_video(store: MemoryStore, settings: Settings, path: Path | str, *, film_id: str | None = None,
                 title: str | None = None, year: int | None = None, subtitles: Path | str | None = None,
                 captions: Path | str | None = None, encoding: str | None = None, stages: list[str] | None = None,
                 replace: bool = False, reporter: Reporter | None = None, lock_wait_s: float = 6 * 3600) -> str:
    """Ingest one video file; returns its film id. Bad input fails before anything is written."""
    reporter = reporter or QuietReporter()
    path = Path(path)
    film_id = check_film_id(film_id if film_id is not None else slug_for(path))
    info = probe(path)
    check_time(info.duration_s, f"{path.name}: probed duration")
    inputs = Inputs(video=path, probe=info, film=FilmRow(film_id=film_id))
    if subtitles is not None:
        inputs.subtitles, inputs.subtitles_sha = _load_text(subtitles, reporter, duration_s=info.duration_s, encoding=encoding)
        if inputs.subtitles.format not in ("srt", "vtt"):
            raise MovieMemError(f"{subtitles} is {inputs.subtitles.format}, not SRT or WebVTT subtitles (use --captions for narration)")
    if captions is not None:
        inputs.captions, inputs.captions_sha = _load_text(captions, reporter, duration_s=info.duration_s, encoding=encoding)
    if info.variable_frame_rate:
        reporter.warn(f"{path.name} has a variable frame rate; frame indices are decode order, times come from timestamps")
    inputs.film = FilmRow(
        film_id=film_id, title=title or "", year=year, source_path=str(path.resolve()), sha256=info.sha256,
        duration_s=round(info.duration_s, 3), fps=info.fps, n_frames=info.n_frames, width=info.width, height=info.height,
        has_audio=info.has_audio, has_video=True, created_at=_now(),
    )
    return _commit_film(store, settings, inputs, stages, replace, reporter, lock_wait_s)


def ingest_text(store: MemoryStore, settings: Settings, path: Path | str, *, film_id: str | None = None,
                title: str | None = None, year: int | None = None, as_: str = "utterances", duration_s: float | None = None,
                fmt: str | None = None, encoding: str | None = None, meta: dict[str, Any] | None = None,
                stages: list[str] | None = None, replace: bool = False, reporter: Reporter | None = None,
                lock_wait_s: float = 6 * 3600, captions: Path | str | None = None) -> str:
    """A film without video: its memory comes from a subtitle, script or narration track, and
    optionally a description track (`captions`) beside dialogue, as an audio-described film has.
    Duration is the text track's last cue end unless given; stages that need pixels are skipped ("no video")."""
    reporter = reporter or QuietReporter()
    if as_ not in ("utterances", "captions"):
        raise MovieMemError(f"--as must be utterances or captions, not {as_!r}")
    if captions is not None and as_ != "utterances":
        raise MovieMemError("--captions adds a description track beside a dialogue --text; this --text is already "
                            "read as captions")
    path = Path(path)
    film_id = check_film_id(film_id if film_id is not None else slug_for(path))
    if duration_s is not None and check_time(duration_s, "--duration") == 0:
        raise MovieMemError("--duration must be positive, not 0")
    track, sha = _load_text(path, reporter, duration_s=duration_s, encoding=encoding, fmt=fmt)
    known = store.film_row(film_id) if duration_s is None and not replace else None
    if known is not None and known.sha256 == sha and abs(known.duration_s - round(track.last_end, 3)) > 1e-3:
        duration_s = known.duration_s  # a re-ingest keeps the length the film was given with --duration
        clipped = clip_to(track, duration_s)
        for w in clipped.warnings[len(track.warnings):]:
            reporter.warn(w)
        track = clipped
    duration = duration_s if duration_s is not None else track.last_end
    # the --text track sets the film's length, so a description track never changes it (clip_to warns)
    described = _load_text(captions, reporter, duration_s=duration, encoding=encoding) if captions is not None else None
    inputs = Inputs(video=None, probe=None, film=FilmRow(
        film_id=film_id, title=title or "", year=year, source_path=str(path.resolve()), sha256=sha,
        duration_s=round(duration, 3), has_audio=False, has_video=False, meta=json.dumps(meta or {}, sort_keys=True),
        created_at=_now(),
    ))
    if as_ == "utterances":
        inputs.subtitles, inputs.subtitles_sha, inputs.text_source = track, sha, "text"
    else:
        inputs.captions, inputs.captions_sha = track, sha
    if described is not None:
        inputs.captions, inputs.captions_sha = described
    return _commit_film(store, settings, inputs, stages, replace, reporter, lock_wait_s)
