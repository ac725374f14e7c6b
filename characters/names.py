"""Names from the film's own text, and the character registry that links them to voices and faces.

Evidence comes only from what the film says or shows in text:
- a speaker tag on a line ("CLAUDE: ...", a subtitle's [Name]) names that line's speaker;
- a self-introduction ("I'm Sara", "My name is Sara", "Call me Sara") names its speaker;
- an address term ("Sara, come here", "Thank you, Sara.") names the next speaker with another
  voice (and, more weakly, the previous one), and says its own speaker is NOT Sara;
- a voice no line names takes the one person that captions or narration name on screen while it
  speaks, when one clearly stands out (weaker evidence, half the confidence).
A word counts as a name only if the film's text capitalises it inside a sentence and never writes
it in lower case, so "Look, ..." or "Well, ..." are not addresses. Votes are summed per voice
cluster; a cluster gets a name only with enough support and a clear margin, else it stays
"speaker N". Every link keeps its confidence and the lines it came from.

A film with no voices (a text film) names its people from the dialogue alone (text_cast): a name
the lines address, introduce ("this is Kent", "meet Kent") or title ("Judge Carter") at least
twice is a character when the film names it again and again (MIN_MENTIONS times in a feature
film, in MIN_PARTS of its PARTS equal parts: a name said in one scene is a passer-by) and not
mostly after a place's preposition ("from Utah", "in Dalton") or an article ("the United States").
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..memory.lines import Span

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
TITLES = "Mr|Mrs|Ms|Dr|Miss"  # titles that go before a name and are part of it (Mr. and Mrs. Hollis)
_NAME = rf"((?:(?:{TITLES})\.?\s)?[A-Z][a-z][A-Za-z'\-]*)"
TITLE = re.compile(rf"^({TITLES})\.?\s+")
_SELF = [(re.compile(r"\b[Mm]y name(?:'s| is)\s+" + _NAME), 2.0),
         (re.compile(r"\b(?:I'm|I am|call me|[Ii]t's me,?)\s+" + _NAME
                     # the name ends the clause, or a phrase follows that says where the speaker is from or with
                     # ("I am Sarah from the front desk": ASR drops the comma before it)
                     + r"(?=\s*[.,!?]|\s*$|\s+(?:from|of|and|at|with|here)\b)"), 1.5)]
_ADDR_START = re.compile(r"^(?:(?:Oh|Hi|Hello|Hey|Howdy|Dear|Good (?:morning|evening|night|afternoon|day)|Thank you|Thanks|"
                         r"Goodbye|Bye|So long|Well|Now|Look|Listen|Come on|Yes|No|Sorry|Please),?\s+)?"
                         + _NAME + r"\s*(?:[,!?]|\.{2,}|\u2026)")
_ADDR_END = re.compile(r",\s+" + _NAME + r"\s*[.!?]+[\"']?\s*$")
_KIN = ("mother|father|grandmother|grandfather|grandma|grandpa|aunt|uncle|sister|brother|son|daughter|wife|husband|"
        "friend|cousin|boss|partner|name|niece|nephew|fiance|fiancee|boyfriend|girlfriend")
_APPOSITION = re.compile(r"\b(?:my|your|his|her|our|their)\s+(?:old\s+|dear\s+|best\s+|little\s+)?(?:" + _KIN + r"),\s+"
                         + _NAME + r"\s*[.!?]*\s*$")
_LETTER = re.compile(r"\b(?:Love|Yours|Sincerely|Regards),\s+" + _NAME + r"\s*[.!]*\s*$")
# ranks, roles and forms of address that go before a name without being part of it (TITLES are)
RANKS = ("Mister|Missus|Senor|Se\u00f1or|Senora|Se\u00f1ora|Signor|Signore|Signora|Monsieur|Madame|Mademoiselle|Herr|Frau|"
         "Uncle|Aunt|Auntie|Captain|Lieutenant|Sergeant|Sheriff|Deputy|Judge|Doctor|Professor|Reverend|Colonel|Major|"
         "General|Officer|Inspector|Detective|Mayor|Senator|Governor|Lady|Lord|Sir|Dame")
_RANKED = re.compile(rf"\b(?:{RANKS})\.?\s+([A-Z][a-z][A-Za-z'\-]*)")
_INTRODUCED = re.compile(r"\b(?:[Tt]his is|[Mm]eet|[Yy]ou're|[Yy]ou are|[Hh]e's|[Ss]he's|[Hh]e is|[Ss]he is)\s+" + _NAME
                         + r"(?=\s*[.,!?]|\s*$|\s+(?:from|of|and|here|there|aren't|isn't)\b)")
_KIN_INTRO = re.compile(r"\b(?:my|your|his|her|our|their)\s+(?:" + _KIN + r"),\s+" + _NAME)  # "my brother, Kent"
_ALONE = re.compile(r"^\s*" + _NAME + r"\s*[.!?]+\s*$")  # a turn that is only a name: a call or an answer
_SURNAME = re.compile(r"\s+([A-Z][a-z][A-Za-z'\-]*)")
# a word after one of these is a place ("from Utah", "in Dalton") or a thing ("the United States")
_PLACE_BEFORE = re.compile(r"\b(?:in|from|at|into|near|across|outside|inside|through|towards?|around|to|the|an?)\s+$",
                           re.IGNORECASE)
_STOP = set("""I I'm I'll I've I'd Mr Mrs Ms Dr Miss Sir Madam Ma'am God Lord Jesus Christ OK Okay Monday Tuesday Wednesday Thursday
Friday Saturday Sunday January February March April May June July August September October November December
English French German American Christmas Mom Mum Dad Mother Father Mama Papa Daddy Mommy Grandma Grandpa Uncle Aunt
Honey Darling Baby Sweetheart Dear Boss Doctor Captain Officer Sergeant Chief Professor Judge Your Hey Hi Hello Yes No
Well Look Listen Oh Please Thanks Goodbye Come Wait Stop Now Then So And But Or The A An It He She We They You This That
What Why Who Where When How Is Are Was Were Do Does Did Let Get Go Here There Good Right Sure Really Just Maybe Mister
Oh Ah Eh Um Uh Huh Shh Yep Yeah Yup Nope Hiya Howdy Gee Gosh Golly Jeepers Gee Bye Bye-bye Cheers Alas Gentlemen Ladies Woman Women Men Girl Boy Voice Crowd All Both Announcer Narrator Everybody Everyone Anybody Nobody Somebody Boys Girls Guys Folks Son Kid Man Sire Senor Signore Monsieur Madame
Bartender Waiter Waitress Policeman Cop Driver Clerk Operator Nurse Reporter Guard Porter Maid Butler Servant Conductor
Doorman Stranger Newsboy Bellboy Attendant Secretary Manager Landlady Landlord Customer Passenger Soldier Sailor Pilot""".split())


@dataclass(frozen=True)
class Line:
    """A transcript line, or one speaker turn of it, as the registry sees it: `tag` is a speaker tag
    from the subtitles, `voice` the voice cluster (-1: none). `idx` keys it in the registry; `utt`
    is the transcript line it belongs to when that differs (a turn), which evidence cites."""

    idx: int
    start: float
    end: float
    text: str
    tag: str = ""
    voice: int = -1
    utt: int = -1

    @property
    def line(self) -> int:
        return self.utt if self.utt >= 0 else self.idx


@dataclass(frozen=True)
class Vote:
    line: int  # the line whose speaker the vote is about
    name: str
    weight: float  # > 0: the speaker is `name`; < 0: the speaker is not
    kind: str  # tag | self | address-next | address-prev | address-self
    source: int  # the line the evidence was read from


@dataclass
class Character:
    char_id: str
    name: str  # the known name, or "speaker N" / "face N" / the tag
    names: list[str] = field(default_factory=list)  # names the film's text gives them
    voice: int = -1
    face: int = -1
    confidence: float = 0.0
    lines: list[int] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)  # {kind, value, confidence, evidence: [str]}
    named_in: list[int] = field(default_factory=list)  # the lines that say one of its names


MIN_CUES = 2  # addresses, introductions and titles a text film's name needs to be a character's
MIN_MENTIONS = 5  # times a feature film (LINES_PER_MENTION * 5 lines or more) names a character ...
LINES_PER_MENTION = 250  # ... a shorter one a mention per this many lines, at least MIN_CUES
PARTS, MIN_PARTS = 20, 4  # ... in at least MIN_PARTS (or as many as its mentions) of its PARTS equal parts


def name_lexicon(texts: Sequence[str], tags: Sequence[str] = ()) -> set[str]:
    """Words the film uses as names: capitalised inside a sentence, never lower case, not a
    common capitalised word; plus every speaker tag."""
    inner: Counter[str] = Counter()
    mid: set[str] = set()
    lower: set[str] = set()
    for text in texts:
        for sentence in re.split(r"(?<=[.!?])\s+|^\s*[-\u2013]\s*", text):
            words = _WORD.findall(sentence)
            vocative = re.match(r"\s*([A-Z][a-z][A-Za-z'\-]*)\s*,", sentence)
            for i, w in enumerate(words):
                if w[0].islower():
                    lower.add(w.lower())
                elif (i > 0 or vocative) and not w.isupper() and w not in _STOP:
                    inner[w] += 1
                    if i > 0:
                        mid.add(w)
    names = {w for w in inner if w in mid and w.lower() not in lower and len(w) > 1}
    return names | {t for t in tags if t}


def is_name_tag(tag: str) -> bool:
    """Whether a subtitle tag names a person ('Claude', 'Mr. Smith'), not a sound ('[SIGH]',
    '[SPEAKING FRENCH]', '[door slams]'): 1-3 capitalised words, not all in capitals."""
    words = tag.split()
    return (0 < len(words) <= 3 and not tag.isupper() and words[0] not in _STOP
            and all(re.fullmatch(r"(?:Mr|Mrs|Ms|Dr|Miss)\.?|[A-Z][a-z][A-Za-z'\-]*|[A-Z]\.?", w) for w in words))


def _clean(name: str) -> str:
    """A name as read, with its title spelled one way ("Mr Hollis" -> "Mr. Hollis"): the title is
    part of the name, since Mr. and Mrs. Hollis are two people."""
    name = name.rstrip(".,!?'\"")
    title = TITLE.match(name)
    if title is None:
        return name
    abbrev = title.group(1) if title.group(1) == "Miss" else title.group(1) + "."
    return f"{abbrev} {name[title.end():]}"


def bare(name: str) -> str:
    """A name without its title ("Mr. Hollis" -> "Hollis"): the word the film's lexicon holds."""
    return TITLE.sub("", name)


