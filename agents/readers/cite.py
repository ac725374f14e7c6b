"""The evidence an answer read from one token rests on: a short follow-up in the conversation that read it.

The letter and claim readers score the answer's first token, so the model names no evidence and the
report's cited column stays empty. Once the answer is read (the follow-up never changes it), the
conversation that read it goes on: the answer as the model's own turn, then one question asking for the
number of the evidence block that supports it best (prompts.CITE_BLOCK); the block numbers'
log-probabilities at the next token pick the cited block. The evidence and the question are the prompt
the model has just read, so a local model reuses its prompt cache and reads only the answer and the
question (some 30-80 new tokens), one forward pass, nothing generated. Where the blocks number 10 or
more and the likeliest first digit opens several numbers (a tokenizer that writes "12" as "1", "2"),
one short greedy reply (4 tokens at most) says which. Measured cost and figures: docs/results.md.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...backbones import assistant, system, user
from ...backbones.prompt import Prompt
from ...backbones.types import Reply
from ..base import Run
from ..prompts import CITE_BLOCK
from ..types import Step
from .base import Reading

TOP = 20  # alternatives asked for, as the letter reader asks
HOW = "follow-up: the evidence block's number read from its log-probabilities"
_NUMBER = re.compile(r"\[?\s*[Ee]?(\d+)")


def block_number(token: str) -> str | None:
    """The block number a token or a short reply writes ('3', ' 3', '[E3]', 'E12.'), or None."""
    m = _NUMBER.match(token.strip())
    return str(int(m.group(1))) if m else None


def _scores(alternatives: dict[str, float], labels: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for token, lp in alternatives.items():
        n = block_number(token)
        if n in labels:
            out[n] = max(out.get(n, -math.inf), lp)
    return out


def _usage(replies: list[Reply]) -> dict[str, Any]:
    """What the follow-up cost: tokens billed, tokens read (billed less the reused prefix), seconds."""
    return {"input_tokens": sum(r.usage.input_tokens for r in replies),
            "read_tokens": sum(r.usage.input_tokens - r.usage.cached_input_tokens for r in replies),
            "output_tokens": sum(r.usage.output_tokens for r in replies),
            "latency_s": round(sum(r.usage.latency_s or 0.0 for r in replies), 3)}


def cite(run: Run, reading: Reading, prompt: Prompt, text: str, answer: str) -> list[str]:
    """Mark the evidence block the answer rests on as cited and return its id ([] where none could be
    read: said in the trace). `prompt` and `text` are the call the answer was read in, `answer` the
    model's reply to it as the reader read it (a letter, yes or no)."""
    labels = [eid.removeprefix("E") for eid in reading.ids]
    if not labels:
        run.note("no citation: no evidence block was shown")
        return []
    messages = [system(prompt.system), user(text), assistant(answer), user(CITE_BLOCK.render())]
    unfit = run.unfit
    replies = [run.chat(CITE_BLOCK, messages, max_tokens=1, temperature=0.0, logprobs=TOP)]
    run.unfit = unfit  # a follow-up too long for the context cites nothing; the answer, read already, stands
    first = replies[0]
    alternatives = (first.logprobs or [{}])[0]
    scores = _scores(alternatives, labels)
    if first.invalid or not scores:
        if first.invalid:
            why = first.error or "the backbone failed"
        else:
            why = f"no block number among the model's {len(alternatives)} most likely next tokens"
        run.step("cite", {"how": HOW, "cited": [], "error": why, **_usage(replies)})
        run.note(f"no citation: {why}")
        return []
    best = max(scores, key=lambda k: (scores[k], -int(k)))
    if any(other != best and other.startswith(best) for other in labels):  # '1' may open '12': the reply says which
        written = run.chat(CITE_BLOCK, messages, max_tokens=4, temperature=0.0)
        run.unfit = unfit
        replies.append(written)
        number = None if written.invalid else block_number(written.text)
        if number in labels and number is not None and number.startswith(best):
            best = number
    mass = sum(math.exp(v) for v in scores.values())
    p = {f"E{k}": round(math.exp(v) / mass, 4) for k, v in sorted(scores.items(), key=lambda kv: -kv[1])[:5]}
    eid = f"E{best}"
    e = reading.ids[eid]
    e.cited = True
    run.evidence.get(e.key, e).cited = True  # the record of it shown first, where another object was shown first
    run.trace.append(Step("cite", {"how": HOW, "cited": [eid], "ids": {eid: e.id}, "p_first_token": p,
                                   "p_numbers": round(mass, 4), **_usage(replies)}))
    return [eid]
