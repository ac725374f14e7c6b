"""FilmMemory: the read view of one film, optionally restricted in time.

`until(t)` is the no-future-leak view used for predictive questions: only rows that have
ended by `t` are visible, so a policy cannot read what happens later in the film.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa

from ..foundation.errors import MovieMemError
from ..foundation.timefmt import seconds
from .schema import (
    POINT_TABLES,
    TABLE_OWNER,
    TIMED_TABLES,
    CaptionRow,
    CharacterRow,
    EventRow,
    FaceRow,
    FilmRow,
    FrameRow,
    OnscreenRow,
    PassageRow,
    RelationRow,
    SceneRow,
    SegmentRow,
    ShotRow,
    SpeakerRow,
    StageRow,
    UtteranceRow,
    check_film_id,
)
from .store import MemoryStore, sql_str


@dataclass(frozen=True)
class Turn:
    """One speaker's stretch of a transcript line."""

    start: float
    end: float
    speaker: str
    speaker_name: str
    text: str


def turns_of(u: UtteranceRow) -> list[Turn]:
    """A transcript line's speaker turns: those the characters stage found where the voice
    changes inside the line, else the whole line as one turn."""
    if u.turns:
        return [Turn(float(t["start"]), float(t["end"]), str(t["speaker"]), str(t["speaker_name"]), str(t["text"]))
                for t in json.loads(u.turns)]
    return [Turn(u.start, u.end, u.speaker, u.speaker_name, u.text)]


def run_seconds(run: StageRow) -> float | None:
    """How long a stage run took, from its recorded start and finish (None when either is missing)."""
    try:
        took = dt.datetime.fromisoformat(run.finished_at) - dt.datetime.fromisoformat(run.started_at)
    except ValueError:
        return None
    return round(took.total_seconds(), 3)