def votes(lines: Sequence[Line], lexicon: set[str], gap_s: float = 3.0) -> list[Vote]:
    """Name votes read from each line: tags, self-introductions and address terms."""
    out: list[Vote] = []
    order = sorted(lines, key=lambda ln: (ln.start, ln.idx))
    for k, ln in enumerate(order):
        if ln.tag:
            out.append(Vote(ln.idx, ln.tag, 3.0, "tag", ln.idx))
        for pat, w in _SELF:
            for m in pat.finditer(ln.text):
                name = _clean(m.group(1))
                if bare(name) in lexicon or (w >= 2.0 and name not in _STOP):
                    out.append(Vote(ln.idx, name, w, "self", ln.idx))
        addressed = set()
        start = _ADDR_START.match(ln.text.strip())
        if start:
            addressed.add(_clean(start.group(1)))
        end = _ADDR_END.search(ln.text.strip())
        if end and not _APPOSITION.search(ln.text.strip()) and not _LETTER.search(ln.text.strip()):
            addressed.add(_clean(end.group(1)))
        for name in sorted(n for n in addressed if bare(n) in lexicon):
            out.append(Vote(ln.idx, name, -1.0, "address-self", ln.idx))
            nxt = _neighbour(order, k, +1, gap_s)
            if nxt is not None:
                out.append(Vote(nxt.idx, name, 1.0, "address-next", ln.idx))
            prv = _neighbour(order, k, -1, gap_s)
            if prv is not None:
                out.append(Vote(prv.idx, name, 0.5, "address-prev", ln.idx))
    return out


