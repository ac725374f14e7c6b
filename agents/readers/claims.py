"""Ways to judge a claim TRUE or FALSE (hybrid's `claims` setting; `foils` by default).

A small model says "yes" to a statement and to its minimal edit alike (MF² false claims change one
detail: a name, number, place, object, order or cause), even after contextual calibration. What it
does well is pick the better-supported of a few options (the letter reader). So each reader here
turns the claim into a choice the evidence can settle:
- foils: versions of the claim that the evidence might support instead are set against the claim,
  which is TRUE when the evidence supports it over every version. Three kinds, all general rules:
  a name or number the evidence found for the claim never mentions, swapped for one the evidence
  holds; the two events of "A before/after B" swapped (an order edit swaps exactly these; where
  the evidence's lines clearly tell both events, or else their best lines in the film, found by the
  caller, are told apart, their screen order settles the claim with no model call); and the cause
  of "A because B" (or purpose, "in order to", "so that") rewritten by the model from the evidence
  with the claim's own cause hidden (a cloze, so it cannot copy it) when its words differ from the
  claim's. A claim with none of these is set against its negation
  ("It is not true that ..."; said in the trace): asked yes or no instead, even calibrated, the
  model said yes to every one of the 49 such dev claims, false ones too. On the MF² dev set's 60
  pairs with `local`: see README, "Answering on real films".
- qa (issue 20's proposal): the claim becomes questions about its details with its own answers (no
  evidence shown, so the claim cannot steer the reading); the questions are answered from the
  evidence; the claim is TRUE when the answers agree. It needs a model that writes sensible
  questions: the 1.5B `local` model writes "Who?" / "What?" and then disagrees with true claims.
The letter reader favours some positions, so every choice is read in two orders, as given and
reversed (`rotations=all`: every rotation). A version that changes one stretch of the claim (a name, a
number, the cause) is shown as the words that fill that blank, not as a whole statement: five long
sentences that differ in one word read alike to a 1.5B model (their letter probabilities within
0.18-0.22), while short fillers are told apart as multiple-choice options are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from text_to_num import alpha2digit

from ...backbones import system, user
from ...backbones.base import parse_json_reply
from ...backbones.prompt import Prompt
from ...foundation.errors import MovieMemError
from ...foundation.words import dialogue_stop_words
from ...memory.view import FilmMemory
from ..base import Run
from ..parsing import Parsed
from ..prompts import CLAIM_ANSWERS, CLAIM_CLOZE, CLAIM_QUESTIONS, READ_CLAIM
from ..types import LETTERS, Question, Step
from .base import Reading
from .cite import cite
from .letters import calibrated, choose, done, shown_for_logprobs
from .settings import CLAIM_READERS, ClaimsSettings, check_reading

MAX_FOILS = 4
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,]\d+)?(?:st|nd|rd|th)?")  # '3rd' is an ordinal, no number


def lowercase_words(text: str) -> set[str]:
    """The words a text writes in lower case somewhere: ordinary words, whatever a sentence start does to them."""
    return {w for w in _TOKEN.findall(text) if w.islower()}


def read_claim(run: Run, q: Question, context: str, how: str = "calibrated", common: AbstractSet[str] = frozenset(),
               located: Callable[[], bool | None] | None = None, rotations: str = "two", form: str = "blanks",
               calibration: str = "content-free") -> Parsed:
    """A claim's verdict from `context`, judged the way `how` names; `common`: words the film's own text
    writes in lower case, which are no names where a claim capitalises them ("Waiting at the inn, Tom ...");
    `located`: whether the claim's order of two events agrees with where the film shows them (foils asks
    it only when the evidence's own lines do not place both events); `rotations`: the orders in which
    foils and qa show the statements they choose between (`letters.orders`); `form`: whether foils shows its
    versions as whole statements or, where a version changes one stretch of words, as the words that fill
    that blank in the claim (`_groups`); `calibration`: how the calibrated reader corrects for the model's
    prior (`reader.calibrated`)."""
    check_reading(rotations, form)
    if how == "calibrated":
        return done(run, calibrated(run, q, context, calibration))
    if how == "foils":
        return done(run, _read_foils(run, q, context, common, located, rotations, form))
    if how == "qa":
        return done(run, _read_qa(run, q, context, rotations))
    raise MovieMemError(f"unknown claim reader {how!r}; use one of {', '.join(CLAIM_READERS)}")


# ----------------------------------------------------------------------------- foils


def _number(word: str) -> float | None:
    """A token's value as a number: '1,000', '2.5', 'two', 'thirty-five' (text2num reads the words)."""
    try:
        return float(alpha2digit(word, "en", threshold=0).replace(",", ""))
    except ValueError:
        return None


