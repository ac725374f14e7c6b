"""`moviemem scenes FILM`: the film's table of contents (scenes with their summaries and names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

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
def scenes(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """The film's scenes: time span, characters and a summary of each (extractive, or a model's)."""
    data = scenes_json(_library(library).film(_known_film(library, film)))
    _print_json(data) if as_json else print_scenes(data, out)