def capitalised(text: str) -> Iterator[tuple[str, bool]]:
    """Each capitalised word of `text` (without a possessive 's), and whether a place's preposition or an
    article goes before it or the name it ends ("from Utah", "the United States")."""
    placed, end = False, -1
    for m in _WORD.finditer(text):
        if m.group(0)[0].isupper():
            go_on = placed and not text[end:m.start()].strip()  # "the United States": States too
            placed, end = go_on or bool(_PLACE_BEFORE.search(text[:m.start()])), m.end()
            yield re.sub(r"'s?$", "", m.group(0)), placed


def places(texts: Iterable[str]) -> set[str]:
    """Capitalised words a film says after a place's preposition or an article more often than not."""
    said: Counter[str] = Counter()
    placed: Counter[str] = Counter()
    for text in texts:
        for word, after_place in capitalised(text):
            said[word] += 1
            placed[word] += after_place
    return {w for w, n in placed.items() if 2 * n > said[w]}


def text_cast(lines: Sequence[Line], lexicon: set[str], vs: Sequence[Vote]) -> dict[str, list[int]]:
    """The names a film without voices registers, each with the lines that address, introduce or
    title it (module docstring): its forms with a title of TITLES ("Mr. Carter") kept apart."""
    cued: dict[str, set[int]] = defaultdict(set)
    for v in vs:
        if v.kind in ("address-self", "self"):
            cued[v.name].add(v.source)
    said: dict[str, list[float]] = defaultdict(list)
    placed: Counter[str] = Counter()
    for ln in lines:
        text = ln.text.strip()
        for m in [*_INTRODUCED.finditer(text), *_RANKED.finditer(text), *_KIN_INTRO.finditer(text),
                  *filter(None, [_ALONE.match(text)])]:
            cued[_clean(m.group(1))].add(ln.idx)
            surname = _SURNAME.match(text, m.end(1))  # "meet Cheyenne Kent": Kent is introduced too
            if surname and surname.group(1) in lexicon:
                cued[surname.group(1)].add(ln.idx)
        for word, after_place in capitalised(text):
            if word in lexicon:
                said[word].append(ln.start)
                placed[word] += after_place
    if not said:
        return {}
    first, last = min(ln.start for ln in lines), max(ln.end for ln in lines)
    part = (last - first) / PARTS or 1.0
    cues: Counter[str] = Counter()
    for name, where in cued.items():
        cues[bare(name)] += len(where)

    mentions = min(MIN_MENTIONS, max(MIN_CUES, round(len(lines) / LINES_PER_MENTION)))

    def person(word: str) -> bool:
        times = said.get(word, [])
        parts = len({int((t - first) / part) for t in times})
        return (cues[word] >= MIN_CUES and len(times) >= mentions and parts >= min(MIN_PARTS, mentions)
                and cues[word] + len(times) / 2 > 2 * placed[word])

    return {name: sorted(where) for name, where in cued.items() if bare(name) in lexicon and person(bare(name))}


