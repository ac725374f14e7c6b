"""Who speaks a text film's lines, where its own words say so (a film without voices).

Each rule gives a line a speaker with a reason and a confidence; a line no rule reaches stays
unattributed (never a guess shown as a fact):
- tag (0.95): a `NAME:` prefix or a [Name] tag the transcript kept as the line's speaker;
- self (0.85): "I'm X", "My name is X";
- dash-reply (0.8): the second turn of a cue with dialogue dashes answers a first turn that calls
  someone ("- Mrs. Errol, I believe. - Yes, I'm Mrs. Errol."): the dashes say the speaker changed;
- vocative-reply (0.6, 0.7 after a question): the line right after one that calls X by name
  ("Carl! When did you get home?" - "I haven't been out.") is X's, when it follows within
  REPLY_GAP_S and does not continue the line before;
- called-back (0.6): the line a reply calls by name answers was said by the one it calls ("Here's to
  your health, Ceddie." - "Thank you very much, Mr. Hobbs.": Hobbs said the first);
- continues (x0.9): a line that carries on the sentence of the one before ("...but I had a hell of
  a time") is the same person's;
- caller (0.55): in an exchange where only two people are known, a line that calls one of them by
  name is the other's ("See, Dearest, you're Maid Marian");
- alternation (0.45): in an exchange where only two people are known (attributed or called by
  name around it), the line right after one of them (or right before) is the other's where the text
  shows the turn changes: dashes, an answer to a question, a greeting or thanks returned.
A line that calls X, or speaks of X, is never X's (unless X introduces themself). Turns are the
transcript's lines (ingest/turns.py splits cues at dialogue dashes): two lines sharing a split
cue's boundary are two speakers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .aliases import norm
from .names import _ADDR_END, _ADDR_START, _NAME, _SELF, Character, Line, _clean, bare, name_lexicon, spelled

REPLY_GAP_S = 2.5  # a reply follows the line that calls its speaker within this pause
CONTINUE_GAP_S = 1.5  # a sentence carried over to the next cue
EXCHANGE_S = 30.0  # the people of an exchange: those attributed or called within this much of the line ...
EXCHANGE_GAP_S = 4.0  # ... in lines that follow each other within this pause ...
EXCHANGE_LINES = 6  # ... at most this many lines either side
CONFIDENCE = {"tag": 0.95, "self": 0.85, "dash-reply": 0.8, "vocative-reply": 0.6, "question-reply": 0.7,
              "called-back": 0.6, "caller": 0.55, "alternation": 0.45}
_OPEN_END = re.compile(r"(?:\.\.\.|\u2026|[,;:-]|[A-Za-z0-9'])\s*$")  # a sentence left open: no closing mark
_CONT_START = re.compile(r"^\s*(?:\.\.\.|\u2026|[a-z])")


@dataclass(frozen=True)
class Said:
    char_id: str
    confidence: float
    reason: str  # a key of CONFIDENCE, or "continues"
    source: int  # the line whose words gave it


class _Names:
    """The registry's names as lines write them: each name's pattern and the one character it belongs to."""

    def __init__(self, chars: Sequence[Character], lexicon: set[str]):
        self.lexicon = lexicon
        owner: dict[str, set[str]] = {}
        for c in chars:
            for n in c.names:
                owner.setdefault(norm(n), set()).add(c.char_id)
                if bare(n) != n:
                    owner.setdefault(norm(bare(n)), set()).add(c.char_id)
        self.owner = {n: next(iter(cs)) for n, cs in owner.items() if len(cs) == 1}
        self.patterns = [(c.char_id, re.compile(spelled(n))) for c in chars for n in c.names]

    def who(self, name: str) -> str | None:
        return self.owner.get(norm(_clean(name)))

    def named(self, text: str) -> set[str]:
        return {cid for cid, pat in self.patterns if pat.search(text)}


def addressed(text: str, names: _Names) -> tuple[set[str], bool]:
    """Whom a line calls by name (a vocative at its start or end): the characters, or "?Name" for a
    name no character holds; and whether the call is the line's last word or the line a question
    (then the next line is the answer, not more of the same speaker)."""
    found, closing = set(), text.rstrip().endswith("?")
    text = text.strip()
    for m, last in [(_ADDR_START.match(text), False), (_ADDR_SECOND.match(text), False), (_ADDR_END.search(text), True)]:
        if m is None:
            continue
        cid = names.who(m.group(1))
        if cid is None and bare(_clean(m.group(1))) == _clean(m.group(1)) and m.group(1) not in names.lexicon:
            continue
        found.add(cid or "?" + norm(_clean(m.group(1))))
        closing = closing or last or not text[m.end():].strip(" .!?\u2026")
    return found, closing


_ADDR_SECOND = re.compile(r"^[A-Z][a-z]+,\s+" + _NAME + r"\s*(?:[,!?]|\.{2,}|\u2026)")  # "See, Dearest, you're..."


def _self(text: str, names: _Names) -> str | None:
    for pat, _w in _SELF:
        for m in pat.finditer(text):
            cid = names.who(m.group(1))
            if cid:
                return cid
    return None


def attribute(lines: Sequence[Line], chars: Sequence[Character]) -> dict[int, Said]:
    """Each line's speaker where a rule (module docstring) gives one, keyed by the line's idx."""
    names = _Names(chars, name_lexicon([ln.text for ln in lines]))
    order = sorted(lines, key=lambda ln: (ln.start, ln.idx))
    calling = [addressed(ln.text, names) for ln in order]
    calls = [c for c, _ in calling]
    said_of = [names.named(ln.text) for ln in order]
    own = [_self(ln.text, names) for ln in order]
    out: dict[int, Said] = {}

    def give(k: int, cid: str, reason: str, source: int, conf: float | None = None) -> None:
        ln = order[k]
        if ln.idx in out or (cid in said_of[k] and own[k] != cid):
            return
        out[ln.idx] = Said(cid, round(conf if conf is not None else CONFIDENCE[reason], 3), reason, source)

    for k, ln in enumerate(order):
        cid = names.who(ln.tag) if ln.tag else None
        if cid:
            give(k, cid, "tag", ln.line)
        elif self_named := own[k]:
            give(k, self_named, "self", ln.line)
    for k in range(1, len(order)):
        prev, ln = order[k - 1], order[k]
        if len(calls[k - 1]) != 1 or continues(prev, ln) or not calling[k - 1][1]:
            continue
        (cid,) = calls[k - 1]
        if cid.startswith("?"):
            continue
        if dashed(prev, ln):
            give(k, cid, "dash-reply", prev.line)
        elif _GREETING.match(prev.text) and not (_GREETING.match(ln.text) or _ANSWER.match(ln.text)):
            continue  # "Good evening, Mr Verloc." is as often followed by more of the greeter's words
        elif ln.start - prev.end <= REPLY_GAP_S:
            give(k, cid, "question-reply" if prev.text.rstrip().endswith("?") else "vocative-reply", prev.line)
    for k in range(len(order) - 1):  # the line a reply answers by name is the named one's
        ln, nxt = order[k], order[k + 1]
        if len(calls[k + 1]) != 1 or continues(ln, nxt) or nxt.start - ln.end > REPLY_GAP_S or calls[k]:
            continue
        (cid,) = calls[k + 1]
        if not cid.startswith("?") and answers(ln.text, nxt.text):
            give(k, cid, "called-back", nxt.line)
    _carry(order, out, give)
    for k in range(len(order)):  # in a two-person exchange, who calls one of them by name is the other
        people = _people(order, k, out, calls)
        known = {p for p in people if not p.startswith("?")}
        mine = {c for c in calls[k] if not c.startswith("?")}
        if len(mine) == 1 and len(people) == 2 and known == people and order[k].idx not in out:
            give(k, next(iter(known - mine)), "caller", order[k].line)
    _alternate(order, out, calls, give)
    _carry(order, out, give)
    return out


_ANSWER = re.compile(r"^\W*(?:yes|yeah|no|nope|thank you|thanks|all right|okay|ok|sorry|certainly|of course|very well|"
                     r"right|sure|indeed|not at all|I will|I do|I am|I'm sorry)\b", re.IGNORECASE)
_GREETING = re.compile(r"^\W*(?:(?:oh|well|and),?\s+)?(?:good (?:morning|afternoon|evening|night|day|bye)|good-bye|goodbye|hello|hi|hey|"
                       r"how do you do|bye)\b", re.IGNORECASE)


def answers(said: str, reply: str) -> bool:
    """Whether `reply` opens as an answer to `said`: a yes, a no, a thanks, or a greeting given back."""
    greeting = _GREETING.match(reply)
    if greeting:
        return bool(_GREETING.match(said))
    return bool(_ANSWER.match(reply))


def turn_changes(a: Line, b: Line) -> bool:
    """The text shows another person speaks `b`: dialogue dashes, or `b` answers `a`'s question, thanks or
    greeting (a subtitle cue is no turn: one person's speech often runs over several)."""
    return dashed(a, b) or a.text.rstrip().endswith("?") or answers(a.text, b.text)


def dashed(a: Line, b: Line) -> bool:
    """Two turns of one subtitle cue split at its dialogue dashes: the first ends where the second starts."""
    return a.end == b.start and a.line != b.line


def continues(a: Line, b: Line) -> bool:
    """`b` carries on `a`'s sentence: `a` is left open ("...", a comma) or `b` opens with "..." or a
    small letter, within CONTINUE_GAP_S, and no dash between them."""
    if dashed(a, b) or b.start - a.end > CONTINUE_GAP_S:
        return False
    return bool(_OPEN_END.search(a.text.strip()) or _CONT_START.match(b.text))


def _carry(order: Sequence[Line], out: dict[int, Said], give: object) -> None:
    """A line that continues an attributed one (or is continued by one) is the same person's."""
    assert callable(give)
    changed = True
    while changed:
        changed = False
        for k in range(1, len(order)):
            a, b = order[k - 1], order[k]
            if not continues(a, b):
                continue
            for src, dst in ((a, k), (b, k - 1)):
                s = out.get(src.idx)
                if s is not None and order[dst].idx not in out:
                    give(dst, s.char_id, "continues", s.source, s.confidence * 0.9)
                    changed = changed or order[dst].idx in out


def _alternate(order: Sequence[Line], out: dict[int, Said], calls: Sequence[set[str]], give: object) -> None:
    """One step of turn alternation from each attributed line, inside a two-person exchange."""
    assert callable(give)
    anchored = {idx: s for idx, s in out.items()}
    for k, ln in enumerate(order):
        if ln.idx in out:
            continue
        for j in (k - 1, k + 1):
            if not 0 <= j < len(order) or order[j].idx not in anchored:
                continue
            a, b = (order[j], ln) if j < k else (ln, order[j])
            if continues(a, b) or b.start - a.end > REPLY_GAP_S or not turn_changes(a, b):
                continue
            people = _people(order, k, anchored, calls)
            other = {p for p in people if not p.startswith("?")} - {anchored[order[j].idx].char_id}
            if len(people) == 2 and len(other) == 1:
                give(k, next(iter(other)), "alternation", order[j].line)
                break


def _people(order: Sequence[Line], k: int, anchored: dict[int, Said], calls: Sequence[set[str]]) -> set[str]:
    """The people of the exchange around line k (EXCHANGE_LINES either side that follow each other within
    EXCHANGE_GAP_S, at most EXCHANGE_S away): those its lines are attributed to and those they call, known or not."""
    t = order[k].start
    lo = hi = k
    while lo > 0 and k - lo < EXCHANGE_LINES and order[lo].start - order[lo - 1].end <= EXCHANGE_GAP_S \
            and t - order[lo - 1].start <= EXCHANGE_S:
        lo -= 1
    while hi + 1 < len(order) and hi - k < EXCHANGE_LINES and order[hi + 1].start - order[hi].end <= EXCHANGE_GAP_S \
            and order[hi + 1].start - t <= EXCHANGE_S:
        hi += 1
    people: set[str] = set()
    for j in range(lo, hi + 1):
        s = anchored.get(order[j].idx)
        if s is not None:
            people.add(s.char_id)
        people |= calls[j]
    return people
