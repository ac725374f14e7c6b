"""Hybrid: route a question by its type to the memory channels it needs, under a token budget.

The question is classified by its wording (no model call): who -> dialogue and captions,
where -> captions and on-screen text, what-does-it-say -> on-screen text, when/which-first ->
events and timed captions, why/how -> the event graph, dialogue and captions. Each channel is
searched (hybrid vector + full-text) with the question and, for multiple choice, with each
option, so the evidence covers every alternative. Results are de-duplicated, cut to the token
budget in rank order, shown in time order with ids, and the backbone cites the ids it used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..backbones.base import estimate_tokens
from ..memory.view import FilmMemory
from ..retrievers.base import Evidence, hms
from ..retrievers.text import TextRetriever
from .base import BasePolicy, Question, Run, Step, register_policy
from .calls import answer_once, body
from .parsing import Parsed
from .prompts import HYBRID

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
    "character": (("utterance", 4), ("caption", 3)),
    "setting": (("caption", 4), ("onscreen", 2), ("utterance", 2)),
    "perspective": (("utterance", 3), ("caption", 3), ("event", 3)),
    "other": (("utterance", 3), ("caption", 3), ("onscreen", 2)),
}

LABELS = {"utterance": "said", "caption": "seen", "onscreen": "on screen", "event": "event", "relation": "link",
          "frame": "frame"}


def classify(question: Question) -> str:
    text = question.text.lower()
    for name, pattern in QUESTION_TYPES.items():
        if re.search(pattern, text):
            return name
    return "other"


@register_policy("hybrid", needs=("transcript", "captions"))
class Hybrid(BasePolicy):
    """Routes by question type across transcript, captions, on-screen text and events, under a token budget."""

    @dataclass
    class Settings:
        budget_tokens: int = 450  # evidence text shown to the model (the prompt adds the question)
        per_option: int = 1  # extra hits per multiple-choice option and channel
        search: str = "hybrid"  # vector | fts | hybrid
        channels: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=lambda: dict(CHANNELS))
        graph_hops: int = 1
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        qtype = classify(question)
        channels = s.channels.get(qtype) or s.channels.get("other") or CHANNELS["other"]
        run.trace.append(Step("route", {"type": qtype, "channels": [list(c) for c in channels]}))
        lists: list[list[Evidence]] = []
        queries = [question.text] + [f"{question.text} {o}" for o in question.options] if s.per_option else [question.text]
        for kind, k in channels:
            if kind == "event" and not film.events():
                run.note("no events in this film's memory: the event channel is skipped")
                continue
            for i, query in enumerate(queries):
                kk = k if i == 0 else s.per_option
                found = self._search(film, run, kind, query, kk)
                run.retrieved(f"{kind}:{s.search}", query, found)
                lists.append(found)
        ranked = interleave(lists)
        shown = fit_budget(ranked, s.budget_tokens)
        run.note(f"{len(shown)} of {len(ranked)} hits fit the budget of {s.budget_tokens} tokens")
        shown.sort(key=lambda e: (e.start, e.end, e.id))
        ids = {f"E{n}": e for n, e in enumerate(shown, 1)}
        context = "\n".join(f"[{eid}] {hms(e.start)}-{hms(e.end)} ({LABELS.get(e.kind, e.kind)}) {e.text}"
                            for eid, e in ids.items())
        parsed = answer_once(run, HYBRID, question, body(HYBRID, question, cite=True, context=context or "(nothing found)"),
                             cite=True, max_tokens=s.max_tokens, temperature=s.temperature)
        cited = [c for c in parsed.data.get("evidence", []) if isinstance(c, str)] if parsed.data else []
        cited_ev = [ids[c] for c in cited if c in ids]
        run.trace.append(Step("cite", {"cited": [c for c in cited if c in ids], "unknown": [c for c in cited if c not in ids],
                                       "ids": {k: e.id for k, e in ids.items()}}))
        run.show(cited_ev + [e for e in shown if e not in cited_ev])
        return parsed

    def _search(self, film: FilmMemory, run: Run, kind: str, query: str, k: int) -> list[Evidence]:
        if kind == "event":
            return graph_hits(film, run, query, k, self.settings.graph_hops)
        return TextRetriever(self.settings.search, [kind]).retrieve(film, query, k=k)  # type: ignore[arg-type]


def graph_hits(film: FilmMemory, run: Run, query: str, k: int, hops: int) -> list[Evidence]:
    """Matched events plus their graph neighbours; matched events alone (said in the trace)
    where the graph layer is not installed."""
    try:
        from ..retrievers.graph import GraphRetriever

        return GraphRetriever(hops=hops).retrieve(film, query, k=k)
    except ImportError as exc:
        run.note(f"graph layer unavailable ({exc}); events matched by text only")
        return TextRetriever("hybrid", ["event"]).retrieve(film, query, k=k)


def interleave(lists: list[list[Evidence]]) -> list[Evidence]:
    """Round-robin over the ranked lists so every channel and option gets its best hits in first."""
    out: list[Evidence] = []
    for rank in range(max((len(x) for x in lists), default=0)):
        out += [x[rank] for x in lists if rank < len(x)]
    return out


def fit_budget(ranked: list[Evidence], budget: int) -> list[Evidence]:
    """De-duplicate (same row, or the same text at the same time), then keep hits in rank order
    while their text fits the budget."""
    seen: set[str] = set()
    out: list[Evidence] = []
    used = 0
    for e in ranked:
        key2 = f"{e.kind}:{round(e.start)}:{e.text.strip().lower()}"
        if e.key in seen or key2 in seen:
            continue
        cost = estimate_tokens(e.text) + 8  # the id, times and label
        if used + cost > budget:
            continue
        seen.update((e.key, key2))
        out.append(e)
        used += cost
    return out
