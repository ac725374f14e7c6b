"""Reading an answer from the next token's log-probabilities instead of generated JSON.

A small local model asked for JSON often picks a letter it was not shown support for, and says
TRUE to nearly every claim. Scoring the answer token directly (the letters of the options, or
yes/no) uses what the model believes after reading the evidence, costs one forward pass and no
generation, and can be calibrated: a claim's yes/no probabilities are divided by those the model
gives a content-free statement ("N/A") over the same evidence (contextual calibration, Zhao et
al., ICML 2021), which removes the yes-bias the evidence and the prompt induce. The evidence is a
shared prefix of the two calls, so the calibration call re-reads only the statement.
Claims are judged in agents/claims.py (calibrated yes/no is one of its readers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..backbones import system, user
from ..backbones.prompt import Prompt
from .base import Run
from .calls import parse_step
from .parsing import Parsed
from .prompts import READ_CLAIM, READ_LETTER, question_head
from .types import Question, Step

TOP = 20  # alternatives asked for: option letters and yes/no are always among them when the prompt asks for one
CONTENT_FREE = "N/A"


def can_read(run: Run, q: Question) -> bool:
    return bool(getattr(run.backbone.capabilities, "logprobs", False)) and q.kind in ("mcq", "claim")


def _scores(run: Run, prompt: Prompt, text: str, labels: Sequence[str]) -> dict[str, float] | str:
    """log-probability of each label as the next token (best spelling: 'A', ' A', 'a'), or why not."""
    reply = run.chat(prompt, [system(prompt.system), user(text)], max_tokens=1, temperature=0.0,
                     logprobs=TOP)
    if reply.invalid:
        return reply.error or "the backbone failed"
    alts = (reply.logprobs or [{}])[0]
    out: dict[str, float] = {}
    for token, lp in alts.items():
        word = token.strip().rstrip(".):,").lower()
        for label in labels:
            if word == label.lower():
                out[label] = max(out.get(label, -math.inf), lp)
    if not out:
        return f"none of {', '.join(labels)} among the model's {len(alts)} most likely next tokens"
    return out


def _softmax(scores: dict[str, float], labels: Sequence[str]) -> dict[str, float]:
    m = max(scores.values())
    exp = {k: math.exp(scores.get(k, -math.inf) - m) for k in labels}
    z = sum(exp.values())
    return {k: v / z for k, v in exp.items()}


def read_letter(run: Run, q: Question, context: str) -> Parsed:
    """A multiple-choice answer from `context`: the most likely option letter."""
    probs = letter_probs(run, q, context)
    if isinstance(probs, str):
        return done(run, Parsed.fail(probs))
    best = max(q.letters, key=lambda k: (probs[k], -q.letters.index(k)))
    run.trace.append(Step("scores", {"how": "letter log-probabilities", "p": {k: round(v, 4) for k, v in probs.items()}}))
    return done(run, Parsed(best, q.options[q.letters.index(best)], round(probs[best], 4), False, how="logprobs"))


def letter_probs(run: Run, q: Question, context: str) -> dict[str, float] | str:
    scores = _scores(run, READ_LETTER, READ_LETTER.render(context=context, question=question_head(q)), q.letters)
    return scores if isinstance(scores, str) else _softmax(scores, q.letters)


def calibrated(run: Run, q: Question, context: str) -> Parsed:
    """yes/no, divided by the content-free statement's yes/no over the same evidence (Zhao et al.)."""
    labels = ("yes", "no")
    raw = _scores(run, READ_CLAIM, READ_CLAIM.render(context=context, claim=q.text), labels)
    free = _scores(run, READ_CLAIM, READ_CLAIM.render(context=context, claim=CONTENT_FREE), labels)
    if isinstance(raw, str):
        return Parsed.fail(raw)
    p = _softmax(raw, labels)
    if isinstance(free, str):  # said in the trace; the raw reading stands
        run.note(f"content-free calibration unavailable ({free}); uncalibrated yes/no")
        cal = p
    else:
        pf = _softmax(free, labels)
        w = {k: p[k] / max(pf[k], 1e-6) for k in labels}
        z = sum(w.values())
        cal = {k: v / z for k, v in w.items()}
    verdict = "TRUE" if cal["yes"] >= cal["no"] else "FALSE"
    run.trace.append(Step("scores", {"how": "yes/no log-probabilities, contextual calibration",
                                     "p": {k: round(v, 4) for k, v in p.items()},
                                     "calibrated": {k: round(v, 4) for k, v in cal.items()}}))
    return Parsed(verdict, verdict, round(max(cal.values()), 4), False, how="logprobs")


def done(run: Run, parsed: Parsed) -> Parsed:
    run.trace.append(parse_step(parsed))
    return parsed