def _neighbour(order: Sequence[Line], k: int, step: int, gap_s: float) -> Line | None:
    """The line right before/after order[k] when another known voice speaks it within gap_s: the
    person addressed usually answers (or has just spoken). None when voices are unknown: text
    alone cannot tell whether the next line is a reply."""
    me, j = order[k], k + step
    if me.voice < 0 or not 0 <= j < len(order):
        return None
    cand = order[j]
    gap = cand.start - me.end if step > 0 else me.start - cand.end
    return cand if cand.voice >= 0 and cand.voice != me.voice and gap <= gap_s else None


def _evidence(vs: Sequence[Vote], text: dict[int, str], line: dict[int, int], limit: int = 5) -> list[str]:
    """Evidence strings citing the transcript line ("line N") the vote was read from."""
    return [f"line {line.get(v.source, v.source)} ({v.kind}): {text.get(v.source, '')}" for v in vs[:limit]]


PRESENCE_SHARE = 0.5  # share of a voice's lines during which a description must name the same person
PRESENCE_WEIGHT = 0.5  # being on screen while a voice speaks is weaker evidence than being called by name


class _OnScreen:
    """Who the film's descriptions (captions, narration: who they name is who is in the picture)
    name at each moment, indexed once for every voice that needs it."""

    def __init__(self, shown: Sequence[Span], lexicon: set[str]):
        self.told = sorted(shown, key=lambda d: d.start)
        self.starts = [d.start for d in self.told]
        self.longest = max((d.end - d.start for d in self.told), default=0.0)
        self.names = [[w for w in _WORD.findall(d.text) if w in lexicon] for d in self.told]

    def during(self, ln: Line) -> dict[str, str]:
        """Each name on screen during the line, with the description that names it: those overlapping
        the line start between (its start - the longest description) and its end."""
        near = range(bisect.bisect_right(self.starts, ln.start - self.longest), bisect.bisect_left(self.starts, ln.end))
        return {w: self.told[i].text for i in near if ln.start < self.told[i].end for w in self.names[i]}


