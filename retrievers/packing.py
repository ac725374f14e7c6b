"""Ranked evidence into a token budget: fuse rankings, demote empty lines, merge passages.

Three rules, each for a failure seen on real films:
- Lines with no content of their own ("Yes.", "Oh!", a bare name) rank high because they share
  one word with the question; they go after every informative hit, never before.
- Passages overlap by design, so neighbouring hits repeat lines; a hit is charged only for the
  lines not already shown, and overlapping or touching passages are shown as one block.
- Rankings from several queries (the question, each option) are fused by reciprocal rank, so
  a passage that several queries find comes first.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..foundation.words import dialogue_stop_words, estimate_tokens
from ..memory.schema import UtteranceRow
from ..memory.view import FilmMemory, turns_of
from .base import visible_filter
from .text import rrf
from .types import Evidence

MIN_CONTENT_WORDS = 2
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")


def content_words(text: str) -> int:
    """Words that carry meaning: not stop words, not interjections, not a capitalised name alone."""
    stop = dialogue_stop_words()
    words = [w for w in _WORD.findall(text) if w.lower() not in stop]
    return 0 if len(words) == 1 and words[0][0].isupper() else len(words)


def informative_first(ranked: Sequence[Evidence]) -> list[Evidence]:
    """Stable partition: hits with at least MIN_CONTENT_WORDS content words keep their order, the rest follow."""
    good = [e for e in ranked if e.kind == "passage" or content_words(e.text) >= MIN_CONTENT_WORDS]
    keep = {id(e) for e in good}
    return good + [e for e in ranked if id(e) not in keep]


def fuse(rankings: Sequence[Sequence[Evidence]]) -> list[Evidence]:
    """Reciprocal-rank fusion of ranked evidence lists (the text retriever's `rrf`); ties by time, so the order is total."""
    scores = rrf([[e.key for e in ranking] for ranking in rankings])
    first: dict[str, Evidence] = {}
    for ranking in rankings:
        for e in ranking:
            first.setdefault(e.key, e)
    return sorted(first.values(), key=lambda e: (-scores[e.key], e.start, e.key))


def passage_sources(film: FilmMemory) -> set[str]:
    """Which sources (utterance, caption) this film has passages of; empty when its passages stage has not
    run. Counted in LanceDB, not read: called for every question."""
    where = visible_filter(film, "passages")
    if where is None:
        return set()
    return {s for s in ("utterance", "caption") if film.store.count("passages", f"{where} AND source = '{s}'") > 0}


def interleave(lists: Sequence[Sequence[Evidence]]) -> list[Evidence]:
    """Round-robin over the ranked lists so every channel and option gets its best hits in first."""
    out: list[Evidence] = []
    for rank in range(max((len(x) for x in lists), default=0)):
        out += [x[rank] for x in lists if rank < len(x)]
    return out


def speaker_label(u: Any) -> str:
    """Who speaks a transcript line (or one turn of it), as shown to a reader: the character's name
    when the film's text gives it; else a subtitle's own speaker tag; never a bare character id ("v3")."""
    if getattr(u, "speaker_name", ""):
        return str(u.speaker_name)
    return "" if re.fullmatch(r"[vnf]\d+", u.speaker or "") else str(u.speaker)


def spoken(u: UtteranceRow) -> str:
    """A transcript line as a reader sees it: each speaker turn after its speaker's label
    ("Sara: Where were you? Tom: Out."); an unknown speaker's turn unlabelled."""
    return " ".join(f"{who}: {t.text}" if (who := speaker_label(t)) else t.text for t in turns_of(u))


class Lines:
    """The film's transcript and caption rows by idx, read once per film view, to merge passages."""

    def __init__(self, film: FilmMemory):
        self.film = film
        self._rows: dict[str, dict[int, tuple[float, float, str]]] = {}
        self._order: dict[str, list[int]] = {}

    def within(self, source: str, a: int, b: int) -> list[int]:
        """The idx of the rows that exist in a..b, in order: a span (a passage's, or an imported one) is
        walked over the rows the table holds, never over the integers between its ends."""
        if source not in self._order:
            self._order[source] = sorted(self.of(source))
        order = self._order[source]
        return order[bisect_left(order, a):bisect_right(order, b)]

    def total_tokens(self) -> int:
        """Estimated tokens of the film's visible transcript and captions."""
        return sum(estimate_tokens(t) + 1 for source in ("utterance", "caption") for _, _, t in self.of(source).values())

    def text(self) -> str:
        """The film's visible transcript and captions, a row a line."""
        return "\n".join(t for source in ("utterance", "caption") for _, _, t in self.of(source).values())

    def of(self, source: str) -> dict[int, tuple[float, float, str]]:
        if source not in self._rows:
            if source == "utterance":
                rows = [(u.idx, u.start, u.end, spoken(u)) for u in self.film.utterances()]
            else:
                rows = [(c.idx, c.start, c.end, c.text) for c in self.film.captions()]
            self._rows[source] = {i: (a, b, " ".join(t.split())) for i, a, b, t in rows if t.strip()}
        return self._rows[source]


class _Packer:
    """Shown evidence and what it costs: each row of the transcript or captions is charged once."""

    def __init__(self, lines: Lines | None):
        self.lines = lines
        self.seen: set[str] = set()
        self.covered: dict[str, set[int]] = {}
        self.out: list[Evidence] = []
        self.used = 0

    def _new_rows(self, lines: Lines, rows: tuple[str, int, int]) -> tuple[int, list[int]]:
        """The token cost and indices of the rows in a span not yet shown."""
        source, a, b = rows
        have = lines.of(source)
        shown = self.covered.get(source, set())
        new = [i for i in lines.within(source, a, b) if i not in shown]
        return sum(estimate_tokens(have[i][2]) + 1 for i in new), new

    def add(self, e: Evidence, budget: int) -> None:
        """Show a hit if its new text fits; duplicates (same row, or the same text at the same time) are dropped."""
        key2 = f"{e.kind}:{round(e.start)}:{e.text.strip().lower()}"
        if e.key in self.seen or key2 in self.seen:
            return
        new: list[int] = []
        if e.rows is not None and self.lines is not None:
            cost, new = self._new_rows(self.lines, e.rows)
            if not new:
                return
            cost += 8
        else:
            cost = estimate_tokens(e.text) + 8  # the id, times and label
        if self.used + cost > budget:
            return
        self.seen.update((e.key, key2))
        if new and e.rows is not None:  # new rows come only from a hit with rows
            self.covered.setdefault(e.rows[0], set()).update(new)
        self.out.append(e)
        self.used += cost

    def widen(self, lines: Lines, budget: int) -> None:
        """One more neighbouring line on each side of every shown line hit, best-ranked hit first, while they fit."""
        for n, e in enumerate(self.out):
            if e.kind not in ("utterance", "caption") or e.rows is None:
                continue
            source, a, b = e.rows
            rows = (source, max(0, a - 1), b + 1)
            cost, new = self._new_rows(lines, rows)
            if new and self.used + cost <= budget:
                self.covered.setdefault(source, set()).update(new)
                self.out[n] = replace(e, rows=rows)
                self.used += cost


def fit_budget(ranked: Sequence[Evidence], budget: int, lines: Lines | None = None,
               core_share: float = 1.0, rings: int = 0) -> list[Evidence]:
    """Keep hits in rank order while their new text fits `budget` tokens; duplicates (same row, or the
    same text at the same time) are dropped, and passages are charged only for lines not yet shown.
    With `rings`, small to big: hits alone fill `core_share` of the budget, then each line hit gains up
    to `rings` neighbours on either side (nearest first, best-ranked hit first), and any budget left
    takes further hits. With `lines`, overlapping passages of one source are then merged into single blocks."""
    packer = _Packer(lines)
    grow = rings > 0 and lines is not None
    for e in ranked:
        packer.add(e, int(budget * core_share) if grow else budget)
    if grow and lines is not None:
        for _ in range(rings):
            packer.widen(lines, budget)
        for e in ranked:
            packer.add(e, budget)
    return merge_passages(packer.out, lines) if lines is not None else packer.out


def merge_passages(shown: Sequence[Evidence], lines: Lines) -> list[Evidence]:
    """Passages of one source whose rows overlap or touch become one Evidence (best score, joined ids)."""
    plain = [e for e in shown if e.rows is None]
    groups: dict[str, list[tuple[int, int, Evidence]]] = {}  # source -> (first row, last row, passage)
    for e in shown:
        if e.rows is not None:
            source, a, b = e.rows
            groups.setdefault(source, []).append((a, b, e))
    merged: list[Evidence] = []
    for source, group in groups.items():
        have = lines.of(source)
        group.sort(key=lambda span: span[0])
        blocks: list[list[tuple[int, int, Evidence]]] = []
        end = 0  # the block's last row so far: a span can lie inside an earlier, longer one
        for span in group:
            a, b = span[0], span[1]
            if blocks and a <= end + 1:
                blocks[-1].append(span)
                end = max(end, b)
            else:
                blocks.append([span])
                end = b
        for block in blocks:
            a = min(span[0] for span in block)
            b = max(span[1] for span in block)
            hits = [span[2] for span in block]
            idx = lines.within(source, a, b)
            if not idx:
                merged.extend(hits)
                continue
            best = max(hits, key=lambda e: e.score)
            merged.append(replace(best, start=have[idx[0]][0], end=max(have[i][1] for i in idx),
                                  text="\n".join(have[i][2] for i in idx), rows=(source, a, b),
                                  id="+".join(e.id for e in hits)))
    return plain + merged
