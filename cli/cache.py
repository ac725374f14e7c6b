"""`moviemem cache`: the llama.cpp prompt states saved on disk (a film's transcript read once per machine)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from ..foundation.config import get_settings
from .common import JsonOpt, LibraryOpt, _print_json, app, err, out

cache_app = typer.Typer(invoke_without_command=True, rich_markup_mode=None,
                        help="Saved prompt states of local models: `moviemem cache` lists them, `moviemem cache clear` removes them.")
app.add_typer(cache_app, name="cache")


def _states(library: Path | None) -> Any:
    from ..backbones.prefix_states import open_states

    return open_states(get_settings(library=library).library_dir / "cache", library=library)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


@cache_app.callback()
def cache_list(ctx: typer.Context, library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """List the saved prompt states: film, backbone, tokens, size on disk and last use, most recent first."""
    if ctx.invoked_subcommand is not None:
        return
    from ..backbones.prefix_states import listing

    states = _states(library)
    rows = listing(states)
    total = sum(r["bytes"] for r in rows)
    if as_json:
        _print_json({"folder": str(states.folder), "max_bytes": states.max_bytes, "bytes": total, "states": rows})
        return
    t = Table("film", "backbone", "tokens", "size", "last use", box=None, pad_edge=False)
    for r in rows:
        t.add_row(r["film"] or "?", r["backbone"] or "?", f"{r['tokens']:,}", _size(r["bytes"]),
                  time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_use"])))
    if rows:
        out.print(t)
    err.print(f"{len(rows)} state(s), {_size(total)} of {_size(states.max_bytes)} in {states.folder}", highlight=False)


@cache_app.command("clear")
def cache_clear(library: LibraryOpt = None,
                film: Annotated[Optional[str], typer.Option("--film", help="Only this film's states.")] = None,
                as_json: JsonOpt = False) -> None:
    """Remove the saved prompt states (all, or one film's); the next question on a film reads it again."""
    states = _states(library)
    removed, freed = states.clear(film)
    if as_json:
        _print_json({"folder": str(states.folder), "removed": removed, "bytes": freed})
        return
    err.print(f"removed {removed} state(s), {_size(freed)}, from {states.folder}", highlight=False)