def _named_by_presence(lines: Sequence[Line], screen: _OnScreen, voice: int, barred: set[str],
                       margin: float) -> tuple[str, float, list[str]] | None:
    """The one person the film's descriptions name on screen during most of a voice's lines (as
    M3-Agent ties a voice to the face seen while it speaks): at least PRESENCE_SHARE of them and
    `margin` times as many as the runner-up. `barred`: names taken by other voices, or that this
    voice calls someone else. None when no one stands out."""
    mine = [ln for ln in lines if ln.voice == voice]
    seen: Counter[str] = Counter()
    where: dict[str, list[str]] = defaultdict(list)
    for ln in mine:
        present = {w: text for w, text in screen.during(ln).items() if w not in barred}
        seen.update(present.keys())
        for w, text in present.items():
            where[w].append(f"line {ln.line}: on screen, '{text}'")
    ranked = seen.most_common(2)
    if not mine or not ranked:
        return None
    (best, n1), n2 = ranked[0], (ranked[1][1] if len(ranked) > 1 else 0)
    share = n1 / len(mine)
    if share < PRESENCE_SHARE or n1 < margin * n2:
        return None
    return best, round(PRESENCE_WEIGHT * share, 3), where[best][:5]


def registry_lexicon(lines: Sequence[Line], shown: Sequence[Span] = ()) -> set[str]:
    """The names the registry reads: those the lines and on-screen descriptions use, and the speaker tags."""
    return name_lexicon([ln.text for ln in lines] + [d.text for d in shown], [ln.tag for ln in lines if is_name_tag(ln.tag)])


def _person_tags(lines: Sequence[Line]) -> set[str]:
    """The speaker tags that name a person: names (is_name_tag) whose words the film never writes in
    lower case ("BARTENDER:", "SINGING:" name a role or a sound), on two lines or more or said in
    the dialogue too (a tag seen once and never said is more likely a misread)."""
    tags = Counter(ln.tag for ln in lines if is_name_tag(ln.tag))
    if not tags:
        return set()
    lowered = {w for ln in lines for w in _WORD.findall(ln.text) if w[0].islower()}
    said = {w for ln in lines for w in _WORD.findall(ln.text) if w[0].isupper()}
    return {t for t, n in tags.items() if not any(w.lower() in lowered for w in _WORD.findall(t))
            and (n >= 2 or set(_WORD.findall(t)) <= said)}


