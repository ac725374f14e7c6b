"""Question routing: which memory channels a question needs, read from its wording (no model call).

who -> dialogue, captions and the character registry; where -> captions and on-screen text;
what-does-it-say -> on-screen text; when/which-first -> events and timed captions; why/how -> the
event graph, dialogue and captions. With passages, transcript (and caption) rows are also read as
passages. Each channel is searched with the question and, for multiple choice, with each option.
"""

from __future__ import annotations

import re

from ..memory.view import FilmMemory
from .base import visible_filter
from .packing import passage_sources
from .types import Question, Trace

# question type -> pattern over the question's words (first match wins, in this order)
QUESTION_TYPES: dict[str, str] = {
    "onscreen": r"\b(sign|headline|written|writes|printed|newspaper say|label|title card|colou?r|wear|wears)\b",
    "temporal": r"\b(when|first|last|earliest|latest|before|after|order|right after|next|flashback|which day|on which)\b",
    "causal": r"\b(why|how|reason|because|cause|lead to|end)\b",
    "character": r"\b(who|whom|whose)\b",
    "setting": r"\b(where|place|location|time of day|at night|room)\b",
    "perspective": r"\b(know|knows|learn|viewer|aware|memory|suspect|believe)\b",
}

# question type -> channels (kind, k per query); "event" draws on the event graph when the film has one
CHANNELS: dict[str, tuple[tuple[str, int], ...]] = {
    "onscreen": (("onscreen", 4), ("caption", 3)),
    "temporal": (("event", 4), ("caption", 3), ("utterance", 2)),
    "causal": (("event", 4), ("utterance", 3), ("caption", 3)),
    "character": (("utterance", 4), ("caption", 3), ("characters", 3)),
    "setting": (("caption", 4), ("onscreen", 2), ("utterance", 2)),
    "perspective": (("utterance", 3), ("caption", 3), ("event", 3)),
    "other": (("utterance", 3), ("caption", 3), ("onscreen", 2)),
}


def classify(question: Question) -> str:
    text = question.text.lower()
    for name, pattern in QUESTION_TYPES.items():
        if re.search(pattern, text):
            return name
    return "other"


def channels_for(film: FilmMemory, question: Question, channels_by_type: dict[str, tuple[tuple[str, int], ...]],
                 units: str, trace: Trace | None = None) -> tuple[str, list[tuple[str, int]]]:
    """The question type and its channels; with passages, transcript (and caption) rows are read as passages.
    Where every routed channel is empty on this film (on-screen text and captions on a film known only by its
    subtitles, say), the transcript is read instead, and the trace says so: an answer from nothing is no answer."""
    qtype = classify(question)
    channels = list(channels_by_type.get(qtype) or channels_by_type.get("other") or CHANNELS["other"])
    if channels and not any(holds(film, kind) for kind, _ in channels):
        if trace is not None:
            trace.note(f"the {qtype} channels ({', '.join(k for k, _ in channels)}) hold nothing on this film: "
                       "reading the transcript instead")
        channels = [("utterance", max(k for _, k in channels))]
    if units in ("passages", "mixed"):
        sources = passage_sources(film)
        if not sources:
            if trace is not None:
                trace.note("no passages in this film's memory (passages stage not run): searching single lines")
        else:
            out: list[tuple[str, int]] = []
            for kind, k in channels:
                kinds = ["passage"] + ([kind] if units == "mixed" else []) if kind in sources else [kind]
                out += [(kk, k) for kk in kinds if kk not in (c for c, _ in out)]
            channels = out
    return qtype, channels


TABLES = {"utterance": "utterances", "caption": "captions", "onscreen": "onscreen", "event": "events",
          "passage": "passages", "characters": "characters"}


def holds(film: FilmMemory, kind: str) -> bool:
    """Whether a channel has rows this film view can see (counted in LanceDB, not read)."""
    table = TABLES.get(kind)
    if table is None:
        return False
    where = visible_filter(film, table)
    return where is not None and film.store.count(table, where) > 0


def queries_for(question: Question, per_option: int, option_alone: bool = False) -> list[str]:
    if not per_option:
        return [question.text]
    alone = [o for o in question.options if o.strip()] if option_alone else []
    return [question.text] + [f"{question.text} {o}" for o in question.options] + alone
