"""`moviemem scenes FILM`: the film's table of contents (scenes with their summaries and names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..foundation.errors import MovieMemError
from .common import JsonOpt, LibraryOpt, _known_film, _library, _print_json, _span, app, out

if TYPE_CHECKING:  # annotation only: the command module must not import LanceDB at start
    from ..memory.view import FilmMemory


def scenes_json(film: FilmMemory) -> dict[str, Any]:
    """The scenes stage's result: one object per scene (`story`: its place in story time, from the
    event graph), plus the stage's run."""
    run = next((s for s in film.stages() if s.stage == "scenes"), None)
    if run is None or run.status != "done":
        why = f"the scenes stage was skipped ({run.reason})" if run is not None else "the scenes stage has not run"
        raise MovieMemError(f"film {film.film_id!r} has no scenes: {why}; run `moviemem ingest ...` again")
    from ..memory.overview import story_places

    rows = film.scenes()
    story = story_places(rows, film.events())
    return {"film_id": film.film_id, "title": film.info.title, "note": run.reason,
            "scenes": [{"scene": s.scene_idx + 1, "story": story[s.scene_idx], "start": s.start, "end": s.end,
                        "summary": s.summary, "how": s.how, "characters": list(s.characters), "lines": list(s.lines),
                        "n_lines": s.n_lines} for s in rows]}


def print_scenes(data: dict[str, Any], console: Console) -> None:
    t = Table("scene", "story", "time", "characters", "summary", box=None, pad_edge=False)
    for s in data["scenes"]:
        t.add_row(str(s["scene"]), str(s["story"]), _span(s["start"], s["end"]), ", ".join(s["characters"][:4]),
                  s["summary"])
    console.print(t)
    console.print(f"{len(data['scenes'])} scenes ({data['note']})", highlight=False)


@app.command()
def scenes(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None, as_json: JsonOpt = False,
           summarizer: Annotated[Optional[str], typer.Option("--summarizer", help="A text backbone (`local` for the offline one) that writes a short summary of each scene first: through the library's replay cache, so a stopped run resumes where it was; its cost is in the scenes stage's note (`moviemem show`).")] = None) -> None:
    """The film's scenes: time span, characters and a summary of each (extractive, or a model's)."""
    film = _known_film(library, film)
    if summarizer is not None:
        from .rebuild import rebuild

        if not summarizer.strip():
            raise MovieMemError("--summarizer takes a backbone spec, e.g. local")
        lib = _library(library, backbone=summarizer)
        rebuild(lib, film, ["scenes"])
    data = scenes_json(_library(library).film(film))
    _print_json(data) if as_json else print_scenes(data, out)
