"""The JSON reader: a written answer that cites the ids of the evidence it used.

Any backbone can write it and any question kind takes it; hybrid uses it where the backbone gives no
log-probabilities (or `reader=json`). Standing in for a reader of log-probabilities, it says so: a note in the
trace and `reader_fallback` on the answer's parse step, which the report counts. Cited blocks are marked and
listed first in the answer's evidence.
"""

from __future__ import annotations

from ..base import Run
from ..calls import answer_once, body
from ..parsing import Parsed
from ..prompts import HYBRID
from ..types import Question, Step
from .base import Reading
from .settings import JsonSettings

FALLBACK = "json"  # the parse step's `reader_fallback` where JSON stands in for log-probabilities (eval/evidence.py counts)


class JsonReader:
    """The model writes its answer as JSON, citing the evidence ids (E1, E2, ...) it relied on. `fallback`: why
    it reads a question that a reader of log-probabilities would have read (said in the trace and on the answer's
    parse step, which the report counts), or "" where JSON is the reader asked for."""

    def __init__(self, settings: JsonSettings, fallback: str = ""):
        self.settings = settings
        self.fallback = fallback

    def budget(self, question: Question, default: int) -> int:
        return default

    def read(self, run: Run, reading: Reading) -> Parsed:
        q, ids, s = reading.question, reading.ids, self.settings
        if self.fallback:
            run.note(f"reader: JSON fallback ({self.fallback}): the answer is written as JSON, not read from "
                     "log-probabilities")
        parsed = answer_once(run, HYBRID, q, body(HYBRID, q, cite=True, context=reading.text), cite=True,
                             max_tokens=s.max_tokens, temperature=s.temperature)
        if self.fallback:
            parse = next(step for step in reversed(run.trace) if step.kind == "parse")
            parse.data["reader_fallback"] = FALLBACK
        cited = [c for c in parsed.data.get("evidence", []) if isinstance(c, str)] if parsed.data else []
        cited_ev = [ids[c] for c in cited if c in ids]
        run.trace.append(Step("cite", {"cited": [c for c in cited if c in ids], "unknown": [c for c in cited if c not in ids],
                                       "ids": {k: e.id for k, e in ids.items()}}))
        for e in cited_ev:
            e.cited = True
        run.show(cited_ev + [e for e in reading.shown if e not in cited_ev])
        return parsed
