"""Who-questions: evidence about the characters a query names, from the registry and the film's lines.

A query names a character when it holds a name the character registry gives (`film.characters()`)
or a capitalised word that the film's visible text uses and never writes in lower case (a name the
film's lines or captions use, such as an option "Anna" no voice was linked to; days and places pass
too, and their lines are as relevant). For the names found it offers
- each matching registry entry (its names, line count, first and last appearance, the lines that
  named it), and
- the transcript lines a named character speaks, and the transcript and caption lines that mention
  a name, when they also hold one of the query's other content words or two of its names (a line
  that only mentions a name says nothing about the question and would crowd out the lines that do),
scored by how many of the query's names and content words each one holds. A line hit keeps the
text retriever's id (`utterance:IDX`, `caption:IDX`), so fusion counts a line both find once, higher.
Everything is read through the film view, so `until(t)` hides characters, names and lines not yet seen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..foundation.timefmt import hms
from ..foundation.words import english_stop_words
from ..memory.schema import CharacterRow
from ..memory.view import FilmMemory, turns_of
from .base import Retriever
from .types import Evidence

_CAPITALISED = re.compile(r"\b[A-Z][a-z][A-Za-z'\-]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
NAMING_LINES = 2  # lines quoted in a registry entry as the evidence that named the character


def _stem(word: str) -> str:
    """A crude suffix strip, so "finds" meets "find" and "searched" meets "search"."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def _mentions(text: str, names: Iterable[str]) -> set[str]:
    return {n for n in names if re.search(rf"\b{re.escape(n)}\b", text)}


@dataclass
class Cast:
    """What one film view shows about its characters: the registry, the lines and the words it uses."""

    registry: list[CharacterRow]
    utterances: list[tuple[int, float, float, str, set[str]]]  # idx, start, end, text, names of its speakers
    captions: list[tuple[int, float, float, str, list[str]]]  # idx, start, end, text, [Name] tags
    capitalised: set[str]  # words the film's text writes capitalised somewhere ...
    lower: set[str]  # ... and in lower case somewhere

    @classmethod
    def of(cls, film: FilmMemory) -> Cast:
        utts = [(u.idx, u.start, u.end, u.text, {t.speaker_name for t in turns_of(u)} - {""})
                for u in film.utterances() if u.text.strip()]
        caps = [(c.idx, c.start, c.end, c.text, list(c.characters)) for c in film.captions() if c.text.strip()]
        texts = [t for _, _, _, t, _ in utts] + [t for _, _, _, t, _ in caps]
        capitalised = {w for t in texts for w in _CAPITALISED.findall(t)}
        lower = {w.lower() for t in texts for w in _WORD.findall(t) if w[0].islower()}
        return cls(film.characters(), utts, caps, capitalised, lower)

    def names_in(self, query: str) -> set[str]:
        """The names a query holds: the registry's, and capitalised words (not stop words: "Who", "His") the
        film's text uses and never writes in lower case."""
        known = {n for c in self.registry for n in c.names}
        found = _mentions(query, known)
        used = {w for w in _CAPITALISED.findall(query)
                if w in self.capitalised and w.lower() not in self.lower and w.lower() not in english_stop_words()}
        return found | used


class CharacterRetriever(Retriever):
    """Registry entries and lines of the characters a query names (see the module docstring)."""

    name = "characters"

    def __init__(self) -> None:
        self._cast: tuple[FilmMemory, Cast] | None = None  # one film view's cast, kept across its queries

    @staticmethod
    def missing(film: FilmMemory) -> str | None:
        """Why this film has no character registry to read (None when it has one)."""
        if film.run_filter("characters") is None:
            return "no characters in this film's memory (characters stage not run)"
        return None

    def cast(self, film: FilmMemory) -> Cast:
        if self._cast is None or self._cast[0] is not film:
            self._cast = (film, Cast.of(film))
        return self._cast[1]

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        cast = self.cast(film)
        names = cast.names_in(query)
        if not names:
            return []
        name_words = {w.lower() for n in names for w in n.split()}
        terms = {_stem(w) for w in _WORD.findall(query)
                 if w.lower() not in english_stop_words() and w.lower() not in name_words}

        def score(text: str, involved: set[str]) -> float:
            return len(involved) + len(terms & {_stem(w) for w in _WORD.findall(text)})

        def relevant(text: str, involved: set[str]) -> bool:
            return bool(involved) and (not terms or len(involved) > 1 or score(text, involved) > len(involved))

        out: list[Evidence] = []
        for c in cast.registry:
            matched = set(c.names) & names
            if matched:
                text = entry_text(c, {i for i, *_ in cast.utterances})
                out.append(Evidence("character", film.film_id, c.first_s, c.first_s, text, score=score(text, matched),
                                    id=f"character:{c.char_id}"))
        for idx, start, end, text, speakers in cast.utterances:
            involved = _mentions(text, names) | (speakers & names)
            if relevant(text, involved):
                out.append(Evidence("utterance", film.film_id, start, end, text, score=score(text, involved),
                                    id=f"utterance:{idx}"))
        for idx, start, end, text, tags in cast.captions:
            involved = _mentions(text, names) | (set(tags) & names)
            if relevant(text, involved):
                out.append(Evidence("caption", film.film_id, start, end, text, score=score(text, involved),
                                    id=f"caption:{idx}"))
        return out


def entry_text(c: CharacterRow, visible_lines: set[int]) -> str:
    """A registry entry as a reader sees it: names, lines, appearances and the lines that named it."""
    also = [n for n in c.names if n != c.name]
    head = f"character {c.name}" + (f" (also called {', '.join(also)})" if also else "")
    facts = [f"speaks {c.lines} line{'s' if c.lines != 1 else ''}"]
    if c.screen_time_s > 0:
        facts.append(f"on screen {c.screen_time_s:.0f} s")
    facts.append(f"first {hms(c.first_s)}, last {hms(c.last_s)}")
    quoted: list[str] = []
    for link in json.loads(c.links or "[]"):
        if link.get("kind") != "name":
            continue
        for e in link.get("evidence", []):
            m = re.match(r"line (\d+) \(([^)]*)\): (.*)", e)
            if m and int(m.group(1)) in visible_lines and len(quoted) < NAMING_LINES:
                quoted.append(f'"{m.group(3)}" ({m.group(2)})')
    return f"{head}: {'; '.join(facts)}" + (f"; named from {', '.join(quoted)}" if quoted else "")