def numerals(text: str) -> str:
    """Number words as digits ('two hundred and fifty' -> '250', 'thirty-five' -> '35'), so a claim's
    '$250' is found in evidence that spells it out; isolated 'one' and 'two' stay words ('no one')."""
    return str(alpha2digit(text, "en"))


_TIME = re.compile(r"\[E\d+\]|\d{1,2}:\d{2}(?::\d{2})?(?:-\d{1,2}:\d{2}(?::\d{2})?)?")  # evidence ids and times


_TITLES = ("Mr", "Mrs", "Ms", "Dr", "St")  # a full stop after one of these ends no sentence and parts no name
_OPENING = re.compile(r"(?:^|" + "".join(rf"(?<!\b{t})" for t in _TITLES) + r"[.!?…:;]|[\"“(\[]|\s-)\s*"
                      r"([A-Za-z][A-Za-z'-]*)", re.MULTILINE)


def sentence_openers(text: str) -> set[str]:
    """Words a text writes only where a sentence or line opens: there a capital says nothing of a
    name ('Hi, Pop.', 'Maybe.', 'Look here.'), while 'Pop' written mid-sentence is one."""
    opening = Counter(m.group(1) for m in _OPENING.finditer(_TIME.sub(" ", text)))
    every = Counter(_TOKEN.findall(_TIME.sub(" ", text)))
    return {w for w, n in opening.items() if every[w] <= n}


def specifics(text: str, lowercase: set[str], openers: AbstractSet[str] = frozenset()) -> list[tuple[str, str]]:
    """The names and numbers of a text, in order, as (kind, words): a name is a run of capitalised
    words that the text (or `lowercase`, words seen uncapitalised elsewhere) never writes in lower
    case, and none of `openers` (words seen only opening a sentence); a contraction of a stop word
    ("I've", "He's") is none, nor a word in capitals only (subtitles for the deaf write sounds that
    way: SINGING, FRENCH, DOOR SLAMS); evidence ids and times are not numbers of the story."""
    stop = dialogue_stop_words()
    plain = _TIME.sub(" ", text)
    found = list(_TOKEN.finditer(plain))
    words = [m.group() for m in found]
    # a name's words are separated by spaces alone ("Rome, Rosa" is two names), or follow a title ("Mr. Pruitt")
    joined = [bool(re.fullmatch(r"[ \t]+", sep) or a.group() in _TITLES and re.fullmatch(r"\.[ \t]+", sep))
              for a, b in zip(found, found[1:]) for sep in [plain[a.end():b.start()]]] + [False]
    seen_lower = lowercase | {w for w in words if w.islower()}
    out: list[tuple[str, str]] = []
    run: list[str] = []
    for w, glued in [*zip(words, joined), ("", False)]:
        number = _number(w) is not None if w else False
        base = w.lower().removesuffix("'s").removesuffix("'")
        if (w and not number and w[0].isupper() and len(base) > 1 and base not in stop and base.split("'")[0] not in stop
                and w.lower() not in seen_lower and w not in openers and not w.isupper()):
            run.append(w)
            if not glued:
                out.append(("name", " ".join(run)))
                run = []
            continue
        if run:
            out.append(("name", " ".join(run)))
            run = []
        if number:
            out.append(("number", w))
    return out


