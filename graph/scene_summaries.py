"""Abstractive scene summaries: with a text backbone chosen, the model sums up each scene from its
lines, so the table of contents reads as story ("Anna finds the letter and leaves the farm")
rather than as two quoted lines.

It runs only when asked (`--backbone`), like the events stage's refine. Replies go through the
library's replay cache, so a stopped run resumes without asking again. A scene whose every attempt
fails keeps its extractive summary, and the stage note counts those scenes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..backbones import Backbone, system, user
from ..backbones.prompt import Prompt
from ..backbones.structured import Ask, ask_json
from ..backbones.types import Usage
from ..foundation.timefmt import hms
from .scenes import Scene, prompt_line

MAX_LINES = 40  # lines shown per scene, spread evenly over it when it has more
MAX_CHARS = 320  # the longest summary kept, as long as an extractive one

SUMMARY = Prompt(
    id="scenes.summary",
    version=1,
    system=("You write the table of contents of a film from its subtitles and descriptions. Say what happens, "
            "literally, using only what the lines show. Reply with JSON only."),
    template=("Film: {title}\nScene {n} ({t0}-{t1}), its lines in order:\n{lines}\n\n"
              "Sum up this scene in one or two sentences: who is there, what they do or decide, and what it leads "
              "to. Name people only as the lines name them. "
              'Reply as JSON: {{"summary": "..."}}'),
    schema={"type": "object", "properties": {"summary": {"type": "string", "maxLength": MAX_CHARS}},
            "required": ["summary"]},
)


def _lines(scene: Scene) -> str:
    lines = scene.lines
    if len(lines) > MAX_LINES:
        step = len(lines) / MAX_LINES
        lines = [lines[int(i * step)] for i in range(MAX_LINES)]
    shown = [prompt_line(ln) for ln in lines]
    more = len(scene.lines) - len(lines)
    return "\n".join(shown) + (f"\n({more} more lines not shown)" if more else "")


def summary_asks(scenes: list[Scene], title: str) -> list[Ask]:
    return [Ask(f"scene {sc.idx + 1}", [system(SUMMARY.system),
                                        user(SUMMARY.render(title=title, n=sc.idx + 1, t0=hms(sc.start),
                                                            t1=hms(sc.end), lines=_lines(sc)))])
            for sc in scenes]


def _check(data: Any) -> str | None:
    text = " ".join(str(data.get("summary", "")).split())
    return None if len(text) >= 12 else "the summary is empty or a few letters: write one or two sentences"


def write_summaries(backbone: Backbone, scenes: list[Scene], *, title: str, attempts: int = 3,
                    timeout: float | None = None,
                    progress: Callable[[int, int], None] | None = None) -> tuple[list[str | None], Usage]:
    """Each scene's summary by the model, or None where no attempt gave a usable one; and what the
    calls cost (a reply the replay cache held costs nothing again)."""
    answers = ask_json(backbone, summary_asks(scenes, title), SUMMARY.schema or {}, max_tokens=160,
                       attempts=attempts, check=_check, timeout=timeout,
                       progress=(lambda n: progress(n, len(scenes))) if progress else None)
    used = sum((a.usage for a in answers), Usage())
    return [" ".join(a.data["summary"].split())[:MAX_CHARS] if a.ok else None for a in answers], used


def cost_note(used: Usage, calls: int) -> str:
    """What the summaries cost, for the stage's note (`moviemem show` prints it)."""
    cost = f", ${used.cost_usd:.4f}" if used.cost_usd is not None else ""
    return (f"{calls} calls, {used.input_tokens} tokens in, {used.output_tokens} out, "
            f"{used.latency_s:.0f} s{cost}")
