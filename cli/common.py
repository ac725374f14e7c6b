"""What every command shares: the Typer app, the consoles, the common options and small helpers."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from ..foundation.config import get_settings
from ..foundation.errors import MovieMemError
from ..foundation.secrets import install_log_scrubbing, scrub, scrub_std_streams
from ..foundation.timefmt import check_time, hms

if TYPE_CHECKING:
    from ..backbones import Backbone
    from ..foundation.progress import Reporter
    from ..library import Library

HELP = ("A queryable memory of a full-length film, and agent policies that answer from it. Errors print one line "
        "on stderr and exit 2; --json prints one JSON object on stdout (progress and warnings go to stderr).")

# `moviemem --help` lists the commands in the order a user meets them: build the memory, look at it, ask
# and search, measure, then the tools around it; a command left out here comes last.
COMMAND_ORDER = ("ingest", "import-collection", "films", "show", "ask", "search", "scenes", "characters", "graph",
                 "bench", "report", "inspect", "show-call", "judge", "retrieval-eval", "filter", "policies", "backbones",
                 "describe", "narrate", "export", "import", "delete", "models", "doctor", "mcp", "serve", "letta", "synth", "demo")


class _UserOrder(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER))


# Help text is plain (no Rich markup or emoji codes): "hybrid[budget_tokens=900]" and "h:m:s" print as written.
app = typer.Typer(cls=_UserOrder, add_completion=False, no_args_is_help=True, help=HELP, pretty_exceptions_enable=False,
                  rich_markup_mode=None)
models_app = typer.Typer(no_args_is_help=True, help="Offline model weights.", rich_markup_mode=None)
app.add_typer(models_app, name="models")


class ScrubbedConsole(Console):
    """A console that prints no secret (foundation.secrets): the text given is scrubbed before it is laid
    out (a key wrapped over two lines would be two pieces), and what it writes is scrubbed again."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(_scrubbed(o) for o in objects), **kwargs)

    def _render_buffer(self, buffer: Any) -> str:
        return scrub(super()._render_buffer(buffer))


def _scrubbed(obj: Any) -> Any:
    """A string or Text scrubbed (a Text that changes keeps its base style, not its inner spans)."""
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, Text):
        clean = scrub(obj.plain)
        return obj if clean == obj.plain else Text(clean, style=obj.style)
    return obj


# Titles, questions, model replies and paths are data, never markup: styles come from Text parts only.
out = ScrubbedConsole(markup=False, emoji=False)
err = ScrubbedConsole(stderr=True, markup=False, emoji=False)


def _styled(console: Console, style: str, head: str, rest: str = "") -> None:
    """Print `head` in `style`, then `rest` plain, without reading either as markup."""
    console.print(Text.assemble((head, style), rest), highlight=False)

