"""`moviemem characters FILM`: the character registry of one film, as a table or JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .common import JsonOpt, LibraryOpt, _known_film, _library, _print_json, app, err, out

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
        name_link = next((lk for lk in c["links"] if lk["kind"] == "name" and lk["evidence"]), None)
        how = f"{name_link['confidence']:.2f}: {name_link['evidence'][0]}" if name_link else "-"
        rows.append(f"{c['id']:<5} {c['name'][:20]:<20} {c['lines']:>5} {c['screen_time_s']:>6.0f}s {c['first_s']:>7.1f}s "
                    f"{c['last_s']:>7.1f}s {'-' if c['voice'] is None else c['voice']:>5} "
                    f"{'-' if c['face'] is None else c['face']:>4}  {how[:90]}")
        rows += [f"{'':<6}{line}" for line in _why(c)]
    return rows


def _why(c: dict[str, Any]) -> list[str]:
    """The evidence under a character: its other names and the rule that joined them, and the rules
    its attributed lines came from."""
    out = []
    others = [n for n in c["names"] if n != c["name"]]
    if others:
        rules = sorted({lk.get("rule", "") for lk in c["links"] if lk["kind"] == "alias"} - {""})
        out.append(f"also {', '.join(others)}" + (f" (by {', '.join(rules)})" if rules else ""))
    speech = next((lk for lk in c["links"] if lk["kind"] == "speech"), None)
    if speech:
        reasons = ", ".join(f"{r} {n}" for r, n in speech.get("reasons", {}).items())
        out.append(f"lines by rule: {reasons}; mean confidence {speech['confidence']:.2f}")
    return out


@app.command()
def characters(film: Annotated[str, typer.Argument(help="Film id.")], library: LibraryOpt = None,
               as_json: JsonOpt = False,
               merge: Annotated[Optional[str], typer.Option("--merge", help="Names of one person, comma-separated ('Ted,Spencer'): their characters become one. Stored in the library (overrides/FILM.characters.json) and applied on every rebuild.")] = None,
               split: Annotated[Optional[str], typer.Option("--split", help="A name to take out of the character holding it (a wrong merge undone): it becomes a character of its own. Stored and applied like --merge.")] = None) -> None:
    """The film's characters: names, lines, screen time, first/last appearance, voice and face clusters.

    Each merge of two names into one person says why (`alias` links: the synopsis, a full name in the
    dialogue, the user) and each attributed line its reason and confidence (`speech` links)."""
    film = _known_film(library, film)
    if merge is not None or split is not None:
        _override(library, film, merge, split)
    memory = _library(library).film(film)
    if as_json:
        _print_json(characters_json(memory))
    else:
        for line in characters_lines(memory):
            out.print(line, highlight=False)


def _override(library: Any, film: str, merge: str | None, split: str | None) -> None:
    """Stores the user's merge or split and rebuilds the film's characters and scenes with it."""
    from ..characters.overrides import load_overrides, overrides_path, save_overrides
    from .rebuild import check_rebuildable, rebuild

    lib = _library(library)
    check_rebuildable(lib, film)  # before anything is written
    path = overrides_path(lib.store.root, film)
    ov = load_overrides(path)
    if merge is not None:
        ov.add_merge(merge.split(","))
    if split is not None:
        ov.add_split(split)
    save_overrides(path, ov)
    rebuild(lib, film, ["characters", "scenes"])
    err.print(f"overrides for {film} in {path}: {len(ov.merge)} merge(s), {len(ov.split)} split(s)", highlight=False)
