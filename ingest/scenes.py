"""Scenes: the film's table of contents, built from the memory's text without a model.

A scene is a stretch of the film with a time span, the lines it holds (captions, dialogue,
on-screen text), the names that occur in it and an extractive summary: its most central lines
(those whose words the rest of the scene repeats most), its names and its on-screen text.

Where the film has shot-grouped segments (video), each segment is a scene. A text-only film has
only fixed windows, which cut conversations anywhere, so its scenes are cut where the dialogue
pauses instead: a long silence usually means a change of place or time. Pure functions over
simple values; the stage that stores them is in scene_stage.py.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

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


def known_names(lines: list[TextLine]) -> frozenset[str]:
    """The film's names: speakers, captions' characters and capitalised words seen mid-sentence
    (an interjection opening a line, "Hi, ...", is not one)."""
    return frozenset(n for ln in lines for n in line_names(ln))


# -- splitting ---------------------------------------------------------------------------------


def split_at_gaps(lines: list[TextLine], *, min_s: float = 45.0, max_s: float = 240.0,
                  pause_s: float = 12.0) -> list[tuple[float, float, list[TextLine]]]:
    """Cut a text-only film where its lines pause: every pause of `pause_s` or more starts a scene
    (unless that leaves a scene under `min_s`), and a stretch still longer than `max_s` is cut
    at its longest pause, recursively. Returns (start, end, lines) in screen order."""
    lines = sorted(lines, key=lambda ln: (ln.start, ln.end))
    if not lines:
        return []

    def gaps(part: list[TextLine]) -> list[tuple[float, int]]:
        out, reach = [], part[0].end
        for i in range(1, len(part)):
            out.append((part[i].start - reach, i))
            reach = max(reach, part[i].end)
        return out

    def fits(part: list[TextLine], i: int) -> bool:
        return part[i - 1].end - part[0].start >= min_s and part[-1].end - part[i].start >= min_s

    def cut_long(part: list[TextLine]) -> list[list[TextLine]]:
        if part[-1].end - part[0].start <= max_s or len(part) < 2:
            return [part]
        ok = [(g, i) for g, i in gaps(part) if fits(part, i)] or gaps(part)
        _, i = max(ok)
        return cut_long(part[:i]) + cut_long(part[i:])

    parts: list[list[TextLine]] = [[lines[0]]]
    reach = lines[0].end
    for ln in lines[1:]:
        if ln.start - reach >= pause_s and parts[-1][-1].end - parts[-1][0].start >= min_s:
            parts.append([ln])
        else:
            parts[-1].append(ln)
        reach = max(reach, ln.end)
    if len(parts) > 1 and parts[-1][-1].end - parts[-1][0].start < min_s:  # a short tail joins the scene before
        tail = parts.pop()
        parts[-1] += tail
    out = [p for part in parts for p in cut_long(part)]
    return [(p[0].start, max(ln.end for ln in p), p) for p in out]


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

    best = sorted(range(len(lines)), key=lambda i: (-score(i), i))[:k]
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


def summarize(scene: Scene, idf: dict[str, float], *, k: int = 2, max_chars: int = 320) -> str:
    """'Names. On screen: ... Central lines.' within max_chars."""
    parts = []
    if scene.names:
        parts.append("With " + ", ".join(scene.names[:6]) + ".")
    onscreen = [ln.text for ln in scene.lines if ln.kind == "onscreen"]
    if onscreen:
        parts.append("On screen: " + " / ".join(_short(t, 60) for t in dict.fromkeys(onscreen).keys() if t)[:120] + ".")
    for ln in scene.central:
        said = f"{ln.speaker}: " if ln.kind == "dialogue" and ln.speaker else ""
        quote = f'"{_short(ln.text, 140)}"' if ln.kind == "dialogue" else _short(ln.text, 160)
        parts.append(said + quote)
    return _short(" ".join(parts), max_chars)


def build_scenes(lines: list[TextLine], segments: list[tuple[float, float]] | None, *, central_k: int = 2,
                 min_s: float = 45.0, max_s: float = 240.0, pause_s: float = 12.0) -> list[Scene]:
    """Scenes from segments (when given) or from pauses in the lines; empty scenes are dropped."""
    lines = sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: (ln.start, ln.end, ln.kind))
    if segments:
        parts = [(a, b, own) for (a, b), own in zip(segments, assign_to_spans(lines, segments)) if own]
    else:
        parts = split_at_gaps(lines, min_s=min_s, max_s=max_s, pause_s=pause_s)
    idf = film_idf([p[2] for p in parts])
    known = known_names(lines)
    scenes = []
    for i, (a, b, own) in enumerate(parts):
        counts: Counter[str] = Counter(n for ln in own for n in line_names(ln, known))
        sc = Scene(i, a, b, own, [n for n, _ in counts.most_common()])
        sc.central = central_lines(own, idf, central_k)
        sc.summary = summarize(sc, idf)
        scenes.append(sc)
    return scenes

