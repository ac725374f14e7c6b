"""Commands that build and look at the library: ingest, import-collection, films, show, graph, export, import, delete."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from ..foundation.config import get_settings
from ..foundation.errors import MovieMemError
from . import follow
from .common import (
    JsonOpt,
    LibraryOpt,
    RayOpt,
    _film_list,
    _known_film,
    _library,
    _print_json,
    _seconds,
    _show_human,
    _span,
    _styled,
    app,
    err,
    out,
)

if TYPE_CHECKING:
    from ..library import Film


@app.command()
def ingest(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Video files (several allowed).")] = None,
    text: Annotated[Optional[Path], typer.Option("--text", help="A film without video: SRT, WebVTT, Movie101 narration or JSON cues.")] = None,
    as_: Annotated[str, typer.Option("--as", help="With --text: the track is 'utterances' (dialogue) or 'captions' (description).")] = "utterances",
    duration: Annotated[Optional[float], typer.Option(help="With --text: film length in seconds (default: the last cue's end).")] = None,
    film_id: Annotated[Optional[str], typer.Option("--film-id", help="Film id (default: a slug of the file name).")] = None,
    title: Annotated[Optional[str], typer.Option(help="Title.")] = None,
    year: Annotated[Optional[int], typer.Option(help="Release year.")] = None,
    subtitles: Annotated[Optional[Path], typer.Option(help="SRT or WebVTT file that replaces ASR.")] = None,
    captions: Annotated[Optional[Path], typer.Option(help="Captions to import (SRT, WebVTT, JSON, Movie101 h:m:s|h:m:s|text); with --text, a description track beside its dialogue.")] = None,
    encoding: Annotated[Optional[str], typer.Option(help="Text encoding of text files (default UTF-8).")] = None,
    stages: Annotated[Optional[str], typer.Option(help="Comma-separated stages to (re)run.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a different source already under this film id.")] = False,
    captioner: Annotated[Optional[str], typer.Option(help="Backbone spec that captions frames and clips (e.g. gemini:gemini-3-flash).")] = None,
    backbone: Annotated[Optional[str], typer.Option(help="Text backbone for events, relations and narration; with one, the events stage refines the rule graph with it (see --events-mode) and the characters stage asks it to name the voices the rules left unnamed.")] = None,
    events_mode: Annotated[Optional[str], typer.Option("--events-mode", help="With --backbone: 'refine' (default: the model checks the rule graph's candidate links) or 'extract' (the model extracts events and links anew; about an hour a feature film with a local model).")] = None,
    ray: RayOpt = None,
    ray_resources: Annotated[Optional[str], typer.Option("--ray-resources", help='With --ray: JSON of Ray resources per stage, e.g. \'{"transcript": {"num_gpus": 0.5}}\'.')] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress on stderr (a terminal shows bars, a log plain lines with a heartbeat every progress_interval_s).")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build (or update) the memory of one or more films."""
    paths = paths or []
    if text is not None and paths:
        raise MovieMemError("give either video paths or --text, not both")
    if text is None and (duration is not None or as_ != "utterances"):
        raise MovieMemError("--duration and --as apply to --text films; a video's length and tracks come from the file")
    if text is not None and subtitles is not None:
        raise MovieMemError("--subtitles replaces a video's speech recognition; a --text film's dialogue is the "
                            "--text file itself")
    if text is None and not paths:
        raise MovieMemError("nothing to ingest: give video paths or --text FILE")
    if len(paths) > 1 and (film_id or subtitles or captions):
        raise MovieMemError("--film-id, --subtitles and --captions apply to one film; give one path")
    if events_mode not in (None, "refine", "extract"):
        raise MovieMemError(f"--events-mode is 'refine' or 'extract', not {events_mode!r}")
    lib = _library(library, create=True, captioner=captioner, backbone=backbone,
                   **({"events_mode": events_mode} if events_mode else {}))
    if events_mode and not ("backbone" in lib.settings.model_fields_set and lib.settings.backbone):
        raise MovieMemError("--events-mode chooses what a model does with the event graph; give --backbone (or "
                            "$MOVIEMEM_BACKBONE), or leave it out for the rule graph")
    stage_list = [s.strip() for s in stages.split(",") if s.strip()] if stages else None
    if ray is not None or ray_resources is not None:
        if text is not None:
            raise MovieMemError("--ray ingests video files; --text films are ingested locally")
        if ray is None:
            raise MovieMemError("--ray-resources needs --ray ADDRESS")
        jobs = [dict(path=p, film_id=film_id, title=title, year=year, subtitles=subtitles, captions=captions,
                     encoding=encoding) for p in paths]
        _ingest_on_ray(lib, jobs, ray, ray_resources, stages=stage_list, replace=replace, as_json=as_json)
        return
    summaries = []
    with follow.films_shown(quiet, "ingest", total=1 if text is not None else len(paths)) as shown:  # issue 61
        if text is not None:
            films_done: Iterable[Film] = [lib.ingest_text(text, film_id=film_id, title=title, year=year, as_=as_,
                                          duration_s=duration, captions=captions, encoding=encoding, stages=stage_list,
                                          replace=replace, reporter=shown.reporter(film_id or text.stem))]
        else:
            films_done = (lib.ingest(p, film_id=film_id, title=title, year=year, subtitles=subtitles, captions=captions,
                                     encoding=encoding, stages=stage_list, replace=replace,
                                     reporter=shown.reporter(film_id or p.stem)) for p in paths)
        for film in films_done:
            shown.done(film.film_id)
            summaries.append(film.summary())
            if not as_json:
                _show_human(summaries[-1])
    if as_json:
        _print_json(summaries[0] if len(summaries) == 1 else {"films": summaries})


