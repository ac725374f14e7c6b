"""Reading an answer from the next token's log-probabilities instead of generated JSON.

A small local model asked for JSON often picks a letter it was not shown support for, and says
TRUE to nearly every claim. Scoring the answer token directly (the letters of the options, or
yes/no) uses what the model believes after reading the evidence, costs one forward pass and no
generation, and can be calibrated: a claim's yes/no probabilities are divided by those the model
gives a content-free statement ("N/A") over the same evidence (contextual calibration, Zhao et
al., ICML 2021), which removes the yes-bias the evidence and the prompt induce. The evidence is a
shared prefix of the two calls, so the calibration call re-reads only the statement.
Claims are judged in readers/claims.py (calibrated yes/no is one of its readers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...backbones import system, user
from ...backbones.prompt import Prompt
from ..base import Run
from ..calls import parse_step
from ..parsing import Parsed
from ..prompts import READ_CLAIM, READ_LETTER, READ_WORD, question_head
from ..types import Question, Step
from .base import Reading
from .cite import cite
from .settings import LettersSettings, check_calibration, check_rotations

TOP = 20  # alternatives asked for: option letters and yes/no are always among them when the prompt asks for one
CONTENT_FREE = "N/A"


def can_read(run: Run, q: Question) -> bool:
    return bool(getattr(run.backbone.capabilities, "logprobs", False)) and q.kind in ("mcq", "claim")


def _next_tokens(run: Run, prompt: Prompt, text: str) -> dict[str, float] | str:
    """The TOP most likely next tokens with their log-probabilities (one forward pass, nothing
    generated), or why there are none."""
    reply = run.chat(prompt, [system(prompt.system), user(text)], max_tokens=1, temperature=0.0,
                     logprobs=TOP)
    if reply.invalid:
        return reply.error or "the backbone failed"
    return (reply.logprobs or [{}])[0]


def label_scores(run: Run, prompt: Prompt, text: str, labels: Sequence[str]) -> dict[str, float] | str:
    """log-probability of each label as the next token (best spelling: 'A', ' A', 'a'), or why not."""
    alts = _next_tokens(run, prompt, text)
    if isinstance(alts, str):
        return alts
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


def read_letter(run: Run, q: Question, context: str, words: bool = False, rotations: str = "one") -> Parsed:
    """A multiple-choice answer from `context`: the most likely option letter, averaged over the
    orders `rotations` names (`orders`); with `words`, where the options are short, the option most
    likely to open a written answer (`word_probs`; the letters where that cannot be read, said in the trace)."""
    how, probs = "letter log-probabilities" + ("" if rotations == "one" else f", options in {rotations} orders"), None
    if words and option_words(q) is not None:
        got = word_probs(run, q, context)
        if isinstance(got, str):
            run.note(f"option words unreadable ({got}): letters instead")
        else:
            how, probs = "log-probabilities of each option's first word as the answer", got
    if probs is None:
        mean = choose(run, q.text, q.options, context, rotations)
        if isinstance(mean, str):
            return done(run, Parsed.fail(mean))
        probs = dict(zip(q.letters, mean))
    best = max(q.letters, key=lambda k: (probs[k], -q.letters.index(k)))
    run.trace.append(Step("scores", {"how": how, "p": {k: round(v, 4) for k, v in probs.items()}}))
    return done(run, Parsed(best, q.options[q.letters.index(best)], round(probs[best], 4), False, how="logprobs"))


SHORT_OPTION = 3  # words: an option this short is a name or a thing the answer can open with


def option_words(q: Question) -> list[str] | None:
    """Each option's first word, when every option is short and their first words differ (names,
    places, things: 'Anna', 'Tom', 'the lighthouse' / 'the hotel' do not qualify, 'His aunt' /
    'His mother' neither); None otherwise."""
    firsts = [o.split()[0].strip(".,;:!?\"'()").lower() if o.split() else "" for o in q.options]
    if any(len(o.split()) > SHORT_OPTION for o in q.options) or "" in firsts or len(set(firsts)) < len(firsts):
        return None
    return firsts


def word_probs(run: Run, q: Question, context: str) -> dict[str, float] | str:
    """Each option's probability as the first word of a free answer (the option written out, not
    its letter): a small model that knows who did it from the evidence often still maps the name to
    the wrong letter. A token that starts several options' words counts for none of them."""
    words = option_words(q)
    if words is None:
        return "the options are not short with distinct first words"
    alts = _next_tokens(run, READ_WORD, READ_WORD.render(context=context, question=question_head(q)))
    if isinstance(alts, str):
        return alts
    best: dict[str, float] = {}
    for token, lp in alts.items():
        piece = token.strip().strip("\"'").lower()
        hits = [w for w in words if piece and (w == piece or len(piece) >= 3 and w.startswith(piece))]
        if len(hits) == 1:
            best[hits[0]] = max(best.get(hits[0], -math.inf), lp)
    if not best:
        return f"none of the options' first words among the model's {TOP} most likely next tokens"
    return {letter: p for letter, p in zip(q.letters, _softmax(best, words).values())}


