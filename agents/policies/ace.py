"""ACE-style answering (MovieCORE's Agentic Choice Enhancement): sample several candidate answers
with a base policy, then let a second model pick the best one.

Candidates differ by sampling seed at a non-zero temperature, so each one is its own entry in the
replay cache (a cached rerun replays all of them) and a rerun reproduces the same set. The chosen
candidate's evidence becomes the answer's evidence; the trace holds every candidate's steps,
tagged with its number, then the selection call. A selector reply that names no candidate makes
the answer invalid with that reason: no candidate is ever picked by default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...backbones import Backbone, Reply, Request, load, system, user
from ...backbones.base import Wrapper
from ...foundation.errors import MovieMemError
from ...memory.view import FilmMemory
from ..base import BasePolicy, Run
from ..prompts import ACE_SELECT
from ..registry import get_policy
from ..types import Answer, Question, Step

# each candidate is a whole answer by the base policy (its retrieval and model calls), and the selector reads
# them all in one prompt: more than this is a mistyped number, not a wider search
MAX_CANDIDATES = 16


class SampledBackbone(Wrapper):
    """The base backbone with every call drawn at `temperature` with `seed` (a candidate's identity)."""

    def __init__(self, inner: Backbone, seed: int, temperature: float):
        super().__init__(inner)
        self.seed, self.temperature = seed, temperature

    def send(self, request: Request) -> Reply:
        return self.inner.send(replace(request, temperature=max(request.temperature, self.temperature), seed=self.seed))


def candidate_line(k: int, a: Answer, q: Question) -> str:
    if a.invalid:
        return f"{k}. (no valid answer)"
    if q.kind == "mcq" and a.choice:
        return f"{k}. {a.choice}. {q.options[q.letters.index(a.choice)]}"
    return f"{k}. {a.choice + ': ' if q.kind == 'claim' and a.choice else ''}{a.text}"


def selection_schema(n: int) -> dict[str, Any]:
    return {"type": "object", "required": ["best"], "properties": {"best": {"type": "integer", "enum": list(range(1, n + 1))}}}


class Ace(BasePolicy):
    """Several candidate answers from a base policy; a selector model picks the best (MovieCORE ACE)."""

    @dataclass
    class Settings:
        base: str = "hybrid"
        base_settings: dict[str, Any] | None = None
        candidates: int = 3
        temperature: float = 0.7
        selector: str | Backbone | None = None  # a backbone spec (or, from Python, a backbone); None = the answering one
        max_tokens: int = 32

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        s = self.settings
        if not 2 <= s.candidates <= MAX_CANDIDATES:
            raise MovieMemError(f"ace takes 2 to {MAX_CANDIDATES} candidates, not {s.candidates}")
        if s.temperature <= 0:
            raise MovieMemError("ace samples its candidates: temperature must be above 0")
        if s.base == "ace":
            raise MovieMemError("ace cannot use itself as its base policy")
        self.base = get_policy(s.base, **(s.base_settings or {}))

    def answer(self, film: FilmMemory, question: Question, backbone: Backbone) -> Answer:
        s = self.settings
        run = Run(backbone)
        cands: list[Answer] = []
        for k in range(1, s.candidates + 1):
            a = self.base.answer(film, question, SampledBackbone(backbone, seed=k, temperature=s.temperature))
            run.trace.append(Step("note", {"text": f"candidate {k} from {s.base}", "candidate": k,
                                           "choice": a.choice, "invalid": a.invalid}))
            run.trace.extend(replace(step, data={**step.data, "candidate": k}) for step in a.trace)
            run.usage = run.usage + a.usage
            run.calls, run.replayed, run.faults = run.calls + a.calls, run.replayed + a.replayed_calls, run.faults + a.faults
            run.sent.extend(a.sent)
            cands.append(a)
        name = getattr(backbone, "name", str(backbone))
        valid = [a for a in cands if not a.invalid]
        if not valid:
            return self._answer_from(None, run, name, "every candidate was invalid")
        distinct = {(a.choice, a.text) for a in valid}
        if len(distinct) == 1:  # nothing to choose between: no selector call
            run.note(f"all {len(valid)} valid candidates agree; no selection needed")
            return self._answer_from(valid[0], run, name)
        selector = load(s.selector) if s.selector else backbone
        run.backbone = selector
        listing = "\n".join(candidate_line(k, a, question) for k, a in enumerate(cands, 1))
        qtext = question.text + ("\n" + "\n".join(f"{letter}. {o}" for letter, o in zip(question.letters, question.options))
                                 if question.kind == "mcq" else "")
        reply = run.chat(ACE_SELECT, [system(ACE_SELECT.system), user(ACE_SELECT.render(question=qtext, candidates=listing))],
                         json_schema=selection_schema(len(cands)), max_tokens=s.max_tokens, temperature=0.0)
        best = reply.data.get("best") if isinstance(reply.data, dict) and not reply.invalid else None
        if not isinstance(best, int) or not 1 <= best <= len(cands) or cands[best - 1].invalid:
            why = reply.error or f"selector named no valid candidate (reply {reply.text[:80]!r})"
            return self._answer_from(None, run, name, why)
        run.trace.append(Step("parse", {"selected": best, "selector": getattr(selector, "name", str(selector))}))
        return self._answer_from(cands[best - 1], run, name)

    def _answer_from(self, chosen: Answer | None, run: Run, backbone: str, error: str | None = None) -> Answer:
        if chosen is None:
            return Answer(choice=None, text="", confidence=None, invalid=True, policy=self.name, backbone=backbone,
                          trace=run.trace, usage=run.usage, error=error, calls=run.calls, replayed_calls=run.replayed,
                          faults=run.faults, sent=run.sent)
        return Answer(choice=chosen.choice, text=chosen.text, confidence=chosen.confidence, invalid=False,
                      policy=self.name, backbone=backbone, evidence=chosen.evidence, trace=run.trace, usage=run.usage,
                      calls=run.calls, replayed_calls=run.replayed, faults=run.faults, sent=run.sent)