def _ingest_on_ray(lib: Any, jobs: list[dict[str, Any]], address: str, resources: str | None, *,
                   stages: list[str] | None, replace: bool, as_json: bool) -> None:
    """`ingest --ray`: one chain of Ray tasks per film; failures are listed, the others go on."""
    from ..scale.cluster import parse_address, session

    parse_address(address)
    try:
        res = json.loads(resources) if resources else None
    except ValueError as exc:
        raise MovieMemError(f"--ray-resources is not JSON: {exc}") from None
    if res is not None and not isinstance(res, dict):
        raise MovieMemError('--ray-resources must be a JSON object like {"transcript": {"num_cpus": 4}}')
    from ..scale.ray_ingest import FilmJob, IngestProgress, ingest_films

    with session(address) as cluster:
        err.print(cluster.line(), highlight=False)
        with IngestProgress(err, len(jobs)) as show:
            outcomes = ingest_films(lib.path, [FilmJob(**j) for j in jobs], settings=lib.settings, stages=stages,
                                    replace=replace, resources=res, on_event=show.event, on_film=show.film)
    # a fresh handle: tables opened before the workers committed would not see their rows
    fresh = _library(Path(lib.path), captioner=lib.settings.captioner, backbone=lib.settings.backbone,
                     events_mode=lib.settings.events_mode)
    summaries = [fresh.film(o.film_id).summary() for o in outcomes if o.ok]
    failed = [o for o in outcomes if not o.ok]
    if as_json:
        _print_json({"films": summaries, "failed": [o.to_dict() for o in failed]})
    else:
        for s in summaries:
            _show_human(s)
    if failed:
        raise MovieMemError(f"{len(failed)} of {len(outcomes)} film(s) failed (rerun to resume them): "
                            + "; ".join(f"{o.film_id}: {o.error}" for o in failed[:3]) + ("; ..." if len(failed) > 3 else ""))


