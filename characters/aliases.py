"""One person, one character: the registry's names merged where the film's own text ties them.

The dialogue registry (names.py) lists each name the lines treat as a person on its own, so
"Ted" and "Spencer", or "Dearest" and "Mrs. Errol", come out as two characters. They are merged
only on evidence, and every merge keeps it (a link {kind: alias, rule, value, evidence}):
- the synopsis, where the film has one (`synopsis_people`): a person introduced with the actor in
  parentheses or with a nickname in quotes holds its first name and, when the synopsis calls them
  by it alone, its surname ("Detective Sergeant Ted Spencer (John Loder)" ... "Spencer shows up":
  Ted, Spencer; ranks are dropped); the nickname (`Cedric "Ceddie" Errol`, `whom he calls
  "Dearest"`, `known as "X"`); a kin phrase names a titled form (`Karl Verloc ... his wife`:
  Mrs. Verloc; `Cedric Errol and his widowed mother, whom he calls "Dearest"`: Mrs. Errol is
  Dearest); "Mr. S" is the person who holds the bare surname S;
- the dialogue: a first name and a surname said together of one person ("I, Carl Anton Verloc"),
  when no other first name goes with that surname.
A name two people of the synopsis share ("Tipton" of Minna and Dick) ties nothing. The user
undoes or adds merges with an override (overrides.py), applied after these rules on every rebuild.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .names import _STOP, RANKS, TITLES, Character, Line, _clean, bare, spelled

_CAP = r"[A-Z][a-z][A-Za-z'\-]*"
_QUOTE = r"[\"\u201c\u201d]"
_NICK = rf"{_QUOTE}([A-Z][^\"\u201c\u201d]{{0,30}}){_QUOTE}"
_KIN_FEMALE = "wife|mother|widow|widowed mother|stepmother"
_KIN_MALE = "husband|father|widower|stepfather"
_KIN = re.compile(rf"\b(?:his|her|their)\s+(?:(?:young|younger|elder|older|late|widowed|new|old|beloved)\s+)*"
                  rf"({_KIN_FEMALE}|{_KIN_MALE})\s*$", re.IGNORECASE)
_CALLS = re.compile(r",?\s*(?:whom|who)\s+(?:he|she|they|everyone|all|the \w+)\s+calls?\s*$|,?\s*(?:known as|called|"
                    r"nicknamed)\s*$")
_RANK_WORDS = set(RANKS.split("|")) | {"Detective", "Sergeant", "Inspector", "Superintendent", "Constable", "Chief",
                                       "Young", "Old", "Little", "Big", "Dr", "Dr."}
_TITLE_WORD = re.compile(rf"^(?:{TITLES})\.?$")


@dataclass
class Person:
    """One person of the synopsis: the names it goes by and the passages that say so."""

    names: list[str] = field(default_factory=list)
    full: str = ""  # the most complete untitled name ("Ted Spencer"), the character's label
    evidence: list[str] = field(default_factory=list)
    surname: str = ""

    def add(self, name: str) -> None:
        if name and name not in self.names:
            self.names.append(name)


def _excerpt(text: str, a: int, b: int, reach: int = 60) -> str:
    lo, hi = max(0, a - reach), min(len(text), b + reach)
    return ("..." if lo else "") + " ".join(text[lo:hi].split()) + ("..." if hi < len(text) else "")


def _lowered(texts: Iterable[str]) -> set[str]:
    return {w.lower() for t in texts for w in re.findall(r"[A-Za-z][A-Za-z'\-]*", t) if w[0].islower()}


def _name_words(phrase: str, lowered: set[str]) -> tuple[list[str], list[str]]:
    """A name phrase's words (ranks, titles and words the texts write in lower case left out) and its
    quoted nicknames."""
    nicks = [m.group(1).strip() for m in re.finditer(_NICK, phrase)]
    plain = re.sub(_NICK, " ", phrase)
    if " of " in f" {plain} ":  # "the Earl of Dorincourt": the place names the title
        plain = plain.split(" of ", 1)[1]
    words = [w for w in re.findall(rf"{_CAP}\.?|Mr\.?|Mrs\.?|Ms\.?|Dr\.?", plain)
             if w.rstrip(".") not in _RANK_WORDS and not _TITLE_WORD.match(w) and w.lower() not in lowered]
    return words, nicks


_PHRASE = re.compile(rf"((?:(?:{_CAP}|(?:{TITLES})\.?|{_NICK}|of)\s+)*(?:{_CAP}|{_NICK}))\s*\(([A-Z][^()]*)\)")
_NICK_INSIDE = re.compile(rf"\b({_CAP}\s+{_NICK}\s+{_CAP})")
_TITLED = re.compile(rf"\b((?:{TITLES})\.?\s+{_CAP})")


_KIN_PHRASE = (rf"\b(?:his|her|their)\s+(?:(?:young|younger|elder|older|late|widowed|new|old|beloved)\s+)*"
               rf"(?:{_KIN_FEMALE}|{_KIN_MALE})")
_KIN_PAREN = re.compile(rf"({_KIN_PHRASE})\s*\(([A-Z][^()]*)\)", re.IGNORECASE)
_KIN_CALLS = re.compile(rf"({_KIN_PHRASE}),?\s+(?:whom|who)\s+(?:he|she|they|everyone)\s+calls?\s+{_NICK}", re.IGNORECASE)


def synopsis_people(synopsis: str, dialogue: Sequence[str] = ()) -> list[Person]:
    """The people a synopsis introduces, each with every name it gives them (module docstring).
    `dialogue`: the film's lines, whose lower-case words are not names either."""
    text = " ".join(synopsis.split())
    lowered = _lowered([text, *dialogue]) | {w.lower() for w in _STOP}
    found = [(m.start(), "name", m) for m in _PHRASE.finditer(text)]
    found += [(m.start(), "name", m) for m in _NICK_INSIDE.finditer(text) if not text[m.end():].lstrip().startswith("(")]
    found += [(m.start(), "kin", m) for m in [*_KIN_PAREN.finditer(text), *_KIN_CALLS.finditer(text)]]
    people: list[Person] = []
    for _, kind, m in sorted(found, key=lambda f: f[0]):
        p = Person(evidence=[f"synopsis: {_excerpt(text, m.start(), m.end())}"])
        if kind == "kin":
            owner = _owner(text, m.start(), people)
            if owner is None:
                continue
            p = _kin_person(m.group(1), owner, text, p)
            if m.re is _KIN_CALLS:
                p.add(m.group(2).strip())
        else:
            words, nicks = _name_words(m.group(1), lowered)
            if not words and _CALLS.search(text[:m.start(1)]):
                continue  # ..., whom he calls "Dearest" (Actor): the kin phrase before names them (_KIN_CALLS)
            if words:
                p.full = " ".join(words)
                p.add(p.full)
                p.add(words[0])
                p.surname = words[-1] if len(words) > 1 else ""
            for nick in nicks:
                p.add(nick)
        if p.names:
            people.append(p)
    people = _joined(people)
    _surnames(people, text, lowered)
    _respelled(people, dialogue, lowered)
    return [p for p in people if p.names]