def build_registry(lines: Sequence[Line], min_score: float = 1.0, margin: float = 2.0,
                   shown: Sequence[Span] = ()) -> tuple[list[Character], dict[int, tuple[str, float]]]:
    """Characters from voice clusters and names, and each line's (char_id, confidence).

    A voice cluster is named when its best name's summed votes reach `min_score` and beat the
    runner-up by `margin` times; a name goes to one cluster only (strongest first). A voice the
    lines name no one for takes the person that the descriptions in `shown` put on screen while
    it speaks (_named_by_presence), with less confidence. Lines without a voice get a character
    only from their own tag or self-introduction."""
    people = _person_tags(lines)
    lines = [ln if ln.tag in people else replace(ln, tag="") for ln in lines]
    lexicon = registry_lexicon(lines, shown)
    vs = votes(lines, lexicon)
    text = {ln.idx: ln.text for ln in lines}
    line_of = {ln.idx: ln.line for ln in lines}

    score, support = _voice_scores(lines, vs)
    voice_name, taken = _name_voices(score, min_score, margin)
    voices = sorted({ln.voice for ln in lines if ln.voice >= 0},
                    key=lambda c: min(ln.start for ln in lines if ln.voice == c))
    seen_on_screen: dict[int, list[str]] = {}
    if shown:
        seen_on_screen = _name_unnamed_voices(lines, _OnScreen(shown, lexicon), voices, score, voice_name, taken, margin)

    chars = _voice_characters(voices, voice_name, seen_on_screen, support, text, line_of)
    by_name = {c.name: c for c in chars.values() if c.names}
    line_char = _assign_lines(lines, vs, chars, by_name, text, line_of)
    _register_unmatched(_unmatched_names(lines, lexicon, vs, voices), chars, by_name, text, line_of)
    mentions(chars.values(), lines)
    return list(chars.values()), line_char


def spelled(name: str) -> str:
    """A pattern for a name however a line writes it: "Mr. Hollis" as "Mr Hollis" or "MR. HOLLIS", with
    a possessive ("Hollis's"), never inside another word; a name without a title not right after
    one ("Verloc" is not in "Mrs Verloc", she is another person)."""
    title = TITLE.match(name)
    rest = name[title.end():] if title else name
    body = r"\s+".join(re.escape(w) for w in rest.split())
    upper = r"\s+".join(re.escape(w.upper()) for w in rest.split())
    if title:
        t = title.group(1)
        return rf"(?<![A-Za-z])(?:{t}|{t.upper()})\.?\s+(?:{body}|{upper})(?![A-Za-z])"
    untitled = "".join(rf"(?<!{t}\s)(?<!{t}\.\s)(?<!{t.upper()}\s)(?<!{t.upper()}\.\s)" for t in TITLES.split("|"))
    return rf"(?<![A-Za-z]){untitled}(?:{body}|{upper})(?![A-Za-z])"


def mentions(chars: Iterable[Character], lines: Sequence[Line]) -> None:
    """Each named character's `named_in`: the lines that say one of its names, however spelled (spelled)."""
    for ch in chars:
        if ch.names:
            said = re.compile("|".join(spelled(n) for n in sorted(ch.names, key=len, reverse=True)))
            ch.named_in = [ln.idx for ln in lines if said.search(ln.text)]


_Scores = Mapping[int, Mapping[str, float]]  # per voice cluster: the summed vote weights of each name


