"""The read-only film-memory tools: what the MCP server exposes and `moviemem search` prints.

Each tool takes plain JSON-able arguments, checks them (film ids, finite time windows inside
the film, bounded k and counts) and returns a JSON-able dict, so a model driving the memory
through any client gets the same answers as a person at the command line. Everything is read
through the Library API; the only files opened are the film's stored strip frames, and only
after checking that they lie inside the library. Bad input raises MovieMemError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..foundation.errors import MovieMemError
from ..memory.catalog import saved, unknown_film  # answers saved while the library is unchanged (no LanceDB imports)

if TYPE_CHECKING:
    from ..library import Film, Library
    from ..memory.view import FilmMemory
    from ..retrievers.types import Evidence

T = TypeVar("T")
MAX_K = 100  # evidence items per search
MAX_QUERY_CHARS = 2000
MAX_RANGE_ROWS = 500  # rows one read_range returns (the rest is reported as truncated)
MAX_FRAMES = 8  # images per frames call
MAX_SEGMENTS = 500  # segments listed by film_overview
MAX_CHARACTERS = 50
MAX_SCENES = 500  # scenes one scenes call lists (the rest is reported as truncated)
MAX_QUESTION_CHARS = 4000
MAX_OPTIONS = 10
SEARCH_KINDS = ("utterance", "caption", "onscreen", "event", "passage")
DEFAULT_SEARCH_KINDS = ("utterance", "caption", "onscreen", "event")
RANGE_KINDS = ("utterance", "caption", "onscreen", "event")
DEFAULT_RANGE_KINDS = ("utterance", "caption", "onscreen")
GRAPH_OPS = ("events", "causes", "effects", "chain", "flashbacks", "story_order", "neighborhood")
TIME_SLACK_S = 1e-6


def _saved(lib: Library, key: str, compute: Callable[[], T]) -> T:
    """`compute()`, or its answer as saved while the library is unchanged (memory/catalog.py). The
    library's open tables are first brought up to its latest writes: every tool starts here, so a
    long-lived server sees what other processes wrote since its last call."""
    return saved(lib.path, key, compute, lib.store.refresh)


def film(lib: Library, film_id: Any) -> Film:
    """The film, or a one-line error for an id that is malformed or not in the library. Opened from
    the film's runs as saved while the library is unchanged (memory/catalog.py): reading them from
    LanceDB costs ~20 ms a call in a library of 1,000 films, and `moviemem search` then needs no
    LanceDB at all (the rows come from the film's search packs)."""
    from ..library import Film
    from ..memory.schema import check_film_id

    if not isinstance(film_id, str):
        raise MovieMemError(f"film_id must be a string, not {type(film_id).__name__}")
    check_film_id(film_id)

    def opened() -> Film:
        try:
            return lib.film(film_id)
        except MovieMemError:  # the one error a well-formed id meets here: no such film
            raise unknown_film(film_id, [f["film_id"] for f in list_films(lib)["films"]], "list_films") from None

    return Film(lib.store, film_id, state=_saved(lib, f"film-state {film_id}", lambda: opened().state()))


def seconds(value: Any, name: str, duration: float, *, low: float = 0.0) -> float:
    """A finite time on the film's clock in [low, duration] (seconds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MovieMemError(f"{name} must be a number of seconds, not {value!r}")
    t = float(value)
    if not math.isfinite(t):
        raise MovieMemError(f"{name} must be a finite number of seconds, not {value!r}")
    if t < low or t > duration + TIME_SLACK_S:
        raise MovieMemError(f"{name} = {t:g} s is outside the film (0 to {duration:g} s)")
    return t


def window(f: Film, start: Any, end: Any) -> tuple[float | None, float | None]:
    """Checked (start, end); either may be None (the film's beginning or end)."""
    d = f.info.duration_s
    t0 = seconds(start, "start", d) if start is not None else None
    t1 = seconds(end, "end", d) if end is not None else None
    if t0 is not None and t1 is not None and t1 <= t0:
        raise MovieMemError(f"empty time window: start {t0:g} s is not before end {t1:g} s")
    return t0, t1


def count(value: Any, name: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MovieMemError(f"{name} must be an integer, not {value!r}")
    if not 1 <= value <= high:
        raise MovieMemError(f"{name} must be between 1 and {high}, not {value}")
    return int(value)


def kinds_of(value: Sequence[str] | str | None, allowed: Sequence[str], default: Sequence[str]) -> tuple[str, ...]:
    """A list of kinds (or a comma-separated string), each one of `allowed`."""
    if value is None:
        return tuple(default)
    items = [k.strip() for k in value.split(",")] if isinstance(value, str) else list(value)
    if not items or not all(isinstance(k, str) and k for k in items):
        raise MovieMemError(f"kinds must name one or more of {', '.join(allowed)}")
    unknown = [k for k in items if k not in allowed]
    if unknown:
        raise MovieMemError(f"unknown kind {unknown[0]!r}; use {', '.join(allowed)}")
    return tuple(dict.fromkeys(items))


def text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise MovieMemError(f"{name} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise MovieMemError(f"{name} is {len(value)} characters; at most {limit}")
    return value


def evidence_json(e: Evidence, score: bool = False) -> dict[str, Any]:
    d = {"id": e.id, "kind": e.kind, "start": round(e.start, 3), "end": round(e.end, 3), "text": e.text}
    if score:
        d["score"] = round(e.score, 6)
    return d


# ----------------------------------------------------------------------------- tools


def list_films(lib: Library) -> dict[str, Any]:
    return _saved(lib, "list_films", lambda: {"films": [{"film_id": f.film_id, "title": f.title, "duration_s": round(f.duration_s, 3)}
                                                        for f in lib.films()]})


def film_overview(lib: Library, film_id: str) -> dict[str, Any]:
    """Duration, what the memory holds, segments (scenes) and the character registry (characters stage).
    Counts and names are read column by column (never whole rows with their vectors)."""
    f = film(lib, film_id)
    return _saved(lib, f"film_overview {film_id}", lambda: _overview(f))


def _overview(f: Film) -> dict[str, Any]:
    from ..retrievers.base import visible_filter

    counts = {}
    for table in ("frames", "shots", "segments", "utterances", "passages", "captions", "onscreen", "events", "relations"):
        where = visible_filter(f, table)
        counts[table] = f.store.count(table, where) if where is not None else 0
    segments = f.segments()
    return {
        "film_id": f.film_id, "title": f.info.title, "year": f.info.year, "duration_s": round(f.info.duration_s, 3),
        "has_video": f.info.has_video, "has_audio": f.info.has_audio, "counts": counts,
        "stages": [{"stage": s.stage, "status": s.status} for s in f.stages()],
        "segments": [{"index": s.seg_idx, "start": round(s.start, 3), "end": round(s.end, 3)}
                     for s in segments[:MAX_SEGMENTS]],
        "segments_total": len(segments),
        # the character registry, as `moviemem characters` lists it (first seen or named first)
        "characters": [{"name": c.name, "names": list(c.names), "lines": c.lines}
                       for c in sorted(f.characters(), key=lambda c: (c.first_s, c.char_id))[:MAX_CHARACTERS]],
    }


def scenes(lib: Library, film_id: str, start: float | None = None, end: float | None = None,
           until: float | None = None) -> dict[str, Any]:
    """The film's scenes in screen order, a table of contents to browse before searching: each
    one's span, characters and summary (`how`: extractive, or the model that wrote it); start/end
    keep the scenes overlapping that window, `until` those already over at that time (no spoilers)."""
    from ..memory.overview import overlapping

    f = film(lib, film_id)
    t0, t1 = window(f, start, end)
    view = f.until(seconds(until, "until", f.info.duration_s, low=TIME_SLACK_S)) if until is not None else f
    rows = overlapping(view.scenes(), t0, t1)
    return {"scenes": [{"scene": s.scene_idx + 1, "start": s.start, "end": s.end, "characters": list(s.characters),
                        "summary": s.summary, "how": s.how} for s in rows[:MAX_SCENES]],
            "truncated": len(rows) > MAX_SCENES, "total": len(rows)}


def _query_view(lib: Library, film_id: str, query: str, k: int, start: float | None, end: float | None,
                until: float | None) -> tuple[Film, str, int, FilmMemory, float | None, float | None]:
    """A search's checked arguments: the film, the query, k, the view `until` leaves, and the window."""
    f = film(lib, film_id)
    query = text(query, "query", MAX_QUERY_CHARS)
    if not query.strip():
        raise MovieMemError("query is empty")
    k = count(k, "k", MAX_K)
    t0, t1 = window(f, start, end)
    view = f.until(seconds(until, "until", f.info.duration_s, low=TIME_SLACK_S)) if until is not None else f
    return f, query, k, view, t0, t1


def search(lib: Library, film_id: str, query: str, k: int = 10, kinds: Sequence[str] | str | None = None,
           start: float | None = None, end: float | None = None, until: float | None = None) -> dict[str, Any]:
    """Hybrid (vector + BM25) search of the film's text memory, best first (`score`: the rank fusion
    that orders them). Each hit says how it matches: `words`, the query's words it holds (stemmed,
    stop words left out) of all the query's words, and `similarity`, the cosine of its text
    embedding with the query's (None where it is not among the nearest MAX_K). A hit with neither a
    word nor a similarity of MIN_SIMILARITY is no match and is dropped (`dropped` counts them), and a
    hit that repeats a better one (an event quoting the line found) is left out so it takes no place
    of `k` (of two that rank alike, the shorter stays: the line itself). `empty_kinds` names the
    kinds asked for that the film has no rows of, and why. `until` hides everything not yet shown
    at that time; start/end restrict to a window."""
    from ..memory.bm25 import analyze
    from ..retrievers.text import TextRetriever

    f, query, k, view, t0, t1 = _query_view(lib, film_id, query, k, start, end, until)
    chosen = kinds_of(kinds, SEARCH_KINDS, DEFAULT_SEARCH_KINDS)
    # twice k: room for the repeats and the non-matches taken out below
    found = TextRetriever("hybrid", chosen).retrieve(view, query, k=2 * k, start=t0, end=t1)
    nearest = {e.id: e.score for e in TextRetriever("vector", chosen, candidates=MAX_K).retrieve(
        view, query, k=MAX_K, start=t0, end=t1)}
    terms = set(analyze(query))
    hits: list[tuple[Evidence, int, float | None]] = []
    dropped = 0
    for e in sorted(found, key=lambda e: (-e.score, len(e.text))):  # of two that tie, the plain line comes first
        similarity = nearest.get(e.id)
        words = len(terms & set(analyze(e.text)))
        if not words and (similarity is None or similarity < MIN_SIMILARITY):
            dropped += 1
        elif not any(_repeats(e, kept) for kept, _, _ in hits):
            hits.append((e, words, similarity))
    return {"evidence": [dict(evidence_json(e, score=True), words=[words, len(terms)],
                              similarity=None if sim is None else round(sim, 3)) for e, words, sim in hits[:k]],
            "dropped": dropped, "empty_kinds": empty_kinds(f, chosen)}


def retrieve(lib: Library, film_id: str, query: str, retriever: str, k: int = 10, start: float | None = None,
             end: float | None = None, until: float | None = None) -> dict[str, Any]:
    """The evidence a registered question-level retriever (the hybrid policy's gathering, or a plug-in's)
    ranks for `query` asked as an open question, best first, cut to k: what a policy would be offered."""
    from ..retrievers.registry import get_retriever
    from ..retrievers.types import Question

    _, query, k, view, t0, t1 = _query_view(lib, film_id, query, k, start, end, until)
    r = get_retriever(retriever)
    if t0 is not None or t1 is not None:
        view = view.window(t0 or 0.0, t1 if t1 is not None else math.inf)
    found = r.retrieve(view, Question(query, kind="open"))
    return {"retriever": retriever, "evidence": [evidence_json(e, score=True) for e in found[:k]]}


# The cosine (MiniLM, the default text embedder) from which a hit holding none of the query's words still
# matches it. Measured on MF² film 5's lines: the best wordless lines for words the film never mentions
# reach 0.46 ("snake": "Chicken."), wordless lines on the query's subject 0.5-0.63 ("gun": "Gunfire!"
# 0.63, "It's only a cap pistol." 0.52; "police cars": "...never have seen so many cops" 0.56).
MIN_SIMILARITY = 0.5
_NOT_WORD = re.compile(r"\W+")


def _repeats(e: Evidence, kept: Evidence) -> bool:
    """`e` says again what `kept` says at the same time: one's words run whole inside the other's (an
    event quoting a line, a passage holding it), so showing both only uses up a place."""
    a, b = (f" {_NOT_WORD.sub(' ', x.text.lower()).strip()} " for x in (e, kept))
    return a.strip() != "" and b.strip() != "" and e.start < kept.end and kept.start < e.end and (a in b or b in a)


def empty_kinds(f: Film, kinds: Sequence[str]) -> list[dict[str, str]]:
    """The kinds of `kinds` the film holds no rows of, each with why: its stage has not run, was
    skipped (no captioner, no video) or found none (no speech, no on-screen text)."""
    from ..memory.schema import TABLE_OWNER
    from ..retrievers.text import SOURCES

    runs = {r.stage: r for r in f.stages()}
    out = []
    for kind in kinds:
        stage = TABLE_OWNER[SOURCES[kind].table]
        run = runs.get(stage)
        why = (f"the {stage} stage has not run" if run is None else
               f"the {stage} stage was {run.status}: {run.reason or run.error or 'no reason given'}" if run.status != "done" else
               f"the {stage} stage found none ({run.reason})" if run.rows == 0 else "")
        if why:
            out.append({"kind": kind, "why": why})
    return out


def read_range(lib: Library, film_id: str, start: float, end: float,
               kinds: Sequence[str] | str | None = None) -> dict[str, Any]:
    """Everything the memory holds about [start, end): transcript, captions, on-screen text (and
    events when asked), in time order, at most MAX_RANGE_ROWS rows."""
    from ..retrievers.window import rows_as_evidence

    f = film(lib, film_id)
    if start is None or end is None:
        raise MovieMemError("read_range needs both start and end")
    t0, t1 = seconds(start, "start", f.info.duration_s), seconds(end, "end", f.info.duration_s)
    if t1 <= t0:
        raise MovieMemError(f"empty time window: start {t0:g} s is not before end {t1:g} s")
    rows = rows_as_evidence(f.window(t0, t1), kinds_of(kinds, RANGE_KINDS, DEFAULT_RANGE_KINDS))
    return {"start": t0, "end": t1, "evidence": [evidence_json(e) for e in rows[:MAX_RANGE_ROWS]],
            "truncated": len(rows) > MAX_RANGE_ROWS, "total": len(rows)}


@dataclass
class Still:
    """One stored strip frame: the time asked for, the frame's own time, its JPEG bytes."""

    requested: float
    t: float
    frame_idx: int
    data: bytes
    mime: str


def frames(lib: Library, film_id: str, times: Sequence[float]) -> list[Still]:
    """The stored strip frame nearest to each time. Only files inside the library are read."""
    f = film(lib, film_id)
    if not isinstance(times, (list, tuple)) or not times:
        raise MovieMemError("times must be a list of 1 or more times in seconds")
    if len(times) > MAX_FRAMES:
        raise MovieMemError(f"at most {MAX_FRAMES} frames per call, not {len(times)}")
    wanted = [seconds(t, "time", f.info.duration_s) for t in times]
    if not f.store.is_local:
        raise MovieMemError("frames are served only from a local library directory")
    strip = [r for r in f.frames(strip=True) if r.image]
    if not strip:
        raise MovieMemError(f"film {f.film_id!r} has no stored frames (a film without video, or the frames "
                            "stage has not run)")
    root = f.store.root.resolve()
    out = []
    for t in wanted:
        r = min(strip, key=lambda r: (abs(r.t - t), r.t))
        path = Path(r.image).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise MovieMemError(f"frame {r.frame_idx} of {f.film_id!r} is not a file inside the library")
        mime = {".png": "image/png", ".webp": "image/webp"}.get(path.suffix.lower(), "image/jpeg")
        out.append(Still(t, round(r.t, 3), r.frame_idx, path.read_bytes(), mime))
    return out


def graph(lib: Library, film_id: str, op: str = "events", event: str | None = None, target: str | None = None,
          hops: int = 1, until: float | None = None) -> dict[str, Any]:
    """Event-graph queries: events (screen order), story_order, flashbacks, causes / effects of
    an event, the causal chain from `event` to `target`, the neighborhood of an event."""
    import warnings

    from ..graph import NarrativeGraph, NarrativeGraphWarning

    f = film(lib, film_id)
    if op not in GRAPH_OPS:
        raise MovieMemError(f"unknown graph op {op!r}; use {', '.join(GRAPH_OPS)}")
    run = next((s for s in f.stages() if s.stage == "events"), None)
    if run is None or run.status != "done":
        why = f"the events stage was skipped ({run.reason})" if run is not None else "the events stage has not run"
        raise MovieMemError(f"film {f.film_id!r} has no event graph: {why}")
    view = f.until(seconds(until, "until", f.info.duration_s, low=TIME_SLACK_S)) if until is not None else f
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrativeGraphWarning)  # returned as "problems"
        g = NarrativeGraph.from_memory(view)

    def ev(e: str) -> dict[str, Any]:
        d = g.event(e)
        return {"id": e, "start": round(d["start"], 3), "end": round(d["end"], 3), "description": d["description"],
                "story_order": d["story_order"]}

    def needs(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise MovieMemError(f"graph op {op!r} needs {name} (an event id from op 'events')")
        return value

    result: dict[str, Any] = {"op": op, "problems": list(g.problems)}
    if op == "events":
        result["events"] = [ev(e) for e in g.screen_order()]
        result["relations"] = [{k: v for k, v in r.items() if k != "rationale"} for r in g.edges()]
    elif op == "story_order":
        result["events"] = [ev(e) for e in g.story_order()]
    elif op == "flashbacks":
        result["events"] = [ev(e) for e in g.flashbacks()]
    elif op in ("causes", "effects"):
        e = needs("event", event)
        ids = g.causes_of(e) if op == "causes" else g.effects_of(e)
        result.update(event=ev(e), events=[ev(x) for x in ids])
    elif op == "chain":
        a, b = needs("event", event), needs("target", target)
        result["events"] = [ev(x) for x in g.chain(a, b)]
    else:
        sub = g.neighborhood(needs("event", event), hops=count(hops, "hops", 5))
        result["events"] = [ev(x) for x in sub.screen_order()]
        result["relations"] = [{k: v for k, v in r.items() if k != "rationale"} for r in sub.edges()]
    return result


def ask(lib: Library, film_id: str, question: str, *, backbone: str, options: Sequence[str] | None = None,
        kind: str | None = None, policy: str = "hybrid", until: float | None = None) -> dict[str, Any]:
    """Answer with a named policy on a backbone spec (callers decide which specs are allowed)."""
    from ..agents import list_policies

    f = film(lib, film_id)
    question = text(question, "question", MAX_QUESTION_CHARS)
    if not question.strip():
        raise MovieMemError("question is empty")
    if options is not None:
        if not isinstance(options, (list, tuple)) or not all(isinstance(o, str) for o in options):
            raise MovieMemError("options must be a list of strings")
        if len(options) > MAX_OPTIONS:
            raise MovieMemError(f"at most {MAX_OPTIONS} options, not {len(options)}")
    if kind is not None and kind not in ("mcq", "claim", "open"):
        raise MovieMemError(f"kind must be mcq, claim or open, not {kind!r}")
    names = [p.name for p in list_policies()]
    if policy not in names:
        raise MovieMemError(f"unknown policy {policy!r}; use {', '.join(names)}")
    cutoff = seconds(until, "until", f.info.duration_s, low=TIME_SLACK_S) if until is not None else None
    ans = f.ask(question, options=list(options) if options else None, kind=kind, policy=policy, backbone=backbone,
                until=cutoff)
    d: dict[str, Any] = ans.to_dict()
    d.pop("trace", None)
    d["evidence"] = [{k: v for k, v in e.items() if k != "retriever"} for e in d["evidence"]]
    return d


def ingest_text(lib: Library, root: Path, path: str, *, film_id: str | None = None, title: str | None = None,
                as_: str = "utterances") -> dict[str, Any]:
    """Add a film without video from a text track under `root` (the only tool that writes)."""
    from ..memory.schema import check_film_id

    if "\0" in text(path, "path", 4096):  # no file name holds one, and the OS refuses it with a ValueError
        raise MovieMemError("path holds a NUL byte; no file is named so")
    src = (root / path).resolve()
    if not src.is_relative_to(root) or not src.is_file():
        raise MovieMemError(f"{path!r} is not a file under {root}")
    if film_id is not None:
        check_film_id(film_id)  # a film id holding another source is refused by the pipeline
    if as_ not in ("utterances", "captions"):
        raise MovieMemError(f"as must be utterances or captions, not {as_!r}")
    f = lib.ingest_text(src, film_id=film_id, title=title, as_=as_)
    return {"film_id": f.film_id, "title": f.info.title, "duration_s": round(f.info.duration_s, 3)}