def _name_words(name: str) -> set[str]:
    """A name's words without titles or the possessive: 'Mr Pruitt's' -> {'Pruitt'}."""
    return {w.removesuffix("'s").removesuffix("'") for w in name.split() if w not in _TITLES}


def _named(words: set[str], named: list[set[str]]) -> bool:
    """Whether the evidence names a claim's name: by part of it ('Mr. Ledger' for 'Pop Ledger') or as
    part of a longer name ('Hale' in 'Governor Hale', where the film writes 'governor' in lower case too)."""
    return any(n <= words or words <= n for n in named)


# a claim opening with a participle and its preposition ("Questioned near the station, ...", "Asked if ...")
_PARTICIPLE_OPENING = re.compile(
    r"\s*([A-Z][a-z]{2,}(?:ed|ing))\s+(?:about|across|after|again|alone|as|at|before|behind|beside|by|during|for|from|if|"
    r"in|inside|into|near|on|outside|over|since|that|through|to|under|when|while|with)\b")


def participle_opening(claim: str, names: AbstractSet[str]) -> set[str]:
    """The claim's opening word, lower-cased, where it is a participle opening a phrase ("Questioned
    near the station, Benny ...") and not one of `names` (what the evidence writes as a name), which
    'Mildred at the inn' would be: a capital there says nothing of a name, even for a word the film never
    writes in lower case."""
    m = _PARTICIPLE_OPENING.match(claim)
    return {m.group(1).lower()} if m and m.group(1) not in names else set()


def foils(claim: str, context: str, most: int = MAX_FOILS, common: AbstractSet[str] = frozenset()) -> list[str]:
    """Versions of the claim with one of its names or numbers that the evidence never mentions
    swapped for one the evidence holds and the claim does not (most frequent first). Details the
    evidence mentions are not challenged: a true claim's details are usually in the evidence found
    for it, a changed detail often is not. A name counts as mentioned where the evidence names the
    same one by part of it ('Pop Ledger' as 'Mr. Ledger', 'Greta's' as 'Greta'; 'Salt River' is no
    part of 'Cedar River') or within a longer name, and a name made only of a claim's own name words is no substitute
    ('Ledger' for 'Pop Ledger' says the same; 'Coast' from 'Coast Guard' says nothing)."""
    context = numerals(context)
    lowercase = lowercase_words(context)
    found = specifics(context, lowercase, sentence_openers(context))  # what may be swapped in: names, not openers
    opening = participle_opening(claim, {w for k, n in found if k == "name" for w in n.split()})
    mine = list(dict.fromkeys(specifics(claim, lowercase | set(common) | opening)))

    def value(kind: str, w: str) -> object:
        return (kind, _number(w) if kind == "number" else w)

    mentioned = {value(k, w) for k, w in found}
    named = [words for k, w in found if k == "name" and (words := _name_words(w))]
    claimed = {value(k, w) for k, w in mine}
    claim_names = set().union(*(_name_words(w) for k, w in mine if k == "name"))
    theirs: dict[str, Counter[str]] = {"name": Counter(), "number": Counter()}
    for kind, w in found:
        if value(kind, w) not in claimed and not (kind == "name" and _name_words(w) <= claim_names):
            theirs[kind][w] += 1
    queues = [(w, [c for c, _ in theirs[kind].most_common(most)]) for kind, w in mine
              if value(kind, w) not in mentioned and not (kind == "name" and _named(_name_words(w), named))]
    out: list[str] = []
    for rank in range(most):
        for word, candidates in queues:
            if rank < len(candidates) and len(out) < most:
                swapped = re.sub(rf"(?<![\w'-]){re.escape(word)}(?![\w'-])", candidates[rank], claim)
                if swapped != claim and swapped not in out:
                    out.append(swapped)
    return out