LibraryOpt = Annotated[Optional[Path], typer.Option("--library", help="Library directory (default $MOVIEMEM_LIBRARY, else ~/.moviemem/library).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
RayOpt = Annotated[Optional[str], typer.Option("--ray", help="Run on Ray: auto, local, ray://HOST:PORT or HOST:PORT (docs/scale.md).")]


def _print_version(value: bool) -> None:
    if value:
        from ..foundation._version import __version__

        out.print(f"moviemem {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
          config: Annotated[Optional[Path], typer.Option("--config", help="Read settings from this moviemem.toml (as $MOVIEMEM_CONFIG).")] = None) -> None:
    """Heavy libraries (LanceDB, torch, model backends) are imported inside the commands that use them, so
    `--help`, `--version` and the quick commands start fast."""
    if config is not None:
        os.environ["MOVIEMEM_CONFIG"] = str(config)  # every Settings() of this process reads it
    scrub_std_streams()  # whatever a command prints (print, sys.stdout.write, a console) leaves scrubbed
    install_log_scrubbing()  # and so does every log line


def _library(path: Path | None, *, create: bool = False, **overrides: Any) -> Library:
    """The library at `path`; only commands that add films (`create`) make one that does not exist."""
    from ..library import Library

    settings = get_settings(library=path, **overrides)
    return Library(settings.library_dir, settings, create=create)


def _film_list(library: Path | None) -> list[dict[str, Any]]:
    """`moviemem films`: saved while the library is unchanged, so no LanceDB import."""
    from ..memory.catalog import saved

    return saved(get_settings(library=library).library_dir, "films", lambda: [
        {"film_id": f.film_id, "title": f.title, "year": f.year, "duration_s": round(f.duration_s, 3)}
        for f in _library(library).films()])


def _known_film(library: Path | None, film: str) -> str:
    """`film` when the library holds it, else the one-line error naming the nearest ids: checked first, from
    the saved film list, so a typo is told at once rather than after LanceDB and the models are imported."""
    from ..memory.catalog import unknown_film

    ids = [f["film_id"] for f in _film_list(library)]
    if film not in ids:
        raise unknown_film(film, ids, "`moviemem films`")
    return film


def _print_json(obj: Any) -> None:
    """One JSON object on stdout; never NaN or Infinity, which are not JSON (a reader of it would fail)."""
    from ..foundation.numbers import finite_json

    sys.stdout.write(scrub(finite_json(obj)) + "\n")


def _print_paths(paths: dict[str, Any], as_json: bool) -> None:
    """The files a command wrote: a JSON object, or one aligned line each."""
    if as_json:
        _print_json({k: str(v) for k, v in paths.items()})
    else:
        for k, v in paths.items():
            out.print(f"{k:>10}  {v}")


def _reporter(quiet: bool) -> Reporter:
    from ..foundation.progress import QuietReporter, RichReporter

    return QuietReporter() if quiet else RichReporter(err)


def _show_human(summary: dict[str, Any]) -> None:
    title = f"{summary['film_id']}: {summary.get('title') or ''} ({summary.get('year') or '?'}), {summary['duration_s']:.1f} s"
    _styled(out, "bold", title)
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
    out.print(f"  {counts}")
    if summary["pools"]:
        out.print("  frame pools: " + ", ".join(f"{k}: {v}" for k, v in summary["pools"].items()))
    t = Table("stage", "status", "took", "model", "params", "reason", box=None, pad_edge=False)
    for s in summary["stages"]:
        took = f"{s['seconds']:.1f} s" if s.get("seconds") is not None and s["status"] == "done" else ""
        t.add_row(s["stage"], s["status"], took, s["model"], s["params_hash"][:8], s["reason"])
    out.print(t)




def _policy_settings(items: list[str] | None) -> dict[str, Any]:
    """--set key=value pairs; values read as JSON where they parse (8, true, [1,2]), else text."""
    from ..agents.registry import setting_value

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise MovieMemError(f"--set takes key=value, not {item!r}")
        out[key.strip()] = setting_value(raw)
    return out


def _seconds(value: str, what: str) -> float:
    """'95', '1:35' or '0:01:35.5' as seconds (minutes and seconds under 60; a film time, checked once here)."""
    try:
        parts = [float(p) for p in value.strip().split(":")]
    except ValueError:
        parts = []
    if not parts or len(parts) > 3 or any(p < 0 for p in parts) or any(p >= 60 for p in parts[1:]):
        raise MovieMemError(f"{what} must be seconds or h:mm:ss, not {value!r}")
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return check_time(total, what)


def _span(start: float, end: float) -> str:
    """A stretch of film as people read it, H:MM:SS.d-H:MM:SS.d (as the explorer shows it); --json keeps seconds."""
    return f"{hms(start, tenths=True)}-{hms(end, tenths=True)}"


def _csv(value: str | None) -> list[str]:
    """A comma-separated list; commas inside brackets belong to one item ('hybrid[a=1,b=2],closed-book')."""
    return [v.strip() for v in re.split(r",(?![^\[]*\])", value or "") if v.strip()]


def _open_backbone(lib: Any, spec: str | None) -> Backbone:
    """`spec` (default: the library's backbone setting) behind the library's replay cache."""
    from ..backbones.registry import open_for_library

    s = lib.settings
    return open_for_library(spec or s.backbone, lib.store.root if lib.store.is_local else None, s.cache_mode)
