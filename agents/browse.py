"""Browsing a film's scenes before searching it: the film overview and the browse_scenes tool.

Deep Video Discovery's agents read a global summary of the video before they search it; a small
model that has the table of contents can aim its searches (a time range, a character) instead of
guessing. Scenes come from the scenes stage (extractive summaries on every ingest). Browsing shows
summaries, not the film's lines, so what it returns is kept in the trace but is not counted as
shown evidence: a scene spans minutes and would overlap nearly every gold span.
"""

from __future__ import annotations

from typing import Any

from ..backbones import Tool
from ..foundation.timefmt import optional_seconds
from ..memory.overview import overlapping, overview
from ..memory.view import FilmMemory
from .base import Run
from .prompts import BROWSE_TOOL, OVERVIEW_BLOCK

BROWSE_TOKENS = 1500  # at most this much text per browse_scenes call


def overview_block(film: FilmMemory, tokens: int, run: Run) -> str:
    """The film's scene list within `tokens`, as a prompt block; empty (said in the trace) when
    `tokens` is 0 or the film has no scenes."""
    if tokens <= 0:
        return ""
    scenes = film.scenes()
    if not scenes:
        run.note("no film overview: the film has no scenes (its scenes stage has not run)")
        return ""
    text = overview(scenes, tokens)
    run.note(f"film overview: {len(scenes)} scenes in {len(text)} characters (budget {tokens} tokens)")
    return OVERVIEW_BLOCK.format(overview=text)


class SceneBrowse:
    """The `browse_scenes` tool over one film (honours the film view's time restriction)."""

    tool = Tool.from_any(BROWSE_TOOL)

    def __init__(self, film: FilmMemory, budget_tokens: int = BROWSE_TOKENS):
        self.film = film
        self.budget_tokens = budget_tokens

    def __call__(self, arguments: dict[str, Any]) -> tuple[int, str | dict[str, str]]:
        """(scenes listed, the tool's result: their overview lines, or an error)."""
        try:
            start, end = optional_seconds(arguments.get("start")), optional_seconds(arguments.get("end"))
        except (TypeError, ValueError) as exc:
            return 0, {"error": f"bad arguments: {exc}"}
        every = self.film.scenes()
        scenes = overlapping(every, start, end)
        if not scenes:
            return 0, {"error": "no scenes there" if every else "the film has no scenes"}
        return len(scenes), overview(scenes, self.budget_tokens)