_ORDER = re.compile(r"\s+(before|after)\s+", re.IGNORECASE)
_CAUSE = re.compile(r"\s+(because of|because|in order to|so that)\s+", re.IGNORECASE)
_END = ".!?"


def _clauses(claim: str, pattern: re.Pattern[str], least: int) -> tuple[str, str, str, str] | None:
    """(head, connective, tail, final punctuation) for a claim with exactly one connective, each
    side at least `least` words long (so 'the night before' is not an order of two events)."""
    text = claim.strip()
    end = text[-1] if text and text[-1] in _END else ""
    parts = pattern.split(text[: len(text) - len(end)])
    if len(parts) != 3 or min(len(parts[0].split()), len(parts[2].split())) < least:
        return None
    return parts[0].rstrip(" ,;"), parts[1].lower(), parts[2].strip(), end


def ordered_events(claim: str) -> tuple[str, str, str] | None:
    """(A, 'before' | 'after', B) for a claim that orders two events, or None."""
    split = _clauses(claim, _ORDER, 3)
    return None if split is None else split[:3]


def joined_parts(claim: str) -> tuple[str, str] | None:
    """The two sides of a claim that joins two events by order or cause ('A before B', 'A because B'),
    each a query of its own where the whole claim's words favour one side."""
    split = _clauses(claim, _ORDER, 3) or _clauses(claim, _CAUSE, 2)
    return None if split is None else (split[0], split[2])


def order_swapped(claim: str, context: str = "") -> str | None:
    """'A before B.' as 'B before A.' (and 'after' alike): an order edit swaps exactly these two
    events, so the swapped claim is the version the evidence must rule out. The old first word
    goes to lower case when it is an ordinary word (written in lower case in the claim or evidence)."""
    split = _clauses(claim, _ORDER, 3)
    if split is None:
        return None
    a, word, b, end = split
    return f"{b[0].upper()}{b[1:]} {word} {_mid_sentence(a, f'{claim} {context}')}{end}"


def _mid_sentence(clause: str, context: str) -> str:
    """A sentence's opening as it reads inside another sentence: its first word in lower case when it
    is an ordinary word (written in lower case in the clause or context, or a stop word), not a name."""
    first, _, rest = clause.partition(" ")
    if first.lower() in lowercase_words(f"{clause} {context}") | dialogue_stop_words():
        first = first.lower()
    return f"{first} {rest}".rstrip()


def negated(claim: str, context: str = "") -> str:
    """The claim denied: the one version left to set against it when nothing in it can be swapped."""
    return f"It is not true that {_mid_sentence(claim.strip(), context)}"


_HEAD = re.compile(r"^\[E\d+\]\s+[\d:.]+-[\d:.]+\s+\([^)]*\):?\s*")
CLEAR_MATCH = 0.5  # share of an event's content words that the one stretch of evidence placing it must hold
WINDOW = 3  # lines: an event is told over a short exchange


def _evidence_lines(context: str) -> list[str]:
    """The evidence's lines in the order shown, which is screen order: blocks are listed by time
    and a passage's lines in their order."""
    return [text for raw in context.splitlines() if (text := _HEAD.sub("", raw.strip()))]


def timeline_blocks(claim: str, context: str) -> list[str]:
    """The ids of the evidence blocks (E1, ...) holding the lines that place the claim's two events
    (`timeline_order`): what a verdict read from their order rests on."""
    split = ordered_events(claim)
    lines: list[str] = []
    blocks: list[str] = []
    block = ""
    for raw in context.splitlines():
        head = re.match(r"\[(E\d+)\]", raw.strip())
        block = head.group(1) if head else block
        if text := _HEAD.sub("", raw.strip()):
            lines.append(text)
            blocks.append(block)
    if split is None or not lines:
        return []
    words = [_stems(line) for line in lines]
    at = [_placed(split[0], words), _placed(split[2], words)]
    return list(dict.fromkeys(blocks[i] for i in at if i is not None and blocks[i]))


