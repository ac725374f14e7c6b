"""Reading an answer out of a model's reply: JSON first, then tolerant fallbacks.

Fallbacks only accept an unambiguous reading (one letter named as the answer, a bare letter,
exactly one option's text, exactly one of TRUE/FALSE). Anything else is `invalid`: never a
guessed or default letter, so invalid rates stay honest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..backbones import Reply
from ..backbones.base import parse_json_reply
from .types import Question

ANSWER_KEYS = ("answer", "choice", "option", "label", "verdict", "final_answer")


@dataclass
class Parsed:
    choice: str | None
    text: str
    confidence: float | None
    invalid: bool
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    how: str = ""  # json | fallback

    @classmethod
    def fail(cls, error: str, data: dict[str, Any] | None = None) -> Parsed:
        return cls(None, "", None, True, error, data or {})


def _confidence(value: Any) -> float | None:
    """1-3 ratings become 1/3, 2/3, 1; a 0-1 probability is kept; anything else is None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if 1 <= x <= 3 and x == int(x):
        return round(x / 3, 4)
    if 0 <= x <= 1:
        return x
    return None


def _letter(value: str, q: Question) -> str | None:
    """An option's exact text, 'B', '(B)', 'B.', 'Option B', or 'B) text' / 'B. text' -> 'B'."""
    v = value.strip()
    for letter, opt in zip(q.letters, q.options):
        if v.lower().rstrip(".") == opt.lower().rstrip("."):
            return letter
    m = re.fullmatch(r"(?:(?:option|answer|choice)\s*)?[\(\[]?([A-Ja-j])[\)\]]?[.:]?", v, re.I)
    if m is None:
        m = re.match(r"[\(\[]?([A-J])[\)\].:]\s+\S", v)
    if m and m.group(1).upper() in q.letters:
        return m.group(1).upper()
    return None


def _claim(value: str) -> str | None:
    words = set(re.findall(r"\b(true|false|yes|no)\b", value.lower()))
    said_true, said_false = bool(words & {"true", "yes"}), bool(words & {"false", "no"})
    if said_true != said_false:
        return "TRUE" if said_true else "FALSE"
    return None


def _from_value(value: str, q: Question) -> tuple[str | None, str]:
    if q.kind == "mcq":
        letter = _letter(value, q)
        return letter, (q.options[q.letters.index(letter)] if letter else "")
    if q.kind == "claim":
        verdict = _claim(value)
        return verdict, verdict or ""
    text = value.strip()
    return (None, text)


_LISTED = re.compile(r"^\s*[\(\[]?([A-J])[\)\].:]\s+\S", re.M)


def _fallback(text: str, q: Question) -> tuple[str | None, str, str]:
    """Readings of free text that leave no doubt: (choice, words, ''), else (None, '', why).
    A reply that lists the options again, or names or hedges between several letters, is invalid:
    taking its first listed letter scored echoed option lists as A."""
    if q.kind == "open":
        return None, text.strip(), ""
    if q.kind == "claim":
        verdict = _claim(text)
        return verdict, verdict or "", "" if verdict else "no unambiguous TRUE or FALSE in the reply"
    letters = set(q.letters)
    if len(set(_LISTED.findall(text)) & letters) > 1:
        return None, "", "the reply lists several options (an echo of the question), not one answer"
    said = {m.upper() for m in re.findall(r"(?:answer|option|choice)\s*(?:is|would be|:)?\s*[\(\[]?\b([A-J])\b", text, re.I)}
    # letters standing alone (not the article in "A letter ...", but "A or B" is two): more than one is a hedge
    alone = set(re.findall(r"\b([A-J])\b(?!\s+(?!(?:or|and)\b)[a-z])", text))
    named = (said | alone) & letters
    if len(named) > 1:
        return None, "", f"the reply names several letters ({', '.join(sorted(named))})"
    letter = _letter(text, q) or next(iter(said & letters), None)
    if letter is None:
        texts = [c for c, opt in zip(q.letters, q.options) if opt and opt.lower() in text.lower()]
        letter = texts[0] if len(texts) == 1 else None
    if letter is None:
        return None, "", "no unambiguous answer in the reply"
    return letter, q.options[q.letters.index(letter)], ""


def parse_answer(reply: Reply | str, q: Question) -> Parsed:
    """The answer in `reply` to `q`, or an invalid Parsed saying why."""
    if isinstance(reply, str):
        reply = Reply(text=reply)
    text = reply.text or ""  # the model's own reply only: never a raw HTTP body ("The answer is B" in a 200 text/plain)
    if not text.strip():
        return Parsed.fail(reply.error or "empty reply")
    data = reply.data if isinstance(reply.data, dict) else parse_json_reply(text)
    if isinstance(data, dict):
        raw = next((data[k] for k in ANSWER_KEYS if k in data and data[k] not in (None, "")), None)
        if raw is not None:
            choice, words = _from_value(str(raw), q)
            conf = _confidence(data.get("confidence"))
            if q.kind == "open" and words:
                # a free answer's self-rating is checked against nothing (the local model rates every one 3,
                # shown as 1.00): no confidence rather than one that means nothing
                return Parsed(None, words, None, False, data=data, how="json")
            if choice:
                return Parsed(choice, words, conf, False, data=data, how="json")
            return Parsed.fail(f"the answer {str(raw)[:60]!r} is not one of the allowed answers", data)
    choice, words, why = _fallback(text, q)
    if q.kind == "open" and words:
        return Parsed(None, words, None, False, how="fallback")
    if choice:
        return Parsed(choice, words, None, False, how="fallback")
    return Parsed.fail(reply.error or why, data if isinstance(data, dict) else None)