@app.command("import-collection")
def import_collection(
    kind: Annotated[str, typer.Argument(help="mf2 or movie101.")],
    root: Annotated[Path, typer.Argument(help="The release folder.")],
    limit: Annotated[Optional[int], typer.Option(help="Import only the first N films.")] = None,
    encoding: Annotated[Optional[str], typer.Option(help="The release's text encoding where it is not UTF-8 (e.g. cp1252).")] = None,
    release: Annotated[Optional[Path], typer.Option(help="mf2: a copy of the MF² release (deep-spin/MF2); each film's title and year come from its templates/prompt_utils.py (MOVIES_DICT, read as data).")] = None,
    films_: Annotated[Optional[str], typer.Option("--films", help="Import only these films: the release's numbers (or film ids), comma-separated, e.g. 6,51.")] = None,
    quiet_: Annotated[bool, typer.Option("--quiet", help="No progress on stderr (a terminal shows a bar, a log a line per film and a heartbeat every progress_interval_s).")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import every film of a text-only release (MF² transcripts, Movie101v2 narrations)."""
    from ..ingest.collections import parse_films
    from ..ingest.texttracks import text_encoding

    picked = parse_films(films_) if films_ is not None else None  # checked before the library is made
    if encoding is not None:
        text_encoding(encoding)
    lib = _library(library, create=True)
    with follow.collection_shown(quiet_, f"importing {kind}") as (quiet, on_film):  # issue 61: bar, log lines or none
        films = lib.import_collection(kind, root, limit=limit, reporter=quiet, encoding=encoding, on_film=on_film,
                                      release=release, films=picked)
    for w in quiet.warnings:
        _styled(err, "yellow", "warning:", f" {w}")
    items = [{"film_id": f.film_id, "title": f.info.title, "year": f.info.year, "duration_s": f.info.duration_s,
              "utterances": f.arrow("utterances").num_rows, "captions": f.arrow("captions").num_rows} for f in films]
    if as_json:
        _print_json({"collection": kind, "films": items})
    else:
        err.print(f"imported {len(items)} films from {root}")


@app.command()
def films(library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """List the films in the library."""
    items = _film_list(library)
    if as_json:
        _print_json({"films": items})
        return
    t = Table("film_id", "title", "year", "duration", box=None)
    for i in items:
        t.add_row(i["film_id"], i["title"], str(i["year"] or ""), f"{i['duration_s']:.0f} s")
    out.print(t)


@app.command()
def show(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Summarise one film's memory: counts, frame pools and stage provenance."""
    from ..memory.catalog import saved

    _known_film(library, film)
    summary = saved(get_settings(library=library).library_dir, f"show {film}", lambda: _library(library).film(film).summary())
    if as_json:
        _print_json(summary)
        return
    _show_human(summary)
    if not summary.get("has_video", True):
        missing = [k for k in ("captions", "onscreen") if not summary["counts"].get(k)]
        if missing:
            out.print(f"  a text film: no {' or '.join(missing)} rows (no video to read them from); `search` and the "
                      "other read commands use its dialogue", highlight=False)


@app.command()
def search(
    film: Annotated[str, typer.Argument(help="Film id.")],
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    kinds: Annotated[Optional[str], typer.Option("--kinds", help="Comma-separated: utterance, caption, onscreen, event, passage (default: all but passage).")] = None,
    k: Annotated[int, typer.Option("--k", help="How many results (1-100).")] = 10,
    until: Annotated[Optional[str], typer.Option(help="Only what is shown by this time (seconds or h:mm:ss).")] = None,
    start: Annotated[Optional[str], typer.Option(help="Window start (seconds or h:mm:ss).")] = None,
    end: Annotated[Optional[str], typer.Option(help="Window end (seconds or h:mm:ss).")] = None,
    retriever: Annotated[Optional[str], typer.Option("--retriever", help="Rank with a registered question-level retriever instead (the hybrid policy's `hybrid`, or a plug-in's; `moviemem retrieval-eval --list` names them): the evidence a policy would be offered.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search a film's memory with no model, as the MCP search tool does: timestamped evidence, best first.

    Each hit says why it was found: words, how many of the query's words it holds (word stems; words such as
    'the' and 'is' are not counted), and similar, its similarity in meaning to the query (the cosine of their
    text embeddings: 1 is the same meaning, 0.5 and above is on the same subject; - where it is not among the
    100 nearest). A hit with none of the words
    and a similarity under 0.5 is no match and is left out; a line that repeats a better hit (an event
    quoting it) is shown once. --json adds the rank-fusion score that orders the hits."""
    _known_film(library, film)
    from ..serve.film_tools import MIN_SIMILARITY
    from ..serve.film_tools import search as search_film

    times = {name: _seconds(v, f"--{name}") if v is not None else None for name, v in (("until", until), ("start", start), ("end", end))}
    if retriever is not None:
        if kinds is not None:
            raise MovieMemError("--kinds and --retriever do not go together: the retriever chooses its channels")
        _print_retrieved(_library(library), film, query, retriever, k, times, as_json)
        return
    found = search_film(_library(library), film, query, k=k, kinds=kinds, **times)
    if as_json:
        _print_json(found)
        return
    t = Table(box=None, pad_edge=False)
    for head in ("id", "time", "words", "similar"):
        t.add_column(head, no_wrap=True)
    t.add_column("text")
    for e in found["evidence"]:
        matched, of = e["words"]
        t.add_row(e["id"], _span(e["start"], e["end"]), f"{matched}/{of}",
                  "-" if e["similarity"] is None else f"{e['similarity']:.2f}", " / ".join(e["text"].splitlines()))
    out.print(t) if found["evidence"] else err.print(f"no match for {query!r} in {film}", highlight=False)
    if found["dropped"]:
        err.print(f"{found['dropped']} hit(s) left out: none of the query's words and a similarity under {MIN_SIMILARITY}")
    # what a film lacks is said once, by `show`; here only for the kinds the user asked for by name
    for empty in found["empty_kinds"] if kinds is not None else []:
        err.print(f"no {empty['kind']} rows ({empty['why']})", highlight=False, soft_wrap=True)


def _print_retrieved(lib: Any, film: str, query: str, retriever: str, k: int, times: dict[str, Any], as_json: bool) -> None:
    from ..serve.film_tools import retrieve

    found = retrieve(lib, film, query, retriever, k=k, **times)
    if as_json:
        _print_json(found)
        return
    t = Table(box=None, pad_edge=False)
    for head in ("id", "time", "score"):
        t.add_column(head, no_wrap=True)
    t.add_column("text")
    for e in found["evidence"]:
        t.add_row(e["id"], _span(e["start"], e["end"]), f"{e['score']:.3f}", " / ".join(e["text"].splitlines()))
    out.print(t) if found["evidence"] else err.print(f"{retriever} found nothing for {query!r} in {film}", highlight=False)


@app.command()
def graph(
    film: Annotated[str, typer.Argument(help="Film id.")],
    graphml: Annotated[Optional[Path], typer.Option("--graphml", help="Write the graph as GraphML to this file.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The film's narrative event graph: events, relations, flashbacks (node-link JSON with --json)."""
    import warnings

    _known_film(library, film)
    from ..graph import NarrativeGraphWarning
    from ..graph.rule_graph import SCREEN_ORDER

    memory = _library(library).film(film)
    run = next((s for s in memory.stages() if s.stage == "events"), None)
    if run is None or run.status != "done":
        why = f"the events stage was skipped ({run.reason})" if run is not None else "the events stage has not run"
        raise MovieMemError(f"film {film!r} has no event graph: {why}; run `moviemem ingest ... --stages events`")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrativeGraphWarning)  # reported below, once
        g = memory.graph()
    for p in g.problems:
        _styled(err, "yellow", "warning:", f" {p}")
    if graphml is not None:
        err.print(f"wrote {g.to_graphml(graphml)}")
    if as_json:
        _print_json(g.to_json())
        return
    if graphml is not None:
        return
    only_order = sum(edge["rule"] == SCREEN_ORDER for edge in g.edges())
    out.print(f"graph made by {g.made_by()}: {len(g)} events, {g.nx.number_of_edges()} relations"
              f" ({only_order} only screen order: 'before' because one is shown after the other)", highlight=False)
    t = Table("event", "screen", "story", "trigger", "description", box=None, pad_edge=False)
    story = {e: i for i, e in enumerate(g.story_order())}
    for e in g.events():
        t.add_row(e["id"], f"{e['start']:.0f}-{e['end']:.0f} s", str(story[e["id"]]), e["trigger"], e["description"])
    out.print(t)
    r = Table("source", "type", "target", "confidence", "rule", "rationale", box=None, pad_edge=False)
    for edge in g.edges():
        kind = f"{edge['type']} (screen order only)" if edge["rule"] == SCREEN_ORDER else edge["type"]
        r.add_row(edge["source"], kind, edge["target"], f"{edge['confidence']:.2f}", edge["rule"] or edge["made_by"],
                  edge["rationale"])
    out.print(r)
    if g.flashbacks():
        out.print("flashbacks: " + ", ".join(g.flashbacks()))


@app.command("export")
def export_cmd(film: str, out_path: Annotated[Path, typer.Argument(metavar="OUT.tar")], library: LibraryOpt = None) -> None:
    """Write one film's memory to a tar bundle."""
    _known_film(library, film)
    path = _library(library).export(film, out_path)
    err.print(f"exported {film} to {path}")


@app.command("import")
def import_cmd(
    bundle: Path,
    film_id: Annotated[Optional[str], typer.Option("--film-id", help="Import under another id.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a film of the same id.")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import a film bundle written by `moviemem export`."""
    film = _library(library, create=True).import_bundle(bundle, film_id=film_id, replace=replace)
    _print_json(film.summary()) if as_json else err.print(f"imported {film.film_id}")


@app.command()
def delete(film: str, library: LibraryOpt = None) -> None:
    """Remove a film's memory from the library."""
    _known_film(library, film)
    _library(library).delete(film)
    err.print(f"deleted {film}")