def _placed(clause: str, lines: list[set[str]]) -> int | None:
    """The line that tells the clause's event: within the stretch of WINDOW lines holding the most
    of its content words (at least CLEAR_MATCH of them, every stretch holding as many overlapping
    it), the line holding the most of them itself."""
    want = _stems(clause)
    if not want or not lines:
        return None
    windows = [set().union(*lines[i:i + WINDOW]) for i in range(len(lines))]
    shares = [len(want & words) / len(want) for words in windows]
    best = max(shares)
    at = [i for i, share in enumerate(shares) if share == best]
    if best < CLEAR_MATCH or at[-1] - at[0] >= WINDOW:
        return None
    span = range(at[0], min(len(lines), at[-1] + WINDOW))
    return max(span, key=lambda i: (len(want & lines[i]), -i))


def timeline_order(claim: str, context: str) -> bool | None:
    """Whether 'A before/after B' agrees with the order in which the evidence shows the two events:
    each is placed at the stretch of lines that clearly tells it. None when the claim orders no two
    events, either cannot be placed, or both fall on one line (a flashback would mislead it; rare)."""
    split = ordered_events(claim)
    lines = _evidence_lines(context)
    if split is None or not lines:
        return None
    words = [_stems(line) for line in lines]
    a, word, b = split
    pa, pb = _placed(a, words), _placed(b, words)
    if pa is None or pb is None or pa == pb:
        return None
    return (pa < pb) == (word == "before")


def _cloze_answer(reply: str, head: str, connective: str) -> str:
    """The words the model wrote for the hidden part: its first line, without the sentence's
    head when the model repeated the whole sentence, and without closing punctuation."""
    text = reply.strip().splitlines()[0] if reply.strip() else ""
    lowered = text.lower()
    if f" {connective} " in lowered:  # the sentence restated, its subject perhaps a pronoun now
        text = text[lowered.rindex(f" {connective} ") + len(connective) + 2:]
    text = text.strip().strip('"\'').rstrip(_END).strip()
    first, _, rest = text.partition(" ")
    return f"{first.lower()} {rest}".strip() if first.lower() in dialogue_stop_words() else text


def cause_foil(run: Run, claim: str, context: str) -> str | None:
    """The claim with its cause (or purpose) as the model completes it from the evidence, the
    claim's own being hidden; None when the claim states no cause, the model wrote nothing, or
    its words agree with the claim's."""
    split = _clauses(claim, _CAUSE, 2)
    if split is None:
        return None
    head, connective, tail, end = split
    reply = run.chat(CLAIM_CLOZE, [system(CLAIM_CLOZE.system),
                                   user(CLAIM_CLOZE.render(context=context, sentence=f"{head} {connective}"))],
                     max_tokens=32, temperature=0.0)
    if reply.invalid:
        run.note(f"claim reader: no cloze for the claim's cause ({reply.error or 'the backbone failed'})")
        return None
    written = _cloze_answer(reply.text, head, connective)
    if not written or agreement(tail, written) >= AGREE:
        return None
    return f"{head} {connective} {written}{end}"


