"""The film timeline bar of the inspector: where on the film each piece of evidence shown to the
model lies, which ones it cited, and where the gold evidence is, drawn on one bar per answer.

Positions are computed here (per mille of the film's length) and drawn as inline SVG by the
item template, so the page needs no script and opens from disk.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from .records import EvidenceRecord
from .views import CharacterCard, EvidenceMark, FilmPageView, Lane, SpanMark, TimelineBar

MIN_WIDTH = 2.0  # per mille: a point (a frame, a one-second line) stays visible


@dataclass
class FilmFacts:
    """What the inspector needs of one film: its length and its stored strip frames (time order)."""

    duration: float
    strip_t: list[float] = field(default_factory=list)
    strip_paths: list[str] = field(default_factory=list)

    def nearest_frame(self, t: float) -> tuple[str, float] | None:
        """The stored strip frame nearest to time t (path, its time), for evidence of any kind."""
        if not self.strip_t:
            return None
        i = bisect.bisect_left(self.strip_t, t)
        best = min((j for j in (i - 1, i) if 0 <= j < len(self.strip_t)), key=lambda j: abs(self.strip_t[j] - t))
        return self.strip_paths[best], self.strip_t[best]


def film_facts(library: str | None, film_ids: set[str]) -> dict[str, FilmFacts]:
    """Length and strip frames of each film from the run's library (films it does not hold, or
    a run without a library, are left out: their bars end at the last span, without stills)."""
    if not library or not film_ids:
        return {}
    from pathlib import Path

    from ..memory.store import MemoryStore
    from ..memory.view import FilmMemory

    if "://" not in library and not Path(library).is_dir():
        return {}  # MemoryStore would create it
    store = MemoryStore(library)
    out = {}
    for f in store.film_rows():
        if f.film_id in film_ids and f.duration_s > 0:
            strip = [r for r in FilmMemory(store, f.film_id).frames(strip=True) if r.image]
            out[f.film_id] = FilmFacts(f.duration_s, [r.t for r in strip], [r.image for r in strip])
    return out


def _span(start: Any, end: Any) -> tuple[float, float] | None:
    try:
        a, b = float(start), float(end if end is not None else start)
    except (TypeError, ValueError):
        return None
    return (a, max(a, b)) if math.isfinite(a) and math.isfinite(b) else None


def timeline(duration: float | None, evidence: list[EvidenceRecord], gold: list[tuple[float, float]]) -> TimelineBar:
    """Marks for the bar: {"known": whether `duration` is the film's length (else the bar ends at
    the last span), "duration", "marks": [{"x", "w", "cited", "kind", "label"}], "gold": [{"x", "w", "label"}]}."""
    spans = [(e, s) for e in evidence if (s := _span(e.start, e.end)) is not None]
    golds = [s for g in gold if (s := _span(g[0], g[1])) is not None]
    known = duration is not None and duration > 0
    length = duration if duration is not None and known else max([b for _, (_, b) in spans] + [b for _, b in golds] + [1.0])

    def place(a: float, b: float) -> tuple[float, float]:
        x = min(1000.0, max(0.0, 1000.0 * a / length))
        w = max(MIN_WIDTH, min(1000.0 - x, 1000.0 * (b - a) / length))
        return round(x, 2), round(w, 2)

    marks: list[EvidenceMark] = []
    for e, (a, b) in spans:
        x, w = place(a, b)
        marks.append({"x": x, "w": w, "cited": bool(e.cited), "kind": e.kind or "?",
                      "label": f"{e.kind or '?'} {e.id or ''} {a:.1f}-{b:.1f} s" + (" (cited)" if e.cited else "")})
    marks.sort(key=lambda m: bool(m["cited"]))  # cited marks drawn last, on top
    return {"known": known, "duration": length, "marks": marks,
            "gold": [{"x": place(a, b)[0], "w": place(a, b)[1], "label": f"gold {a:.1f}-{b:.1f} s"} for a, b in golds]}


LANES = (  # table, label, text column (None: a bare span), time columns
    ("segments", "segments", None),
    ("scenes", "scenes", "summary"),
    ("shots", "shots", None),
    ("utterances", "transcript", "text"),
    ("captions", "captions", "text"),
    ("onscreen", "on-screen text", "text"),
    ("events", "events", "description"),
)
MAX_MARKS = 4000  # per lane: a feature film has about 1,500 transcript lines
MAX_CHARACTER_LINES = 5  # lines quoted per character on the film page


def film_page(library: str, film_id: str) -> FilmPageView | None:
    """A film's memory as timeline lanes (segments, shots, transcript, captions, on-screen text,
    events) plus its events with their links and the characters named, for the inspector's film
    page; None when the library does not hold the film. Reads only the columns it draws."""
    from pathlib import Path

    from ..memory.store import MemoryStore
    from ..memory.view import FilmMemory
    from ..retrievers.base import visible_filter

    if "://" not in library and not Path(library).is_dir():
        return None
    store = MemoryStore(library)
    if store.film_row(film_id) is None:
        return None
    film = FilmMemory(store, film_id)
    length = max(film.info.duration_s, 1e-6)

    def place(a: float, b: float) -> tuple[float, float]:
        x = min(1000.0, max(0.0, 1000.0 * a / length))
        return round(x, 2), round(max(0.6, min(1000.0 - x, 1000.0 * (b - a) / length)), 2)

    lanes: list[Lane] = []
    for table, label, text in LANES:
        where = visible_filter(film, table)
        cols = ["start", "end"] + ([text] if text else []) + (["event_id"] if table == "events" else [])
        rows = store.query(table, where, columns=cols).to_pylist() if where is not None else []
        rows.sort(key=lambda r: (r["start"], r["end"]))
        marks: list[SpanMark] = []
        for r in rows[:MAX_MARKS]:
            x, w = place(float(r["start"]), float(r["end"]))
            tip = f"{r['start']:.1f}-{r['end']:.1f} s" + (f" {r.get('event_id')}" if table == "events" else "")
            marks.append({"x": x, "w": w, "label": tip + (f": {r[text]}" if text else "")})
        lanes.append({"label": label, "n": len(rows), "marks": marks, "cut": len(rows) > MAX_MARKS})
    events = film.events()
    links: dict[str, dict[str, list[str]]] = {}  # an event's links grouped by type: "before e002, e003"
    for rel in film.relations():
        links.setdefault(rel.src, {}).setdefault(rel.type, []).append(rel.dst)
    # a title that only repeats the id or the file's name (ingest's default) is no title: the page is "Film ID"
    given = film.info.title not in (film_id, Path(film.info.source_path).stem)
    return {"film_id": film_id, "title": film.info.title if given else "", "year": film.info.year,
            "has_video": film.info.has_video,
            "duration": film.info.duration_s, "lanes": lanes,
            "events": [{"id": e.event_id, "start": e.start, "end": e.end, "description": e.description,
                        "links": sorted(links.get(e.event_id, {}).items())} for e in events],
            "characters": character_cards(film)}


def face_thumbnails(faces: list[Any]) -> dict[int, str]:
    """Each face identity's representative crop (the faces stage stores it on one row of the cluster)."""
    return {f.cluster: f.thumbnail for f in sorted(faces, key=lambda f: f.t) if f.cluster >= 0 and f.thumbnail}