def orders(n: int, rotations: str) -> list[list[int]]:
    """The orders the options are shown in (order[pos]: the option shown at pos). `all`: every rotation,
    so each option is read once in each position (n calls); `two`: as given and reversed, which swaps
    first and last, the positions a small model favours most (2 calls); `one`: as given. On the MF² dev
    claims with `local`, two lost one pair of 60 to all at 30% fewer tokens; one order with the letters'
    prior divided out (Zhao et al., 2021: a content-free question over content-free evidence) lost 12."""
    check_rotations(rotations)
    if rotations == "all":
        return [[(i + shift) % n for i in range(n)] for shift in range(n)]
    return [list(range(n))] + ([list(reversed(range(n)))] if n > 1 and rotations == "two" else [])


def choose(run: Run, question: str, options: Sequence[str], context: str, rotations: str = "two") -> list[float] | str:
    """Each option's letter probability averaged over the orders `rotations` names."""
    n = len(options)
    shown = orders(n, rotations)
    mean = [0.0] * n
    for order in shown:
        mcq = Question(question, tuple(options[i] for i in order))
        probs = letter_probs(run, mcq, context)
        if isinstance(probs, str):
            return probs
        for pos, i in enumerate(order):
            mean[i] += probs[mcq.letters[pos]] / len(shown)
    return mean


def letter_probs(run: Run, q: Question, context: str) -> dict[str, float] | str:
    scores = label_scores(run, READ_LETTER, READ_LETTER.render(context=context, question=question_head(q)), q.letters)
    return scores if isinstance(scores, str) else _softmax(scores, q.letters)


CONTRAST_ALPHA = 0.5  # context-aware decoding's weight of the contrast (Shi et al., 2023: their default)
NO_EVIDENCE = "(no evidence)"


def calibrated(run: Run, q: Question, context: str, calibration: str = "content-free") -> Parsed:
    """yes/no over the evidence, corrected for the model's prior as `calibration` says: `content-free`
    divides by the yes/no of a content-free statement over the same evidence (Zhao et al., 2021);
    `contrast` is context-aware decoding (Shi et al., 2023), (1 + a) log p(v | evidence) - a log p(v | no
    evidence), a = CONTRAST_ALPHA, the second term the statement read with no evidence (closed book);
    `none` reads the yes/no as it is."""
    check_calibration(calibration)
    labels = ("yes", "no")
    raw = label_scores(run, READ_CLAIM, READ_CLAIM.render(context=context, claim=q.text), labels)
    reference: dict[str, float] | str = "not asked"
    if calibration != "none":
        other_context, other_claim = (context, CONTENT_FREE) if calibration == "content-free" else (NO_EVIDENCE, q.text)
        reference = label_scores(run, READ_CLAIM, READ_CLAIM.render(context=other_context, claim=other_claim), labels)
    if isinstance(raw, str):
        return Parsed.fail(raw)
    p = _softmax(raw, labels)
    if calibration == "none":
        cal = p
    elif isinstance(reference, str):  # said in the trace; the raw reading stands
        run.note(f"{calibration} calibration unavailable ({reference}); uncalibrated yes/no")
        cal = p
    else:
        pr = _softmax(reference, labels)
        if calibration == "content-free":
            w = {k: p[k] / max(pr[k], 1e-6) for k in labels}
        else:
            a = CONTRAST_ALPHA
            w = {k: math.exp((1 + a) * math.log(max(p[k], 1e-6)) - a * math.log(max(pr[k], 1e-6))) for k in labels}
        z = sum(w.values())
        cal = {k: v / z for k, v in w.items()}
    verdict = "TRUE" if cal["yes"] >= cal["no"] else "FALSE"
    run.trace.append(Step("scores", {"how": f"yes/no log-probabilities, calibration {calibration}",
                                     "p": {k: round(v, 4) for k, v in p.items()},
                                     "calibrated": {k: round(v, 4) for k, v in cal.items()}}))
    return Parsed(verdict, verdict, round(max(cal.values()), 4), False, how="logprobs")


def done(run: Run, parsed: Parsed) -> Parsed:
    run.trace.append(parse_step(parsed))
    return parsed


def shown_for_logprobs(run: Run, reading: Reading) -> None:
    """Said in the trace: the answer is read from log-probabilities, over every block shown."""
    run.note("reader: answer-token log-probabilities")
    run.show(reading.shown)


class LettersReader:
    """Multiple choice by the option letters' log-probabilities, in the orders `rotations` names (or by each
    short option's first word, option_words); several orders read a smaller budget each (`budget_tokens`)."""

    def __init__(self, settings: LettersSettings):
        self.settings = settings

    def budget(self, question: Question, default: int) -> int:
        rereads = question.kind == "mcq" and self.settings.rotations != "one"
        return self.settings.budget_tokens if rereads else default

    def read(self, run: Run, reading: Reading) -> Parsed:
        shown_for_logprobs(run, reading)
        q, rotations = reading.question, self.settings.rotations
        parsed = read_letter(run, q, reading.text, words=self.settings.option_words, rotations=rotations)
        if self.settings.cite == "follow-up" and not parsed.invalid and parsed.choice is not None \
                and parsed.choice in q.letters:
            # the conversation of the last order read (its prompt is the one the model has just read)
            order = orders(len(q.options), rotations)[-1]
            shown = Question(q.text, tuple(q.options[i] for i in order))
            letter = shown.letters[order.index(q.letters.index(parsed.choice))]
            cite(run, reading, READ_LETTER, READ_LETTER.render(context=reading.text, question=question_head(shown)),
                 letter)
        return parsed