def _respelled(people: Sequence[Person], dialogue: Sequence[str], lowered: set[str]) -> None:
    """A name the dialogue never says, spelled another way there: one letter changed ("Karl" in the
    synopsis, "Carl" in the subtitles), four letters or more, a name the dialogue never writes in lower case."""
    said = {w for t in dialogue for w in re.findall(_CAP, t)}
    for p in people:
        for n in list(p.names):
            if " " in n or n in said or len(n) < 4:
                continue
            near = [w for w in said if len(w) == len(n) and w.lower() not in lowered
                    and sum(a != b for a, b in zip(w, n)) == 1]
            if len(near) == 1:
                p.add(near[0])
                p.evidence.append(f"synopsis: {n}, said {near[0]} in the dialogue")


def _owner(text: str, pos: int, people: Sequence[Person]) -> Person | None:
    """Whom "his"/"her" at `pos` goes with: the person named last before it."""
    best, where = None, -1
    for p in people:
        for n in p.names:
            at = text.rfind(n, 0, pos)
            if at > where:
                best, where = p, at
    return best


def _kin_person(kin: str, owner: Person, text: str, into: Person) -> Person:
    """The person a kin phrase names by the title it gives them ("his wife" of Karl Verloc:
    Mrs. Verloc), when the synopsis writes that titled name."""
    surname = owner.surname or (owner.names[0] if len(owner.names) == 1 and " " not in owner.names[0] else "")
    if not surname:
        return into
    title = "Mrs." if re.search(_KIN_FEMALE, kin, re.IGNORECASE) else "Mr."
    titled = f"{title} {surname}"
    if re.search(rf"\b{title[:-1]}\.?\s+{re.escape(surname)}\b", text):
        into.add(titled)
        into.evidence.append(f"synopsis: {kin} of {owner.full or owner.names[0]} is {titled}")
    return into


