"""Commands that answer from a film: ask, policies, describe, narrate."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..foundation.errors import MovieMemError
from . import follow

if TYPE_CHECKING:
    from ..agents.types import Answer, Step
    from ..library import Film, Library
from .common import (
    JsonOpt,
    LibraryOpt,
    _known_film,
    _library,
    _open_backbone,
    _policy_settings,
    _print_json,
    _reporter,
    _seconds,
    _span,
    _styled,
    app,
    err,
    out,
)


def _open_film(library: Path | None, film: str) -> tuple[Library, Film]:
    """The library and one film of it, the film checked against the saved list first (a typo told at once)."""
    _known_film(library, film)
    lib = _library(library)
    return lib, lib.film(film)


@app.command()
def ask(
    film: Annotated[str, typer.Argument(help="Film id.")],
    question: Annotated[str, typer.Argument(help="The question (or the claim, with --kind claim).")],
    option: Annotated[Optional[list[str]], typer.Option("--option", help="An answer option (repeat for each, in order A, B, ...).")] = None,
    kind: Annotated[Optional[str], typer.Option(help="mcq, claim or open (default: mcq with options, else open).")] = None,
    policy: Annotated[str, typer.Option(help="Policy (see `moviemem policies`); settings as name[key=value,...] or --set.")] = "hybrid",
    backbone: Annotated[str, typer.Option(help="Backbone spec (e.g. local, gemini:gemini-3-flash).")] = "local",
    until: Annotated[Optional[str], typer.Option(help="Show the policy only what is on screen by this time (seconds or h:mm:ss).")] = None,
    setting: Annotated[Optional[list[str]], typer.Option("--set", help="Override a policy setting: key=value (repeatable).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress on stderr (a terminal shows the steps, a log plain lines with a heartbeat every progress_interval_s).")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question about a film with a policy and a backbone, citing evidence."""
    _known_film(library, film)
    f = _library(library).film(film)
    cutoff = _seconds(until, "--until") if until is not None else None
    with _steps_shown(err, quiet), follow.ask_lines(quiet, policy, backbone, film):  # issue 61: a log gets lines
        ans = f.ask(question, options=option or None, kind=kind, policy=policy, backbone=backbone, until=cutoff,
                    **_policy_settings(setting))
    if as_json:
        _print_json(ans.to_dict())
        return _no_reply(ans)
    if ans.invalid:
        _styled(out, "bold red", "invalid", f" ({ans.error})")
    else:
        conf = f" (confidence {ans.confidence:.2f})" if ans.confidence is not None else ""
        head = f"{ans.choice}. " if ans.choice and ans.choice not in ("TRUE", "FALSE") else (f"{ans.choice}: " if ans.choice else "")
        _styled(out, "bold", f"{head}{ans.text}", conf)
    if not ans.grounded and not ans.invalid:
        _styled(err, "yellow", "note:", " the model was shown no evidence from the film: this answer is a guess")
    for e in ans.evidence[:8]:  # cited evidence comes first, marked with *
        text = " / ".join(e.text.splitlines())
        out.print(f"{'*' if e.cited else ' '} {e.kind:<9} {_span(e.start, e.end):<19} {text[:100]}", highlight=False)
    u = ans.usage
    replay = " (replayed from the cache: the original calls' latency)" if ans.replayed else (
        f" ({ans.replayed_calls} of {ans.calls} calls replayed from the cache)" if ans.replayed_calls else "")
    err.print(f"{ans.policy} on {ans.backbone}: {u.input_tokens} input tokens, {u.output_tokens} output, "
              f"{u.images} images, {u.latency_s:.1f} s{replay}", highlight=False, soft_wrap=True)
    _no_reply(ans)


@contextmanager
def _steps_shown(console: Console, quiet: bool = False) -> Iterator[None]:
    """The policy's steps on stderr as it takes them, when stderr is a terminal (as ingest shows its
    stages): a minute of silence reads as a hang. A spinner names the step under way."""
    if quiet or not console.is_terminal:
        yield
        return
    from ..agents.base import watching

    started = time.perf_counter()
    with console.status("answering", spinner="dots") as status:
        def show(step: Step) -> None:
            line = step.line()
            console.print(Text.assemble((f"{time.perf_counter() - started:6.1f} s  ", "dim"), line), highlight=False)
            status.update(line)

        with watching(show):
            yield


def _no_reply(ans: Answer) -> None:
    """An answer the backbone never gave is a failed command (exit 2), so a script can tell it from a
    model's unparseable reply; what was retrieved is still shown above, and nothing was cached."""
    if ans.invalid and ans.faults:
        raise MovieMemError(f"{ans.backbone} gave no reply to {ans.faults} of {ans.calls} call(s) ({ans.error}); "
                            "nothing was cached: asking again calls it anew")


@app.command()
def policies(as_json: JsonOpt = False) -> None:
    """List the answering policies with their default settings."""
    from ..agents import list_policies

    items = [p.to_dict() for p in list_policies()]
    if as_json:
        _print_json({"policies": items})
        return
    # the settings go under the description, the widest column, so a narrow terminal wraps them between
    # pairs ("budget_tokens=750, k=8"), never inside one; a pair longer than the column is still folded
    t = Table("policy", "needs", box=None)
    t.add_column("description; default settings (in full with --json)", overflow="fold")
    for p in items:
        t.add_row(p["name"], ", ".join(p["needs"]), Text.assemble(p["description"], "\n", ("defaults: ", "dim"),
                                                                  _settings_line(p["defaults"])))
    out.print(t)


def _settings_line(defaults: dict[str, Any], width: int = 40) -> str:
    """key=value pairs as `--set` takes them; a long value (hybrid's channel table) is cut."""
    def value(v: Any) -> str:
        text = json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else v
        return text if len(text) <= width else text[: width - 3] + "..."

    return ", ".join(f"{k}={value(v)}" for k, v in defaults.items())


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
    lib, f = _open_film(library, film)
    result = f.describe(out_path, backbone=_open_backbone(lib, backbone), min_gap_s=min_gap, words_per_s=wps,
                        max_cue_s=max_cue, reporter=_reporter(as_json))
    if as_json:
        _print_json(dict(result.to_dict(), film_id=film))
        return
    err.print(f"wrote {len(result.cues)} narrations to {result.out}")
    for a, b, why in result.invalid:
        _styled(err, "yellow", "warning:", f" no narration {_span(a, b)}: {why}")


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
    lib, f = _open_film(library, film)
    kinds = [k.strip() for k in caption_kinds.split(",") if k.strip()] if caption_kinds else None
    if kinds and set(kinds) - {"frame", "clip", "imported"}:
        raise MovieMemError(f"--caption-kinds takes frame, clip and imported, not {caption_kinds!r}")
    result = f.narrate(_seconds(start, "--start"), _seconds(end, "--end"), backbone=_open_backbone(lib, backbone),
                       caption_kinds=kinds)
    if as_json:
        _print_json(dict(result.to_dict(), film_id=film))
        return
    if result.invalid:
        raise MovieMemError(f"the backbone's narration was unusable: {result.error}")
    out.print(result.text, highlight=False, markup=False)


