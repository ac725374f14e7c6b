"""Reading an answer from the next token's log-probabilities instead of generated JSON.

A small local model asked for JSON often picks a letter it was not shown support for, and says
TRUE to nearly every claim. Scoring the answer token directly (the letters of the options, or
yes/no) uses what the model believes after reading the evidence, costs one forward pass and no
generation, and can be calibrated: a claim's yes/no probabilities are divided by those the model
gives a content-free statement ("N/A") over the same evidence (contextual calibration, Zhao et
al., ICML 2021), which removes the yes-bias the evidence and the prompt induce. The evidence is a
shared prefix of the two calls, so the calibration call re-reads only the statement.

Claims can also be read as questions (`claims="qa"`, issue 20's proposal): the claim is turned into
questions about its details with its own answers, the questions are answered from the evidence, and
the answers compared. It needs a model that writes sensible questions: the 1.5B `local` model
writes "Who?" / "What?" and then disagrees with true claims, so it is not the default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..backbones import system, user
from ..backbones.base import parse_json_reply
from ..backbones.prompt import Prompt
from ..errors import MovieMemError
from .base import Run
from .calls import parse_step
from .parsing import Parsed
from .prompts import CLAIM_ANSWERS, CLAIM_QUESTIONS, READ_CLAIM, READ_LETTER, question_head
from .types import Question, Step

TOP = 20  # alternatives asked for: option letters and yes/no are always among them when the prompt asks for one
CONTENT_FREE = "N/A"
CLAIM_READERS = ("calibrated", "qa")


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


def read(run: Run, q: Question, context: str, *, claims: str = "calibrated") -> Parsed:
    """The answer to q from `context`: the most likely option letter, or a claim's verdict
    (`claims`: calibrated yes/no, or qa: the claim as questions answered from the evidence)."""
    if q.kind == "mcq":
        return _done(run, _read_letter(run, q, context))
    if claims == "qa":
        return _done(run, _read_qa(run, q, context))
    if claims == "calibrated":
        return _done(run, _read_calibrated(run, q, context))
    raise MovieMemError(f"unknown claim reader {claims!r}; use {' or '.join(CLAIM_READERS)}")


def _read_letter(run: Run, q: Question, context: str) -> Parsed:
    probs = _letter_probs(run, q, context)
    if isinstance(probs, str):
        return Parsed.fail(probs)
    best = max(q.letters, key=lambda k: (probs[k], -q.letters.index(k)))
    run.trace.append(Step("scores", {"how": "letter log-probabilities", "p": {k: round(v, 4) for k, v in probs.items()}}))
    return Parsed(best, q.options[q.letters.index(best)], round(probs[best], 4), False, how="logprobs")


def _letter_probs(run: Run, q: Question, context: str) -> dict[str, float] | str:
    scores = _scores(run, READ_LETTER, READ_LETTER.render(context=context, question=question_head(q)), q.letters)
    return scores if isinstance(scores, str) else _softmax(scores, q.letters)


def _read_calibrated(run: Run, q: Question, context: str) -> Parsed:
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


AGREE = 0.5  # share of the claim's answer words (stemmed, stop words aside) that the evidence's answer must contain


def _json_call(run: Run, prompt: Prompt, max_tokens: int, **values: str) -> Any:
    """A small structured call: the reply's JSON object, or why there is none."""
    reply = run.chat(prompt, [system(prompt.system), user(prompt.render(**values))], json_schema=prompt.schema,
                     max_tokens=max_tokens, temperature=0.0)
    if reply.invalid:
        return reply.error or "the backbone failed"
    data = parse_json_reply(reply.text)
    return data if isinstance(data, dict) else f"{prompt.id}: no JSON object in the reply {reply.text[:200]!r}"


def _texts(values: Any) -> list[str]:
    return [" ".join(v.split()) for v in values if isinstance(v, str) and v.strip()] if isinstance(values, list) else []


def _stems(text: str) -> set[str]:
    from nltk.stem.porter import PorterStemmer

    from .packing import stop_words

    stem = PorterStemmer().stem
    return {stem(w) for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in stop_words()}


def agreement(claimed: str, found: str) -> float:
    """Share of the claimed answer's content words (stemmed) that the found answer has."""
    want = _stems(claimed)
    return len(want & _stems(found)) / len(want) if want else 0.0


def _read_qa(run: Run, q: Question, context: str) -> Parsed:
    """Claim -> questions about its details with the claim's answers (no evidence shown); the
    questions answered from the evidence in one call; a detail agrees when the answers share its
    words, else the letter reader chooses between the two answers, each read in both positions
    (position bias cancels). TRUE when every detail agrees."""
    asked = _json_call(run, CLAIM_QUESTIONS, 200, claim=q.text)
    if isinstance(asked, str):
        return Parsed.fail(f"claim reader: {asked}")
    checks = [(c["question"], c["answer"]) for c in asked.get("checks") or [] if isinstance(c, dict)
              and _texts([c.get("question")]) and _texts([c.get("answer")])][:4]
    if not checks:
        return Parsed.fail(f"claim reader: no question about the claim in {asked!r:.200}")
    listed = "\n".join(f"{i}. {question}" for i, (question, _) in enumerate(checks, 1))
    found = _json_call(run, CLAIM_ANSWERS, 24 * len(checks) + 16, context=context, questions=listed)
    if isinstance(found, str):
        return Parsed.fail(f"claim reader: {found}")
    answers = _texts(found.get("answers"))
    if len(answers) < len(checks):
        return Parsed.fail(f"claim reader: {len(answers)} answers to {len(checks)} questions in {found!r:.200}")
    details: list[dict[str, Any]] = []
    for (question, claimed), answer in zip(checks, answers):
        d: dict[str, Any] = {"question": question, "claimed": claimed, "found": answer,
                             "agreement": round(agreement(claimed, answer), 4)}
        if d["agreement"] < AGREE:
            mean = 0.0  # p(the claim's answer), averaged over both orders
            for options in ((claimed, answer), (answer, claimed)):
                probs = _letter_probs(run, Question(question, options), context)
                if isinstance(probs, str):
                    return Parsed.fail(probs)
                mean += probs["A" if options[0] == claimed else "B"] / 2
            d["p_claimed"] = round(mean, 4)
        details.append(d)
    support = [d.get("p_claimed", 1.0) for d in details]
    verdict = "TRUE" if min(support) >= 0.5 else "FALSE"
    run.trace.append(Step("scores", {"how": "claim as questions, answered from the evidence", "details": details}))
    return Parsed(verdict, verdict, round(min(support) if verdict == "TRUE" else 1 - min(support), 4), False,
                  how="logprobs")


def _done(run: Run, parsed: Parsed) -> Parsed:
    run.trace.append(parse_step(parsed))
    return parsed