def _read_foils(run: Run, q: Question, context: str, common: AbstractSet[str] = frozenset(),
                located: Callable[[], bool | None] | None = None, rotations: str = "two",
                form: str = "blanks") -> Parsed:
    swapped = order_swapped(q.text, context)
    in_order = timeline_order(q.text, context) if swapped else None
    where = "on the evidence's timeline"
    if swapped and in_order is None and located is not None:
        in_order, where = located(), "at their lines in the film"
    if in_order is not None:
        run.trace.append(Step("scores", {"how": f"the claim's two events placed {where}", "agrees": in_order}))
        if not in_order:
            return Parsed("FALSE", "FALSE", None, False, how="timeline")
        swapped = None  # the order is settled; other details are still challenged
    kinds = {"order": swapped, "cause": cause_foil(run, q.text, context)}
    versions = [v for v in kinds.values() if v] + foils(q.text, context, common=common)
    if not versions and in_order:
        return Parsed("TRUE", "TRUE", None, False, how="timeline")
    if not versions:  # a yes/no question here gets "yes" whatever the claim (calibrated: 49 of 49 dev claims)
        run.note("claim reader: no order or cause to set against the claim, and every name and number of it is in "
                 "the evidence (or the evidence offers no other): the claim is set against its negation")
        negation = negated(q.text, context)
        kinds["negation"] = negation
        versions = [negation]
    if form == "statements":
        groups = [(STATEMENTS, q.text, versions, versions)]
    else:
        whole = [v for v in (kinds["order"], kinds.get("negation")) if v]  # two events swapped, or the claim denied
        groups = _groups(q.text, [v for v in versions if v not in whole], whole)
    verdict, confidence = "TRUE", 1.0
    for question, mine, theirs, shown in groups:
        options = list(dict.fromkeys([mine, *theirs]))[: len(LETTERS)]
        mean = choose(run, question, options, context, rotations)
        if isinstance(mean, str):
            return Parsed.fail(mean)
        best = max(range(len(options)), key=lambda i: (mean[i], i == 0))
        if best != 0:
            verdict, confidence = "FALSE", mean[best]
        elif verdict == "TRUE":
            confidence = min(confidence, mean[0])
        run.trace.append(Step("scores", {
            "how": "claim against its versions (events swapped, cause from the evidence, the evidence's names and "
                   "numbers, or else its negation), letter log-probabilities", "rotations": rotations, "form": form,
            "question": question, "statements" if question == STATEMENTS else "options":
            options, "kinds": [k for k, v in kinds.items() if v in shown], "p": [round(m, 4) for m in mean]}))
    return Parsed(verdict, verdict, round(confidence, 4), False, how="logprobs")


STATEMENTS = "Which of these statements about the film is true?"


def _cuts_a_word(text: str, i: int) -> bool:
    """Whether a cut before text[i] falls inside a word or a number ("Hale's", '2,500', '0.35')."""
    if not 0 < i < len(text):
        return False
    left, right = text[i - 1], text[i]
    if (left.isalnum() or left == "'") and (right.isalnum() or right == "'"):
        return True
    return (left.isdigit() and right in ".," and text[i + 1: i + 2].isdigit()
            or left in ".," and right.isdigit() and text[i - 2: i - 1].isdigit())


def blank_of(claim: str, version: str) -> tuple[str, str, str] | None:
    """(the claim with ___ where the version differs from it, the claim's words there, the version's):
    the one stretch of whole words in which the two differ; None when one of them has no words there."""
    n = min(len(claim), len(version))
    p = 0
    while p < n and claim[p] == version[p]:
        p += 1
    s = 0
    while s < n - p and claim[-1 - s] == version[-1 - s]:
        s += 1
    while p > 0 and (_cuts_a_word(claim, p) or _cuts_a_word(version, p)):
        p -= 1
    while s > 0 and (_cuts_a_word(claim, len(claim) - s) or _cuts_a_word(version, len(version) - s)):
        s -= 1
    mine, theirs = claim[p:len(claim) - s].strip(" ,;:"), version[p:len(version) - s].strip(" ,;:")
    if not mine or not theirs:
        return None
    return claim[:p] + "___" + claim[len(claim) - s:], mine, theirs


