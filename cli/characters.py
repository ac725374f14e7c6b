"""`moviemem characters FILM`: the character registry of one film, as a table or JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import JsonOpt, LibraryOpt, _known_film, _library, _print_json, app, out

if TYPE_CHECKING:  # annotation only: the command module must not import LanceDB at start
    from ..memory.view import FilmMemory


def characters_json(film: FilmMemory) -> dict[str, Any]:
    """The `--json` object: {"characters": [{id, name, names, lines, screen_time_s, first_s, last_s,
    voice, face, confidence, links}]}; voice/face are cluster numbers or null."""
    out = []
    for c in sorted(film.characters(), key=lambda c: (c.first_s, c.char_id)):
        out.append({"id": c.char_id, "name": c.name, "names": list(c.names), "lines": c.lines,
                    "screen_time_s": c.screen_time_s, "first_s": c.first_s, "last_s": c.last_s,
                    "voice": c.voice if c.voice >= 0 else None, "face": c.face if c.face >= 0 else None,
                    "confidence": c.confidence, "links": json.loads(c.links or "[]")})
    return {"characters": out}


def characters_lines(film: FilmMemory) -> list[str]:
    """Human-readable registry, one character a line, with how each name was found."""
    data = characters_json(film)["characters"]
    if not data:
        stages = {s.stage: s for s in film.stages()}
        run = stages.get("characters")
        why = "the characters stage has not run (moviemem ingest ... --stages characters)" if run is None else \
            f"the characters stage found none ({run.reason or run.status})"
        return [f"no characters: {why}"]
    rows = [f"{'id':<5} {'name':<20} {'lines':>5} {'screen':>7} {'first':>8} {'last':>8} {'voice':>5} {'face':>4}  name from"]
    for c in data:
        name_link = next((lk for lk in c["links"] if lk["kind"] == "name"), None)
        how = f"{name_link['confidence']:.2f}: {name_link['evidence'][0]}" if name_link and name_link["evidence"] else "-"
        rows.append(f"{c['id']:<5} {c['name'][:20]:<20} {c['lines']:>5} {c['screen_time_s']:>6.0f}s {c['first_s']:>7.1f}s "
                    f"{c['last_s']:>7.1f}s {'-' if c['voice'] is None else c['voice']:>5} "
                    f"{'-' if c['face'] is None else c['face']:>4}  {how[:90]}")
    return rows


@app.command()
def characters(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None,
               as_json: JsonOpt = False) -> None:
    """The film's characters: names, lines, screen time, first/last appearance, voice and face clusters."""
    memory = _library(library).film(_known_film(library, film))
    if as_json:
        _print_json(characters_json(memory))
    else:
        for line in characters_lines(memory):
            out.print(line, highlight=False)