def character_cards(film: Any, lines_shown: int = MAX_CHARACTER_LINES) -> list[CharacterCard]:
    """The character registry as the inspector shows it: who (name, or "speaker 3" when no line
    names them), how much (lines, screen time, first and last seen), the face identity's crop, and
    the first lines each speaks. Reads the film's view, so an until(t) view shows only what is
    seen or heard by t."""
    from ..memory.view import turns_of

    said: dict[str, list[tuple[float, str]]] = {}
    for u in film.utterances():
        for t in turns_of(u):
            if t.speaker and len(said.setdefault(t.speaker, [])) < lines_shown:
                said[t.speaker].append((t.start, t.text))
    crops = face_thumbnails(film.faces())
    return [{"id": c.char_id, "name": c.name or c.char_id, "names": [n for n in c.names if n != c.name],
             "lines": c.lines, "screen_time_s": c.screen_time_s, "first_s": c.first_s, "last_s": c.last_s,
             "voice": c.voice if c.voice >= 0 else None, "face": c.face if c.face >= 0 else None,
             "thumbnail": crops.get(c.face, "") if c.face >= 0 else "", "said": said.get(c.char_id, [])}
            for c in sorted(film.characters(), key=lambda c: (-c.lines, -c.screen_time_s, c.char_id))]
