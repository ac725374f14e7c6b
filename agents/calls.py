"""Shared steps of the policies: film text as prompt lines, uniform sampling, one answering call."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from ..backbones import Clip, system, user
from ..backbones.prompt import Prompt
from ..foundation.errors import MovieMemError
from ..foundation.timefmt import hms
from ..memory.view import FilmMemory
from ..retrievers.types import Evidence
from .base import Run
from .parsing import Parsed, parse_answer
from .prompts import answer_schema, question_block
from .types import Question

T = TypeVar("T")


def default_max_tokens(q: Question, *, extra: bool = False) -> int:
    """Enough for the JSON answer (plus a `missing` note or citations), no more."""
    return 256 if q.kind == "open" else (128 if extra else 48)


def uniform(items: Sequence[T], n: int) -> list[T]:
    """n items spread evenly over the sequence (all of them when there are fewer)."""
    if n >= len(items):
        return list(items)
    return [items[int(i * len(items) / n)] for i in range(n)]


def stage_reason(film: FilmMemory, stage: str) -> str:
    for run in film.stages():
        if run.stage == stage:
            return f"{stage} stage {run.status}" + (f": {run.reason}" if run.reason else "")
    return f"the {stage} stage has not run"


def world_state(evidence: Sequence[Evidence]) -> str:
    """`HH:MM:SS - HH:MM:SS text` lines (the CHNB / HourVideo Socratic world-state format)."""
    return "\n".join(f"{hms(e.start)} - {hms(e.end)} {e.text}" for e in evidence)


MARK_EVERY_S = 60.0  # a time mark opens the first line of each minute of film


def compact_text(evidence: Sequence[Evidence], mark_every_s: float = MARK_EVERY_S) -> str:
    """A whole film's text for a full-context prompt: a line a row, in time order, `[H:MM:SS]` before the
    first row of each minute, a row that repeats the one before it dropped. Two times on every line
    (`world_state`) cost more tokens than the words: The Front Page's 16,289 words took 3.3 tokens a
    word that way and 1.45 this way (Qwen2.5 tokenizer), which is what lets a feature film fit 32k."""
    out: list[str] = []
    mark = -math.inf
    previous = None
    for e in evidence:
        text = " ".join(e.text.split())
        if not text or text == previous:
            continue
        previous = text
        if e.start // mark_every_s != mark:
            mark = e.start // mark_every_s
            text = f"[{hms(e.start, short=True)}] {text}"
        out.append(text)
    return "\n".join(out)


def require_video(film: FilmMemory, policy: str) -> None:
    if not film.info.has_video:
        raise MovieMemError(f"policy {policy} needs video, but {film.film_id!r} is a text-only film; "
                            "use subtitles, socratic-clip, archival, graph or hybrid")


def film_clip(film: FilmMemory) -> Clip:
    """The film's video (up to the until-cutoff) for backbones that take video."""
    from pathlib import Path

    if not film.info.source_path:
        raise MovieMemError(f"{film.film_id!r} was imported from a bundle, which holds no video; ingest the film's "
                            "video to answer from it")
    path = Path(film.info.source_path)
    if not path.is_file():
        raise MovieMemError(f"the video of {film.film_id!r} is not at {path} any more")
    return Clip(path, 0.0, film.cutoff)


def answer_once(run: Run, prompt: Prompt, q: Question, body: str, *, images: Sequence[Any] = (), video: Clip | None = None,
                max_tokens: int | None = None, temperature: float = 0.0, structured: bool = True,
                cite: bool = False, missing: bool = False, shared_head: bool = False) -> Parsed:
    """One answering call: system prompt, one user turn (media first, then text), parsed reply. `shared_head`: the
    body ends with the question and everything before it is the same for every question on the film (a
    full-context policy), so the request marks it as a prefix other calls share."""
    messages = [system(prompt.system), user(body, images=images, video=video)]
    schema = answer_schema(q, cite=cite, missing=missing) if structured else None
    shared = 0
    if shared_head:
        asked = question_block(q, cite=cite, missing=missing)
        if not body.endswith(asked) or len(body) == len(asked):
            raise MovieMemError(f"prompt {prompt.id} does not end with its question: it has no shared head")
        shared = len(body) - len(asked)
    reply = run.chat(prompt, messages, json_schema=schema, shared_prefix=shared,
                     max_tokens=max_tokens or default_max_tokens(q, extra=cite or missing), temperature=temperature)
    parsed = parse_answer(reply, q)
    run.trace.append(parse_step(parsed))
    return parsed


def parse_step(parsed: Parsed) -> Any:
    from .types import Step

    return Step("parse", {"choice": parsed.choice, "invalid": parsed.invalid, "how": parsed.how, "error": parsed.error,
                          "confidence": parsed.confidence})


def body(prompt: Prompt, q: Question, *, cite: bool = False, missing: bool = False, **values: str) -> str:
    return prompt.render(question=question_block(q, cite=cite, missing=missing), **values)
