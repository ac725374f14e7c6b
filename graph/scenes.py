"""Scenes: the film's table of contents, built from the memory's text without a model.

A scene is a stretch of the film with a time span, the lines it holds (captions, dialogue,
on-screen text), the characters in it and an extractive summary: its most central lines
(those whose words the rest of the scene repeats most), its characters and its on-screen text.

A scene's characters are those of the character registry who speak or are named in it (each
under one name, whatever alias the line uses) and the other names its descriptions (captions,
on-screen text) use, most present first; with no registry, the other names of all its lines.
Other names are capitalised words the film never writes in lower case (not "Take", if it
also says "take") nor mostly after "in", "from", "the"... (a place: "from Utah"), outside short
quotes (a nickname, a title or a code word in quotes is not a person in the scene; a quoted sentence keeps its names), not ranks or roles ("Sheriff") unless a
title goes before them ("Mr. Major"). Without a registry, each line's speaker label counts too.
The event graph's participants are read the same way (rule_graph.py).

Where the film has shot-grouped segments (video), each segment is a scene. A text-only film has
only fixed windows, which cut conversations anywhere, so its scenes are cut where the dialogue
pauses instead: a long silence usually means a change of place or time. Pure functions over
simple values; the stage that stores them is ingest/stages/scenes.py.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..characters.names import TITLE, TITLES, places
from ..foundation.timefmt import hms

WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
# function words and words capitalised for reasons other than being a name
STOP = frozenset("""
a about above after again against ah all am an and any are as at be because been before being below between both
but by can could did do does doing don't down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it it's its itself just let's me more most my myself no nor not now of
off oh ok okay on once only or other our ours ourselves out over own same she should so some such than that that's
the their theirs them themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would yes yeah you your yours yourself yourselves well hey hello
goodbye thank thanks please hi um uh ha huh hmm wow gee gosh alright honestly sorry sir madam mister miss mrs mr dr sure right good come go get got look see know think
say said tell told want like going gonna gotta wanna getting one two three maybe never always also still even much many every something nothing
anything everything someone somebody anyone nobody okay o'clock god lord dear darling honey baby mom dad mother
father mama papa man woman boy girl guy guys people monday tuesday wednesday thursday friday saturday sunday january
february march april may june july august september october november december christmas ext int cut fade
""".split())


# ranks and roles: capitalised when they address or stand for someone, yet not anyone's name
ROLES = frozenset("""
sheriff deputy officer constable sergeant detective inspector captain lieutenant colonel general major corporal
private admiral commander chief president senator governor mayor judge counsel doctor doc nurse professor
reverend pastor priest king queen prince princess duke duchess count countess baron baroness lady lord sir madam
madame ma'am monsieur mademoiselle senor senora signor uncle aunt auntie grandpa grandma granny grandfather
grandmother brother sister cousin son daughter husband wife miss mister mrs mr ms dr
""".split())
_FEW_WORDS = r"\s*[^\s{q}]+(?:\s+[^\s{q}]+){{0,2}}\s*"  # a nickname, a title, a code word: up to 3 words
QUOTED = re.compile("|".join([f'"{_FEW_WORDS.format(q=chr(34))}"', f"“{_FEW_WORDS.format(q='”')}”",
                              f"‘{_FEW_WORDS.format(q='’')}’",
                              f"(?<![A-Za-z])'{_FEW_WORDS.format(q=chr(39))}'(?![A-Za-z])"]))


@dataclass(frozen=True)
class TextLine:
    """One timed text of the memory; `ref` names its row ("utterances:12") so evidence can cite it."""

    start: float
    end: float
    kind: str  # caption | dialogue | onscreen
    text: str
    ref: str
    speaker: str = ""
    characters: tuple[str, ...] = ()


@dataclass
class Scene:
    idx: int
    start: float
    end: float
    lines: list[TextLine] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    central: list[TextLine] = field(default_factory=list)
    summary: str = ""
    places: list[str] = field(default_factory=list)  # places its lines name ("at Simpson's")
    objects: list[str] = field(default_factory=list)  # things its lines name most, for this scene ("the parcel")


def prompt_line(line: TextLine) -> str:
    """A line as a model is shown it: `[HH:MM:SS] Speaker: text` on one line."""
    said = f"{line.speaker}: " if line.speaker else ""
    return f"[{hms(line.start)}] {said}{' '.join(line.text.split())}"


def words(text: str) -> list[str]:
    return [w.lower().strip("'’-") for w in WORD.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if len(w) > 2 and w not in STOP}


def names_in(text: str, known: frozenset[str] = frozenset()) -> list[str]:
    """Capitalised words that are not the first word of a sentence nor a common word: names of
    people and places in English text. A word opening a sentence ("Anna, wait", "Anna opens the
    gate") counts when it is a name `known` from elsewhere in the film (see known_names)."""
    found: list[str] = []
    for sentence in re.split(r"(?<=[.!?…])\s+|\n|^-\s*|\s-\s", text):
        toks = re.findall(r"[A-Za-z][A-Za-z'’-]*|[,;:]", sentence)
        for i, tok in enumerate(toks):
            if not tok[0].isupper() or tok.lower() in STOP or tok.isupper() and len(tok) > 1 and i == 0:
                continue
            bare = tok.split("'")[0].split("’")[0]
            if len(bare) < 2 or bare.lower() in STOP:
                continue
            if i > 0 or bare in known:
                found.append(bare if not bare.isupper() else bare.capitalize())
    return list(dict.fromkeys(found))


def line_names(line: TextLine, known: frozenset[str] = frozenset()) -> list[str]:
    return list(dict.fromkeys([*line.characters, *([line.speaker] if line.speaker else []),
                               *names_in(line.text, known)]))


@dataclass
class RegistryCast:
    """The character registry as scenes read it: each named character's names (the first shown),
    and who speaks which line (by line ref)."""

    names: dict[str, tuple[str, ...]]
    speakers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _pattern: dict[str, re.Pattern[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # the longest names first, across characters: "Miss Carter" is hers before "Carter" is his
        longest = sorted((c for c, names in self.names.items() if names), key=lambda c: -max(map(len, self.names[c])))
        self._pattern = {c: re.compile("|".join(map(_spelled, sorted(self.names[c], key=len, reverse=True))))
                         for c in longest}

    def in_line(self, line: TextLine, text: str) -> tuple[list[str], str]:
        """Who of the registry speaks `line` or is named in `text` (the line's unquoted words), and
        `text` without those names, for the names the registry does not hold."""
        found = list(self.speakers.get(line.ref, ()))
        for c, pat in self._pattern.items():
            text, n = pat.subn(" ", text)
            if n:
                found.append(c)
        return found, text


def _spelled(name: str) -> str:
    """A pattern for a name as lines write it: "Mr. Hollis" is also "Mr Hollis"."""
    title = TITLE.match(name)
    rest = name[title.end():] if title else name
    lead = rf"{title.group(1)}\.?\s+" if title else ""
    return rf"\b{lead}{re.escape(rest)}\b"


@dataclass(frozen=True)
class FilmNames:
    """Which capitalised words the film's own text treats as names: those it writes in Title case
    somewhere and never in lower case, read outside quotes. "Take" and "Secret" fail (the film
    writes "take", "secret" too), so does an acronym ("FBI", never "Fbi"), and so does a subtitle's
    "Iittle" (an l read as I, where the film also writes "little")."""

    known: frozenset[str]
    lower: frozenset[str]
    titled: frozenset[str]
    surnames: frozenset[str]  # words after a title ("Mr. Major"): names, even when they are also ranks
    places: frozenset[str] = frozenset()  # words said mostly after "in", "from", "the"...: places and things

    @classmethod
    def of(cls, lines: list[TextLine]) -> FilmNames:
        plain = [replace(ln, text=unquoted(ln.text)) for ln in lines]
        found = [re.sub("['’]s$", "", w) for ln in plain for w in WORD.findall(ln.text)]  # Anna's: Anna; don't stays
        surnames = {m.group(1) for ln in plain for m in re.finditer(rf"\b(?:{TITLES})\.?\s+([A-Z][a-z]+)", ln.text)}
        return cls(known_names(plain), frozenset(w.lower() for w in found if w and w[0].islower()),
                   frozenset(w for w in found if w and w[0].isupper() and not w.isupper()), frozenset(surnames),
                   frozenset(places(ln.text for ln in plain)))

    def is_name(self, word: str) -> bool:
        low = word.lower()
        misread = low.startswith("i") and "l" + low[1:] in self.lower
        role = low in ROLES and word not in self.surnames
        place = word in self.places and word not in self.surnames
        return word in self.titled and low not in self.lower and not role and not misread and not place

    def in_text(self, text: str) -> list[str]:
        return [n for n in names_in(text, self.known) if self.is_name(n)]

    def of_line(self, line: TextLine) -> list[str]:
        """A line's names without a registry: its captioned characters, its speaker and its names."""
        return list(dict.fromkeys([*line.characters, *([line.speaker] if line.speaker else []),
                                   *self.in_text(unquoted(line.text))]))


def unquoted(text: str) -> str:
    return QUOTED.sub(" ", text)


def scene_characters(lines: list[TextLine], film: FilmNames, cast: RegistryCast | None = None) -> list[str]:
    """The characters of a scene's lines, most present first (see the module docstring)."""
    counts: Counter[str] = Counter()
    for ln in lines:
        if cast is None:
            counts.update(film.of_line(ln))
            continue
        # the registry has judged which names the dialogue gives people; descriptions name who is on screen
        registered, text = cast.in_line(ln, unquoted(ln.text))
        others = film.in_text(text) if ln.kind != "dialogue" else []
        counts.update(list(dict.fromkeys([*ln.characters, *registered, *others])))
    return [n for n, _ in counts.most_common()]


def known_names(lines: list[TextLine]) -> frozenset[str]:
    """The film's names: speakers, captions' characters and capitalised words seen mid-sentence
    (an interjection opening a line, "Hi, ...", is not one)."""
    return frozenset(n for ln in lines for n in line_names(ln))


# -- splitting ---------------------------------------------------------------------------------


SHIFT_PAUSE_S = 4.0  # a shorter pause starts a scene too where the people named change wholly, or a place is named
SHIFT_WINDOW_S = 60.0  # ... comparing the names of this much dialogue before and after it
SHIFT_BONUS_S = 8.0  # a change of the people named weighs as this many seconds of pause when a long stretch is cut


def split_at_gaps(lines: list[TextLine], *, min_s: float = 45.0, max_s: float = 240.0,
                  pause_s: float = 12.0, names_of: Callable[[TextLine], set[str]] | None = None,
                  placed: Callable[[TextLine], bool] | None = None) -> list[tuple[float, float, list[TextLine]]]:
    """Cut a text-only film where its lines pause: every pause of `pause_s` or more starts a scene
    (unless that leaves a scene under `min_s`), and a stretch still longer than `max_s` is cut
    at its longest pause, recursively. Returns (start, end, lines) in screen order.
    With `names_of` (the people a line names) a pause of SHIFT_PAUSE_S starts a scene where the people
    named in the SHIFT_WINDOW_S before and after share no one, or where `placed` says the line after
    names a place ("at Simpson's"); a long stretch is cut where pause and change weigh most."""
    lines = sorted(lines, key=lambda ln: (ln.start, ln.end))
    if not lines:
        return []
    starts = np.array([ln.start for ln in lines])
    ends = np.array([ln.end for ln in lines])
    change = _changes(lines, names_of, placed) if names_of is not None else np.zeros(len(lines))

    def cut_long(a: int, b: int) -> list[tuple[int, int]]:
        """Lines a..b-1 as index ranges of at most max_s each, each cut at its longest pause (the
        latest of equal ones) that leaves min_s on both sides, if any. In numpy on index ranges: a
        track without pauses is cut a min_s piece at a time, which copying the lines made quadratic
        in memory (500 MB for 20,000 cues)."""
        out, todo = [], [(a, b)]
        while todo:
            a, b = todo.pop()
            if ends[b - 1] - starts[a] <= max_s or b - a < 2:
                out.append((a, b))
                continue
            gap = starts[a + 1:b] - np.maximum.accumulate(ends[a:b - 1])  # the pause before each line a+1..b-1
            gap = gap + SHIFT_BONUS_S * change[a + 1:b] * (gap >= 1.0)
            fits = (ends[a:b - 1] - starts[a] >= min_s) & (ends[b - 1] - starts[a + 1:b] >= min_s)
            if fits.any():
                gap = np.where(fits, gap, -np.inf)
            cut = b - 1 - int(np.argmax(gap[::-1]))  # argmax finds the first: reversed, the latest
            todo += [(cut, b), (a, cut)]
        return out

    firsts = [0]  # the first line of each part
    reach = lines[0].end
    for i in range(1, len(lines)):
        pause = lines[i].start - reach
        if (pause >= pause_s or (pause >= SHIFT_PAUSE_S and change[i] >= 1.0)) \
                and lines[i - 1].end - lines[firsts[-1]].start >= min_s:
            firsts.append(i)
        reach = max(reach, lines[i].end)
    if len(firsts) > 1 and lines[-1].end - lines[firsts[-1]].start < min_s:  # a short tail joins the scene before
        firsts.pop()
    cuts = [r for a, b in zip(firsts, [*firsts[1:], len(lines)]) for r in cut_long(a, b)]
    return [(lines[a].start, float(ends[a:b].max()), lines[a:b]) for a, b in cuts]


def _changes(lines: list[TextLine], names_of: Callable[[TextLine], set[str]],
             placed: Callable[[TextLine], bool] | None) -> np.ndarray:
    """For each line, how wholly the people named change at it (1: the SHIFT_WINDOW_S before and after
    both name people, none the same; 0: no change or nothing to tell), 1 too where it names a place."""
    named = [names_of(ln) for ln in lines]
    starts = [ln.start for ln in lines]
    out = np.zeros(len(lines))
    for i in range(1, len(lines)):
        lo = bisect.bisect_left(starts, starts[i] - SHIFT_WINDOW_S)
        hi = bisect.bisect_right(starts, starts[i] + SHIFT_WINDOW_S)
        before = set().union(*named[lo:i])
        after = set().union(*named[i:hi])
        if before and after:
            out[i] = 1.0 - len(before & after) / len(before | after)
        if placed is not None and placed(lines[i]):
            out[i] = 1.0
    return out


def tiled(parts: list[tuple[float, float, list[TextLine]]]) -> list[tuple[float, float, list[TextLine]]]:
    """Scenes that leave no minute out: each runs until the next one starts (a pause belongs to the
    scene it follows), the first from its first line, the last to its last."""
    return [(a, parts[i + 1][0] if i + 1 < len(parts) else b, own) for i, (a, b, own) in enumerate(parts)]


def assign_to_spans(lines: list[TextLine], spans: list[tuple[float, float]]) -> list[list[TextLine]]:
    """Each line goes to the span holding its midpoint (the last span before it when none does)."""
    own: list[list[TextLine]] = [[] for _ in spans]
    if not spans:
        return own
    for ln in lines:
        mid = (ln.start + ln.end) / 2
        i = max((k for k, (a, _) in enumerate(spans) if a <= mid), default=0)
        own[i].append(ln)
    return own


# -- summaries ---------------------------------------------------------------------------------


def central_lines(lines: list[TextLine], idf: dict[str, float], k: int = 2) -> list[TextLine]:
    """The k lines whose content words the scene repeats most (tf-idf cosine to the scene's
    centroid), in screen order. Captions and on-screen text describe the scene rather than one
    voice in it, so they are preferred over dialogue at equal centrality."""
    if not lines:
        return []
    vecs = []
    for ln in lines:
        c = Counter(w for w in words(ln.text) if len(w) > 2 and w not in STOP)
        vecs.append({w: n * idf.get(w, 1.0) for w, n in c.items()})
    centroid: Counter[str] = Counter()
    for v in vecs:
        centroid.update(v)
    norm_c = math.sqrt(sum(x * x for x in centroid.values())) or 1.0

    def score(i: int) -> float:
        v = vecs[i]
        norm = math.sqrt(sum(x * x for x in v.values()))
        if not norm:
            return 0.0
        cos = sum(x * centroid[w] for w, x in v.items()) / (norm * norm_c)
        bonus = 0.1 if lines[i].kind != "dialogue" else 0.0
        return cos + bonus + min(len(v), 12) / 120  # informative lines over one-word replies

    best: list[int] = []
    for i in sorted(range(len(lines)), key=lambda i: (-score(i), i)):
        if len(best) >= k:
            break
        mine = set(vecs[i])
        # a line that says again what a chosen one says ("We want our money back" twice) tells nothing more
        if any(" ".join(words(lines[i].text)) == " ".join(words(lines[j].text)) or (mine and mine <= set(vecs[j]))
               for j in best):
            continue
        best.append(i)
    return [lines[i] for i in sorted(best)]


def film_idf(scene_lines: list[list[TextLine]]) -> dict[str, float]:
    """Inverse scene frequency: a word in every scene says nothing about any one of them."""
    df: Counter[str] = Counter()
    for lines in scene_lines:
        df.update({w for ln in lines for w in content_words(ln.text)})
    n = max(1, len(scene_lines))
    return {w: math.log((1 + n) / (1 + d)) + 1.0 for w, d in df.items()}


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def summarize(scene: Scene, idf: dict[str, float], *, k: int = 2, max_chars: int = 420) -> str:
    """'With names. At places. Of things. On screen: ... Central lines.' within max_chars."""
    parts = []
    if scene.names:
        parts.append("With " + ", ".join(scene.names[:6]) + ".")
    if scene.places:
        parts.append("At " + ", ".join(scene.places[:3]) + ".")
    if scene.objects:
        parts.append("Of " + ", ".join(scene.objects[:4]) + ".")
    onscreen = [ln.text for ln in scene.lines if ln.kind == "onscreen"]
    if onscreen:
        parts.append("On screen: " + " / ".join(_short(t, 60) for t in dict.fromkeys(onscreen).keys() if t)[:120] + ".")
    for ln in scene.central:
        said = f"{ln.speaker}: " if ln.kind == "dialogue" and ln.speaker else ""
        inner = _short(ln.text, 140).replace('"', "'")  # a quote inside the quote: nested, not doubled
        quote = f'"{inner}"' if ln.kind == "dialogue" else _short(ln.text, 160)
        parts.append(said + quote)
    return _short(" ".join(parts), max_chars)


def build_scenes(lines: list[TextLine], segments: list[tuple[float, float]] | None, *, central_k: int = 2,
                 min_s: float = 45.0, max_s: float = 240.0, pause_s: float = 12.0,
                 cast: RegistryCast | None = None) -> list[Scene]:
    """Scenes from segments (when given) or from pauses in the lines; empty scenes are dropped.
    `cast`: the film's character registry, when it has one."""
    lines = sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: (ln.start, ln.end, ln.kind))
    names = FilmNames.of(lines)
    if segments:
        parts = [(a, b, own) for (a, b), own in zip(segments, assign_to_spans(lines, segments)) if own]
    else:
        parts = tiled(split_at_gaps(lines, min_s=min_s, max_s=max_s, pause_s=pause_s,
                                    names_of=lambda ln: set(scene_characters([ln], names, cast)),
                                    placed=lambda ln: bool(places_in(ln.text, names))))
    idf = film_idf([p[2] for p in parts])
    scenes = []
    for i, (a, b, own) in enumerate(parts):
        sc = Scene(i, a, b, own, scene_characters(own, names, cast))
        sc.central = central_lines(own, idf, central_k)
        sc.places = list(dict.fromkeys(p for ln in own for p in places_in(ln.text, names)))
        sc.objects = objects_in(own, idf)
        sc.summary = summarize(sc, idf)
        scenes.append(sc)
    return scenes


_DETERMINED = re.compile(r"\b(?:a|an|the|my|your|his|her|our|their|this|these|those)\s+([a-z][a-z'-]{2,})\b")
_AT_PLACE = re.compile(r"\b(?:in|at|from|to|into|near|outside|inside|across|through|towards?|around)\s+(?:the\s+)?"
                       r"([A-Z][a-z][A-Za-z'\u2019-]*)")
OBJECTS_K = 4


def places_in(text: str, film: FilmNames) -> list[str]:
    """The places a line names: names said after "in", "at", "from"... here, and mostly so in the whole film."""
    found = [re.sub("['\u2019]s$", "", m.group(1)) for m in _AT_PLACE.finditer(unquoted(text))]
    return list(dict.fromkeys(w for w in found if w in film.places and w.lower() not in film.lower
                              and w.lower() not in STOP and w.lower() not in ROLES))


def objects_in(lines: list[TextLine], idf: dict[str, float], k: int = OBJECTS_K) -> list[str]:
    """The things a scene's lines name most for this scene: words right after an article or a possessive
    ("the parcel", "my money"), weighed by how rare they are in the film's other scenes."""
    seen: Counter[str] = Counter()
    for ln in lines:
        for m in _DETERMINED.finditer(ln.text):
            w = m.group(1).lower().strip("'-")
            if w not in STOP and len(w) > 2 and not w.endswith("ly"):
                seen[w] += 1
    ranked = sorted(seen, key=lambda w: (-seen[w] * idf.get(w, 1.0), w))
    return [w for w in ranked if seen[w] * idf.get(w, 1.0) > 1.0][:k]