def _joined(people: list[Person]) -> list[Person]:
    """People introduced twice (the same full name, or the same titled name) as one."""
    out: list[Person] = []
    for p in people:
        same = next((q for q in out if (p.full and p.full == q.full) or
                     any(" " in n and n in q.names for n in p.names)), None)
        if same is None and len(p.names) == 1 and " " not in p.names[0]:  # "Lona (...)" again after "Lona McLane"
            firsts = [q for q in out if q.full and q.full.split()[0] == p.names[0]]
            same = firsts[0] if len(firsts) == 1 else None
        if same is None:
            out.append(p)
            continue
        for n in p.names:
            same.add(n)
        same.evidence += p.evidence
        same.surname = same.surname or p.surname
    return out


def _after_name(before: str, lowered: set[str]) -> bool:
    """Whether a word comes right after a first name, a title or a nickname's quote ("Ted Spencer",
    "Mrs. Verloc", '"Ceddie" Errol'), not after a sentence's first word ("Later Spencer")."""
    m = re.search(rf"({_CAP}|(?:{TITLES})\.?|{_QUOTE})\s+$", before)
    if m is None:
        return False
    word = m.group(1)
    opens = not before[:m.start()].strip() or before[:m.start()].rstrip()[-1] in ".!?"
    return not word[0].isalpha() or word.rstrip(".") in TITLES.split("|") or (word.lower() not in lowered and not opens)


def _surnames(people: list[Person], text: str, lowered: set[str]) -> None:
    """A surname alone ("Spencer shows up"), and "Mr. S", name the one person whose full name ends in
    it, when the synopsis uses it alone and no other person's does."""
    owners: dict[str, list[Person]] = defaultdict(list)
    for p in people:
        if p.surname:
            owners[p.surname].append(p)
    for surname, ps in owners.items():
        alone = [m for m in re.finditer(rf"(?<![A-Za-z])\b{re.escape(surname)}\b", text)
                 if not _after_name(text[:m.start()], lowered)]
        if len(ps) != 1 or not alone:
            continue
        ps[0].add(surname)
        ps[0].add(f"Mr. {surname}")
        ps[0].evidence.append(f"synopsis: {surname} alone: {_excerpt(text, alone[0].start(), alone[0].end(), 40)}")
    for p in people:  # a titled name the synopsis gives one untitled name's holder ("Mr. Havisham" of Havisham)
        for m in _TITLED.finditer(text):
            name = _clean(m.group(1))
            if name.startswith("Mr.") and bare(name) in p.names and not any(bare(name) in q.names for q in people if q is not p):
                p.add(name)


# -- merging -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tie:
    """Names of one person, with the rule and evidence that say so."""

    names: tuple[str, ...]
    rule: str  # synopsis | full-name | user
    evidence: tuple[str, ...]
    label: str = ""  # the name to show, where the rule knows a fuller one


def norm(name: str) -> str:
    """A name compared however it is spelled: its title with a period, in any case."""
    return _clean(" ".join(name.split())).lower()


def synopsis_ties(people: Sequence[Person]) -> list[Tie]:
    """Each person's names that another person does not share, as one tie."""
    count: dict[str, int] = defaultdict(int)
    for p in people:
        for n in {norm(x) for x in p.names}:
            count[n] += 1
    return [Tie(tuple(n for n in p.names if count[norm(n)] == 1), "synopsis", tuple(p.evidence[:5]), p.full)
            for p in people if sum(count[norm(n)] == 1 for n in p.names) >= 1]


def dialogue_ties(lines: Sequence[Line], names: set[str]) -> list[Tie]:
    """A first name and a surname said together ("Carl Anton Verloc", "Ted Spencer") of one person:
    both registry names, and the surname goes with no other first name in the film."""
    # a lookahead, so pairs may overlap; a rank between the two ("Errol Lord Fauntleroy") is no middle name
    pat = re.compile(rf"(?=(?<![A-Za-z.])({_CAP})(?:\s+(?!(?:{RANKS})\b){_CAP})?\s+({_CAP})\b)")
    seen: dict[str, dict[str, list[Line]]] = defaultdict(lambda: defaultdict(list))
    for ln in lines:
        for m in pat.finditer(ln.text):
            first, last = m.group(1), re.sub(r"'s$", "", m.group(2))
            before = ln.text[:m.start()]
            if first in names and last in names and first != last and not re.search(rf"(?:{TITLES}|{RANKS})\.?\s*$", before):
                seen[last][first].append(ln)
    out = []
    for last, firsts in seen.items():
        if len(firsts) != 1:
            continue
        first, where = next(iter(firsts.items()))
        out.append(Tie((first, last), "full-name", tuple(f"line {ln.line}: {ln.text}" for ln in where[:5])))
    return out