def _voice_scores(lines: Sequence[Line], vs: Sequence[Vote]) -> tuple[_Scores, dict[tuple[int, str], list[Vote]]]:
    """Per voice cluster, the summed vote weight of each name (negative: the voice calls someone
    else by it), and the positive votes behind each (voice, name), which its evidence cites."""
    by_line = {ln.idx: ln for ln in lines}
    score: defaultdict[int, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
    support: dict[tuple[int, str], list[Vote]] = defaultdict(list)
    for v in vs:
        voice = by_line[v.line].voice
        if voice < 0:
            continue
        score[voice][v.name] += v.weight
        if v.weight > 0:
            support[(voice, v.name)].append(v)
    return score, support


def _name_voices(score: _Scores, min_score: float, margin: float) -> tuple[dict[int, tuple[str, float]], set[str]]:
    """Each voice's (name, confidence) where its best name clears `min_score` and `margin`, and the
    names so taken: a name goes to one voice only, the best-supported first."""
    proposals = []
    for voice, names in score.items():
        ranked = [(n, s) for n, s in sorted(names.items(), key=lambda kv: kv[1], reverse=True) if s > 0]  # most_common's order
        if not ranked:
            continue
        (best, s1), s2 = ranked[0], (ranked[1][1] if len(ranked) > 1 else 0.0)
        if s1 >= min_score and s1 >= margin * s2:
            positive = sum(s for _, s in ranked)
            proposals.append((s1, voice, best, round(s1 / positive, 3)))
    voice_name: dict[int, tuple[str, float]] = {}
    taken: set[str] = set()
    for _score, voice, name, conf in sorted(proposals, reverse=True):
        if name not in taken:
            voice_name[voice] = (name, conf)
            taken.add(name)
    return voice_name, taken


def _name_unnamed_voices(lines: Sequence[Line], screen: _OnScreen, voices: Sequence[int], score: _Scores,
                         voice_name: dict[int, tuple[str, float]], taken: set[str], margin: float) -> dict[int, list[str]]:
    """Names the voices the lines left unnamed by who is on screen while they speak
    (_named_by_presence), in order of first speech, adding to `voice_name` and `taken` as it goes
    so that a name goes to one voice only; returns each such voice's evidence."""
    seen_on_screen: dict[int, list[str]] = {}
    for voice in [v for v in voices if v not in voice_name]:
        barred = taken | {n for n, s in score.get(voice, {}).items() if s < 0}
        found = _named_by_presence(lines, screen, voice, barred, margin)
        if found is not None:
            voice_name[voice], seen_on_screen[voice] = (found[0], found[1]), found[2]
            taken.add(found[0])
    return seen_on_screen


def _voice_characters(voices: Sequence[int], voice_name: dict[int, tuple[str, float]],
                      seen_on_screen: dict[int, list[str]], support: dict[tuple[int, str], list[Vote]],
                      text: dict[int, str], line_of: dict[int, int]) -> dict[str, Character]:
    """One character per voice cluster ("v<voice>"), named where a name was found ("speaker N"
    otherwise), its name link citing what the descriptions showed or the votes that named it."""
    chars: dict[str, Character] = {}
    for voice in voices:
        name, conf = voice_name.get(voice, ("", 0.0))
        ch = Character(f"v{voice}", name or f"speaker {voice + 1}", [name] if name else [], voice=voice, confidence=conf)
        ch.links.append({"kind": "voice", "value": voice, "confidence": 1.0, "evidence": []})
        if name:
            ch.links.append({"kind": "name", "value": name, "confidence": conf,
                             "evidence": seen_on_screen.get(voice) or _evidence(support[(voice, name)], text, line_of)})
        chars[ch.char_id] = ch
    return chars


def _assign_lines(lines: Sequence[Line], vs: Sequence[Vote], chars: dict[str, Character], by_name: dict[str, Character],
                  text: dict[int, str], line_of: dict[int, int]) -> dict[int, tuple[str, float]]:
    """Each line's (char_id, confidence): its voice's character, or for a line without a voice the
    character its own tag or self-introduction names (registered in `chars` and `by_name` the
    first time, "n<k>"); fills each character's `lines`."""
    line_char: dict[int, tuple[str, float]] = {}
    for ln in sorted(lines, key=lambda x: (x.start, x.idx)):
        if ln.voice >= 0:
            line_char[ln.idx] = (f"v{ln.voice}", 1.0)
            continue
        own = [v for v in vs if v.line == ln.idx and v.kind in ("tag", "self")]
        if not own:
            continue
        vote = max(own, key=lambda v: v.weight)
        named = by_name.get(vote.name)
        if named is None:
            named = Character(f"n{len([c for c in chars.values() if c.voice < 0]) + 1}", vote.name, [vote.name],
                           confidence=1.0 if vote.kind == "tag" else 0.8)
            named.links.append({"kind": "name", "value": vote.name, "confidence": named.confidence, "evidence": []})
            chars[named.char_id] = by_name[vote.name] = named
        link = next(lk for lk in named.links if lk["kind"] == "name")
        if len(link["evidence"]) < 5:
            link["evidence"] += _evidence([vote], text, line_of)
        line_char[ln.idx] = (named.char_id, 1.0 if vote.kind == "tag" else 0.8)
    for idx, (cid, _) in line_char.items():
        chars[cid].lines.append(idx)
    return line_char


def _unmatched_names(lines: Sequence[Line], lexicon: set[str], vs: Sequence[Vote],
                     voices: Sequence[int]) -> dict[str, list[int]]:
    """Names the film treats as people, with the lines that cue them: in a film with voices, those
    addressed at least twice; in a text film, the dialogue's cast (text_cast)."""
    if voices:
        addressed = Counter(v.name for v in vs if v.kind == "address-self")
        return {name: [v.source for v in vs if v.name == name and v.kind == "address-self"]
                for name, count in addressed.items() if count >= 2}
    return text_cast(lines, lexicon, vs)  # a text film: names the dialogue treats as people, again and again


def _register_unmatched(cued: dict[str, list[int]], chars: dict[str, Character], by_name: dict[str, Character],
                        text: dict[int, str], line_of: dict[int, int]) -> None:
    """Registers the names addressed or introduced but never matched to a speaker, with no lines. A
    titled name ("Miss Greta") is another name of the character its bare name registered, when
    no other title goes with that name ("Mr. Benson" and "Mrs. Benson" are two people)."""
    titles = Counter(bare(n) for n in {*cued, *by_name} if bare(n) != n)
    for name, where in sorted(cued.items(), key=lambda nc: bare(nc[0]) != nc[0]):
        if name in by_name:
            continue
        same = by_name.get(bare(name))
        if same is not None and titles[bare(name)] == 1:
            same.names.append(name)
            by_name[name] = same
            continue
        ch = Character(f"n{len([c for c in chars.values() if c.voice < 0]) + 1}", name, [name], confidence=0.0)
        ch.links.append({"kind": "name", "value": name, "confidence": 0.0,
                         "evidence": [f"line {line_of.get(i, i)}: {text.get(i, '')}" for i in where[:5]]})
        chars[ch.char_id] = by_name[name] = ch


def link_faces(chars: Sequence[Character], speaking: dict[str, list[tuple[float, float]]],
               face_times: dict[int, list[float]], min_share: float = 0.5) -> None:
    """Link each voice character to the face cluster most often on screen while it speaks, when
    that face is seen in at least `min_share` of the frames with a face inside its lines and the pair is
    each other's best match. Unlinked face clusters become characters of their own ("face N")."""
    share: dict[tuple[str, int], float] = {}
    for cid, spans in speaking.items():
        inside = [t for ts in face_times.values() for t in ts if any(a <= t <= b for a, b in spans)]
        frames_inside = len(set(inside))
        if not frames_inside:
            continue
        for face, ts in face_times.items():
            n = sum(1 for t in set(ts) if any(a <= t <= b for a, b in spans))
            share[(cid, face)] = n / frames_inside
    by_id = {c.char_id: c for c in chars}
    best_face = {cid: max(((f, s) for (c, f), s in share.items() if c == cid), key=lambda x: x[1]) for cid, _ in share}
    best_voice = {f: max(((c, s) for (c, ff), s in share.items() if ff == f), key=lambda x: x[1]) for _, f in share}
    for cid, (face, s) in best_face.items():
        if s >= min_share and best_voice[face][0] == cid:
            ch = by_id[cid]
            ch.face = face
            ch.links.append({"kind": "face", "value": face, "confidence": round(s, 3),
                             "evidence": [f"face {face} on screen in {s:.0%} of the frames with faces during its lines"]})