def _groups(claim: str, swaps: list[str], whole: list[str]) -> list[tuple[str, str, list[str], list[str]]]:
    """The choices a claim is read as: (question, the claim's option, the versions' options, the versions). Versions
    that change one stretch of words (a name, a number, the cause) become the words that fill that
    blank, one choice per blank; the rest (events swapped, the negation) stay whole statements."""
    blanks: dict[str, tuple[str, list[str], list[str]]] = {}
    whole = list(whole)
    for v in swaps:
        cut = blank_of(claim, v)
        if cut is None:
            whole.append(v)
            continue
        blanked, mine, theirs = cut
        group = blanks.setdefault(blanked, (mine, [], []))
        group[1].append(theirs)
        group[2].append(v)
    groups = [(f'Which words fill the blank in this sentence about the film?\n"{blanked}"', mine, theirs, shown)
              for blanked, (mine, theirs, shown) in blanks.items()]
    return groups + ([(STATEMENTS, claim, whole, whole)] if whole else [])


# ----------------------------------------------------------------------------- qa


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

    stem = PorterStemmer().stem
    return {stem(w) for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in dialogue_stop_words()}


def agreement(claimed: str, found: str) -> float:
    """Share of the claimed answer's content words (stemmed) that the found answer has."""
    want = _stems(claimed)
    return len(want & _stems(found)) / len(want) if want else 0.0


def _read_qa(run: Run, q: Question, context: str, rotations: str = "two") -> Parsed:
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
            both = choose(run, question, [claimed, answer], context, rotations)
            if isinstance(both, str):
                return Parsed.fail(both)
            d["p_claimed"] = round(both[0], 4)
        details.append(d)
    support = [d.get("p_claimed", 1.0) for d in details]
    verdict = "TRUE" if min(support) >= 0.5 else "FALSE"
    run.trace.append(Step("scores", {"how": "claim as questions, answered from the evidence", "details": details}))
    return Parsed(verdict, verdict, round(min(support) if verdict == "TRUE" else 1 - min(support), 4), False,
                  how="logprobs")


class ClaimsReader:
    """A claim judged TRUE or FALSE from log-probabilities, the way `method` names (foils by default);
    `locate_order`, where given, places a claim's two ordered events at their lines in the film."""

    def __init__(self, settings: ClaimsSettings,
                 locate_order: Callable[[Run, FilmMemory, str], bool | None] | None = None):
        self.settings = settings
        self.locate_order = locate_order

    def budget(self, question: Question, default: int) -> int:
        return default

    def read(self, run: Run, reading: Reading) -> Parsed:
        s, q, locate = self.settings, reading.question, self.locate_order
        shown_for_logprobs(run, reading)
        common = lowercase_words(reading.lines.text()) if s.method == "foils" else frozenset()  # only foils reads it
        in_film = (lambda: locate(run, reading.film, q.text)) if locate is not None else None
        parsed = read_claim(run, q, reading.text, s.method, common=common, located=in_film, rotations=s.rotations,
                            form=s.foil_form, calibration=s.calibration)
        if s.cite == "follow-up" and parsed.choice in ("TRUE", "FALSE"):
            self.cite(run, reading, parsed)
        return parsed

    @staticmethod
    def cite(run: Run, reading: Reading, parsed: Parsed) -> None:
        """A verdict from where the claim's two events are placed rests on the lines that placed them (no model
        call); any other is asked in a follow-up: the evidence and statement as the yes/no reader shows them,
        the verdict as the model's reply (readers/cite.py)."""
        q = reading.question
        if parsed.how == "timeline" and any(e.cited for e in run.evidence.values()):
            run.note("cited: the lines that placed the claim's two events in the film (no follow-up)")
            return
        placed = timeline_blocks(q.text, reading.text) if parsed.how == "timeline" else []
        if placed:
            for eid in placed:
                e = reading.ids[eid]
                e.cited = run.evidence.get(e.key, e).cited = True
            run.trace.append(Step("cite", {"how": "the evidence blocks whose lines placed the claim's two events",
                                           "cited": placed, "ids": {k: reading.ids[k].id for k in placed}}))
            return
        cite(run, reading, READ_CLAIM, READ_CLAIM.render(context=reading.text, claim=q.text),
             "yes" if parsed.choice == "TRUE" else "no")