class FilmMemory:
    def __init__(self, store: MemoryStore, film_id: str, *, t0: float = 0.0, t1: float = math.inf, until: bool = False,
                 state: dict[str, Any] | None = None):
        """`state`: what `state()` gave, so that the view reads no table to know the film's runs."""
        self.store = store
        self.film_id = check_film_id(film_id)
        self.t0, self.t1, self._until = t0, t1, until
        if state is not None:
            if state.get("film_id") != film_id:
                raise MovieMemError(f"the saved state is film {state.get('film_id')!r}'s, not {film_id!r}'s")
            self._runs = {r["stage"]: StageRow.model_validate(r) for r in state["runs"]}
            row: FilmRow | None = FilmRow.model_validate(state["info"])
        else:
            self._runs = store.finished_runs(film_id)
            row = store.film_row(film_id, self._runs)
        if row is None:
            raise MovieMemError(f"film {film_id!r} is not in the library at {store.uri}")
        self.info: FilmRow = row

    def state(self) -> dict[str, Any]:
        """The film's finished runs and films row as plain JSON: saved by quick commands beside
        the library (memory/catalog.py) and given back as `state=`, a view opens no LanceDB table
        until it reads rows (search reads packs: a command answered from them never imports LanceDB)."""
        return {"film_id": self.film_id, "runs": [r.model_dump() for r in self._runs.values()],
                "info": self.info.model_dump()}

    # -- views -------------------------------------------------------------
    def window(self, t0: float, t1: float) -> FilmMemory:
        """Rows overlapping [t0, t1), of the same runs as this view."""
        t0, t1 = seconds(t0, "window start"), seconds(t1, "window end", open_end=True)
        if t1 <= t0:
            raise MovieMemError(f"empty window: {t0} >= {t1}")
        return type(self)(self.store, self.film_id, t0=max(t0, self.t0), t1=min(t1, self.t1), until=self._until,
                          state=self.state())

    def until(self, t: float) -> FilmMemory:
        """Only what has been shown by time t (rows that end after t are hidden), of the same runs as this view."""
        t = seconds(t, "until")
        return type(self)(self.store, self.film_id, t0=self.t0, t1=min(t, self.t1), until=True, state=self.state())

    @property
    def cutoff(self) -> float | None:
        return self.t1 if self._until else None

    @property
    def duration_s(self) -> float:
        return min(self.info.duration_s, self.t1)

    # -- filtering ---------------------------------------------------------
    def run_filter(self, table: str) -> str | None:
        """The film's finished run of the table's owning stage, without any time restriction
        (None when that stage has not finished). Retrievers key caches on it: it changes
        whenever a stage is rerun, so a cache can never serve rows of a replaced run."""
        if table not in TABLE_OWNER:
            raise MovieMemError(f"unknown table {table!r}; use one of {', '.join(sorted(TABLE_OWNER))}")
        run = self._runs.get(TABLE_OWNER[table])
        if run is None or run.status != "done":
            return None
        return f"film_id = {sql_str(self.film_id)} AND run_id = {sql_str(run.run_id)}"

    def _time_clauses(self, table: str) -> list[str]:
        clauses = []
        if table in TIMED_TABLES:
            if self._until:
                clauses.append(f"`end` <= {self.t1!r}")
            elif self.t1 != math.inf:
                clauses.append(f"start < {self.t1!r}")
            if self.t0 > 0:
                clauses.append(f"`end` > {self.t0!r}")
        elif table in POINT_TABLES:
            if self.t1 != math.inf:
                clauses.append(f"t <= {self.t1!r}" if self._until else f"t < {self.t1!r}")
            if self.t0 > 0:
                clauses.append(f"t >= {self.t0!r}")
        return clauses

    def time_mask(self, table: str, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Which of a timed table's rows (by their start and end) this view's time restriction
        shows: the same rule as the SQL filter, for rows already in memory."""
        if table not in TIMED_TABLES:
            raise MovieMemError(f"{table} is not a table of timed rows")
        keep = np.ones(len(start), dtype=bool)
        if self._until:
            keep &= end <= self.t1
        elif self.t1 != math.inf:
            keep &= start < self.t1
        if self.t0 > 0:
            keep &= end > self.t0
        return keep

    def _where(self, table: str) -> str | None:
        base = self.run_filter(table)
        if base is None:
            return None
        return " AND ".join([base, *self._time_clauses(table)])

    def arrow(self, table: str) -> pa.Table:
        """The visible rows of one table as Arrow (for pandas/polars users)."""
        where = self._where(table)
        if where is None:
            return self.store.query(table, "false")
        return self.store.query(table, where)

    def _rows(self, table: str, order: str) -> list[Any]:
        where = self._where(table)
        if where is None:
            return []
        rows = self.store.rows(table, where)
        return sorted(rows, key=lambda r: getattr(r, order))

    # -- tables ------------------------------------------------------------
    def shots(self) -> list[ShotRow]:
        return self._rows("shots", "shot_idx")

    def segments(self) -> list[SegmentRow]:
        return self._rows("segments", "seg_idx")

    def frames(self, pool: int | None = None, strip: bool = False) -> list[FrameRow]:
        """Frames of a uniform pool (64/128/256), or the 0.5 fps strip; image paths made absolute."""
        rows: list[FrameRow] = self._rows("frames", "frame_idx")
        if pool is not None:
            pools = {p for r in rows for p in r.pools} or set()
            if pools and pool not in pools:
                raise MovieMemError(f"no frame pool of {pool}; this film has pools {sorted(pools)}")
            rows = [r for r in rows if pool in r.pools]
        if strip:
            rows = [r for r in rows if r.strip]
        root = self.store.root if self.store.is_local else None
        for r in rows:
            if root is not None and r.image:
                r.image = str(root / r.image)
        return rows

    def clip_vectors(self, frame_idx: list[int] | None = None) -> tuple[list[int], np.ndarray]:
        """CLIP vectors of the frames (empty when the clip stage was skipped)."""
        tbl = self.arrow("clip")
        if tbl.num_rows == 0:
            return [], np.zeros((0, 0), dtype=np.float32)
        idx = tbl.column("frame_idx").to_pylist()
        vecs = np.asarray(tbl.column("vector").to_pylist(), dtype=np.float32)
        if frame_idx is not None:
            keep = [i for i, f in enumerate(idx) if f in set(frame_idx)]
            idx, vecs = [idx[i] for i in keep], vecs[keep]
        return idx, vecs

    def utterances(self) -> list[UtteranceRow]:
        """Transcript lines; once the characters stage ran, `speaker` is the line's character id
        and `speaker_name` its name when the film's text gives one. A line spoken by several
        voices carries its `turns` (json, see `turns_of`) and the speaker of its longest turn."""
        rows: list[UtteranceRow] = self._rows("utterances", "idx")
        where = self.run_filter("speaker_lines")
        if where is None or not rows:
            return rows
        who: dict[int, list[SpeakerRow]] = {}
        for r in cast("list[SpeakerRow]", self.store.rows("speaker_lines", where)):
            who.setdefault(r.utt_idx, []).append(r)
        known = self._names_known(rows) if self._until else None
        for u in rows:
            turns = sorted(who.get(u.idx, []), key=lambda r: r.part)
            if not turns:
                continue
            names = [t.speaker_name if known is None or t.speaker in known else "" for t in turns]
            main = max(range(len(turns)), key=lambda k: (turns[k].end - turns[k].start, -k)) if len(turns) > 1 else 0
            u.speaker, u.speaker_name = turns[main].speaker, names[main]
            if len(turns) > 1:
                u.turns = json.dumps([{"start": t.start, "end": t.end, "speaker": t.speaker, "speaker_name": n,
                                       "text": t.text} for t, n in zip(turns, names)])
        return rows

    def _names_known(self, visible: list[UtteranceRow]) -> set[str]:
        """Characters whose name was given by a line already visible: an until(t) view must not
        name a speaker from what is said after t."""
        shown = {u.idx for u in visible}
        known = set()
        for c in self._rows("characters", "char_id"):
            for link in json.loads(c.links or "[]"):
                if link.get("kind") == "name" and any(int(m) in shown for e in link.get("evidence", [])
                                                      for m in re.findall(r"^line (\d+)", e)):
                    known.add(c.char_id)
        return known

    def characters(self) -> list[CharacterRow]:
        """The character registry (characters stage): in `until(t)` views only characters seen or
        heard by t, with their lines, times and screen time counted up to t."""
        rows: list[CharacterRow] = self._rows("characters", "char_id")
        if not self._until and self.t0 <= 0:
            return rows
        lines: dict[str, list[Turn]] = {}
        visible = self.utterances()
        known = self._names_known(visible)
        for u in visible:
            for t in turns_of(u):
                lines.setdefault(t.speaker, []).append(t)
        faces: dict[int, list[float]] = {}
        for f in self._rows("faces", "t"):
            if f.cluster >= 0:
                faces.setdefault(f.cluster, []).append(f.t)
        where = self.run_filter("faces")
        all_faces = cast("list[FaceRow]", self.store.rows("faces", where)) if where is not None and faces else []
        total = {c: sum(1 for f in all_faces if f.cluster == c) for c in faces}
        out = []
        for c in rows:
            mine, seen = lines.get(c.char_id, []), faces.get(c.face, []) if c.face >= 0 else []
            times = [t for u in mine for t in (u.start, u.end)] + seen
            if not times and c.char_id in known and c.first_s < self.t1:  # named by a line already shown
                times = [c.first_s, min(c.last_s, self.t1)]
            if not times:
                continue
            screen = c.screen_time_s * len(seen) / total[c.face] if seen else 0.0
            update: dict[str, Any] = {"lines": len(mine), "first_s": min(times), "last_s": max(times),
                                      "screen_time_s": round(screen, 2)}
            if self._until and c.char_id not in known:
                label = f"speaker {c.voice + 1}" if c.voice >= 0 else f"face {c.face + 1}" if c.face >= 0 else ""
                if not label:
                    continue
                update.update(name=label, names=[])
            out.append(c.model_copy(update=update))
        return out

    def faces(self) -> list[FaceRow]:
        return self._rows("faces", "t")

    def captions(self, kind: str | None = None) -> list[CaptionRow]:
        rows: list[CaptionRow] = self._rows("captions", "start")
        return [r for r in rows if kind is None or r.kind == kind]

    def onscreen(self) -> list[OnscreenRow]:
        return self._rows("onscreen", "start")

    def passages(self, source: str | None = None) -> list[PassageRow]:
        if source not in (None, "utterance", "caption"):
            raise MovieMemError(f"unknown passage source {source!r}; use utterance or caption")
        rows: list[PassageRow] = self._rows("passages", "idx")
        return [r for r in rows if source is None or r.source == source]

    def scenes(self) -> list[SceneRow]:
        """The film's scenes in screen order (empty until the scenes stage has run)."""
        return self._rows("scenes", "scene_idx")

    def overview(self, budget_tokens: int = 1500) -> str:
        """Every visible scene's summary, one line each, within a token budget."""
        from .overview import overview

        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
            raise MovieMemError(f"budget_tokens is a whole number of tokens >= 0, not {budget_tokens!r}")
        return overview(self.scenes(), budget_tokens)

    def events(self) -> list[EventRow]:
        return self._rows("events", "start")

    def relations(self) -> list[RelationRow]:
        rows: list[RelationRow] = self._rows("relations", "src")
        visible = {e.event_id for e in self.events()}
        return [r for r in rows if r.src in visible and r.dst in visible]

    def stages(self) -> list[StageRow]:
        return sorted(self._runs.values(), key=lambda r: r.started_at)

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads(self.info.meta or "{}")
        return meta

    # -- summary -----------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The `moviemem show --json` object."""
        frames = self.frames()
        pools = {str(p): sum(1 for f in frames if p in f.pools) for p in sorted({p for f in frames for p in f.pools})}
        counts = {name: self.arrow(name).num_rows for name in
                  ["frames", "shots", "segments", "scenes", "utterances", "passages", "captions", "onscreen", "events", "relations",
                   "characters", "faces"]}
        stages = [
            {"stage": r.stage, "status": r.status, "model": r.model, "params_hash": r.params_hash, "reason": r.reason,
             "seconds": run_seconds(r)}
            for r in self.stages()
        ]
        return {
            "film_id": self.film_id, "title": self.info.title, "year": self.info.year,
            "duration_s": round(self.info.duration_s, 3), "has_video": self.info.has_video,
            "has_audio": self.info.has_audio, "counts": counts, "pools": pools, "stages": stages,
        }