def merge(chars: list[Character], ties: Sequence[Tie], said: Sequence[str] = (),
          moved: dict[str, str] | None = None) -> list[Character]:
    """The characters each tie names merged into the first of them in the registry's order, names
    joined, the tie kept as an alias link. A character two ties claim is left as it is for both. A
    synopsis person no character holds becomes one when the dialogue says their name (_said_person).
    `said`: the film's lines; a tie's names the film says are added to the character that takes it.
    `moved` (if given) gets each merged character's id -> the id of the one it went into."""
    chars = list(chars)
    owner: dict[str, Character] = {}
    for ch in chars:
        for n in ch.names:
            owner.setdefault(norm(n), ch)
    claims: dict[str, int] = defaultdict(int)
    hits = []
    for tie in ties:
        held = list(dict.fromkeys(owner[norm(n)].char_id for n in tie.names if norm(n) in owner))
        hits.append(held)
        for cid in held:
            claims[cid] += 1
    by_id = {c.char_id: c for c in chars}
    order = {c.char_id: i for i, c in enumerate(chars)}
    gone: set[str] = set()
    spoken = " \n ".join(said)
    for tie, held in zip(ties, hits):
        held = [cid for cid in held if claims[cid] == 1 or tie.rule == "user"]
        held = sorted((cid for cid in held if cid not in gone), key=order.__getitem__)
        if not held:
            person = _said_person(tie, said, len(by_id) + 1)
            if person is not None:
                chars.append(person)
                by_id[person.char_id], order[person.char_id] = person, len(order)
            continue
        keep = by_id[held[0]]
        for cid in held[1:]:
            other = by_id[cid]
            if other.voice >= 0 and keep.voice >= 0:  # two voices the clustering told apart stay two
                continue
            for n in other.names:
                if n not in keep.names:
                    keep.names.append(n)
            keep.lines += other.lines
            keep.named_in = sorted(set(keep.named_in) | set(other.named_in))
            keep.links += other.links
            keep.voice, keep.face = max(keep.voice, other.voice), max(keep.face, other.face)
            gone.add(cid)
            if moved is not None:
                moved[cid] = keep.char_id
                for was, now in list(moved.items()):
                    if now == cid:
                        moved[was] = keep.char_id
        added = [n for n in tie.names if n not in keep.names and (tie.rule != "synopsis" or _says(spoken, n))]
        keep.names += added
        if tie.label and tie.rule == "synopsis" and " " in tie.label and not keep.name.startswith(("speaker ", "face ")):
            keep.name = tie.label
            if tie.label not in keep.names:
                keep.names.insert(0, tie.label)
            else:
                keep.names.insert(0, keep.names.pop(keep.names.index(tie.label)))
        if len(held) > 1 or added:
            keep.links.append({"kind": "alias", "rule": tie.rule, "value": list(tie.names), "confidence": 1.0,
                               "merged": [by_id[c].names[0] if by_id[c].names else c for c in held[1:]],
                               "evidence": list(tie.evidence)})
    return [c for c in chars if c.char_id not in gone]


MIN_SAID = 2  # lines that must say a synopsis person's name for them to be a character the registry missed


def _said_person(tie: Tie, said: Sequence[str], k: int) -> Character | None:
    """A person of the synopsis the dialogue names on MIN_SAID lines or more, and the registry left out
    (named too rarely, or never called): a character with the names the film says, without lines."""
    if tie.rule != "synopsis":
        return None
    names = [n for n in tie.names if sum(1 for t in said if _says(t, n)) > 0]
    lines = sum(1 for t in said if any(_says(t, n) for n in names))
    if lines < MIN_SAID:
        return None
    label = tie.label if tie.label and " " in tie.label else names[0]
    ch = Character(f"s{k}", label, list(dict.fromkeys([label, *names])), confidence=0.0)
    ch.links.append({"kind": "alias", "rule": "synopsis", "value": list(tie.names), "confidence": 1.0, "merged": [],
                     "evidence": [*tie.evidence, f"the dialogue says {', '.join(names)} on {lines} lines"]})
    return ch


def _says(text: str, name: str) -> bool:
    return re.search(spelled(name), text) is not None
