"""Question routing: which memory channels a question needs, read from its wording (no model call).

who -> dialogue, captions and the character registry; where -> captions and on-screen text;
what-does-it-say -> on-screen text; when/which-first -> events and timed captions; why/how -> the
event graph, dialogue and captions. With passages, transcript (and caption) rows are also read as
passages. Each channel is searched with the question and, for multiple choice, with each option.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
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


def _check_channel(name: str, factory: Any, meta: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A channel registered in code names the `table` it reads and may give its `routes` (question type -> k)."""
    unknown = set(meta) - {"table", "routes", "description"}
    table = meta.get("table") or getattr(factory, "table", "")
    if unknown or not table:
        raise MovieMemError(f"channel {name!r}: give the table it reads (table=...)" + (
            f"; unknown option(s) {', '.join(sorted(unknown))}; known: table, routes, description" if unknown else ""))
    routes = dict(meta.get("routes") or getattr(factory, "routes", None) or {})
    bad = sorted(set(routes) - set(CHANNELS))
    if bad:
        raise MovieMemError(f"channel {name!r} routes unknown question type {bad[0]!r}; types: {', '.join(CHANNELS)}")
    return factory, {**meta, "table": table, "routes": routes}


# evidence kind -> factory(GatherSettings, kind) -> retrievers.channels.Channel, with the table it reads
CHANNEL_RETRIEVERS: Registry[Callable[..., Any]] = Registry("channel", "moviemem.channels", check=_check_channel)
for _kind, _table, _target in [
    ("utterance", "utterances", "moviemem.retrievers.channels:TextChannel"),
    ("caption", "captions", "moviemem.retrievers.channels:TextChannel"),
    ("onscreen", "onscreen", "moviemem.retrievers.channels:TextChannel"),
    ("passage", "passages", "moviemem.retrievers.channels:TextChannel"),
    ("event", "events", "moviemem.retrievers.channels:EventChannel"),
    ("characters", "characters", "moviemem.retrievers.channels:CharactersChannel"),
]:
    CHANNEL_RETRIEVERS.add(_kind, _target, table=_table)


def _declared(kind: str, key: str) -> Any:
    """A channel's `table` or `routes`: from its registration, else (an entry point's) from the class itself."""
    entry = CHANNEL_RETRIEVERS.entry(kind)
    return entry.meta[key] if key in entry.meta else getattr(entry.load(), key, None)


def default_channels() -> dict[str, tuple[tuple[str, int], ...]]:
    """`CHANNELS`, each plug-in channel appended to the question types its routes name."""
    out = dict(CHANNELS)
    for kind in CHANNEL_RETRIEVERS.names():
        for qtype, k in (_declared(kind, "routes") or {}).items():
            out[qtype] = (*out.get(qtype, ()), (kind, int(k)))
    return out


def holds(film: FilmMemory, kind: str) -> bool:
    """Whether a channel has rows this film view can see (counted in LanceDB, not read)."""
    table = _declared(kind, "table")
    if not table:
        return False
    where = visible_filter(film, table)
    return where is not None and film.store.count(table, where) > 0


def queries_for(question: Question, per_option: int, option_alone: bool = False) -> list[str]:
    if not per_option:
        return [question.text]
    alone = [o for o in question.options if o.strip()] if option_alone else []
    return [question.text] + [f"{question.text} {o}" for o in question.options] + alone
