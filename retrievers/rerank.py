"""Candidates reordered by a relevance judge, fused with the search order (a post-processing step).

Word and vector search rank a film's lines by the words they share with the question, so a line
that answers it in other words sinks under lines that merely repeat a name. A judge (any callable
from a candidate's text to a relevance score; hybrid's is the backbone's yes/no log-probability
margin, agents/rerank.py) scores each of the first N distinct candidates; that ranking is fused with
the search ranking by reciprocal rank (Cormack et al., SIGIR 2009), as hybrid fuses its channels,
so neither a misjudging scorer nor a misleading word match decides alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .packing import Lines, fit_budget
from .types import Evidence, Trace

RRF_K = 60  # the fusion constant hybrid's channel fusion uses (packing.fuse)

# a candidate's text -> its relevance (higher is more relevant); None: the judge could not read it
Judge = Callable[[str], float | None]


@dataclass(frozen=True)
class Candidate:
    hit: Evidence
    text: str  # the block as the reader would be shown it


def candidates(ranked: list[Evidence], lines: Lines, n: int) -> tuple[list[Candidate], list[Evidence]]:
    """The first n hits that show a stretch no earlier hit showed, and the hits after them."""
    out: list[Candidate] = []
    seen: set[tuple[float, float]] = set()
    used = 0
    for used, e in enumerate(ranked, 1):  # noqa: B007 - `used` is read after the loop
        block = fit_budget([e], 10**9, lines)
        if not block:
            continue
        span = (round(block[0].start, 2), round(block[0].end, 2))
        if span in seen:
            continue
        seen.add(span)
        out.append(Candidate(e, block[0].text))
        if len(out) >= n:
            break
    return out, list(ranked[used:])


def rerank(ranked: list[Evidence], lines: Lines, n: int, judge: Judge, trace: Trace | None = None) -> list[Evidence]:
    """`ranked` with its first n distinct candidates in the order fused from search and the judge's relevance."""
    if n <= 0 or not ranked:
        return ranked
    cands, rest = candidates(ranked, lines, n)
    margins = [judge(c.text) for c in cands]  # None ranks after every read one
    by_model = sorted(range(len(cands)), key=lambda i: (margins[i] is None, -(margins[i] or 0.0), i))
    model_rank = {i: r for r, i in enumerate(by_model)}
    fused = sorted(range(len(cands)), key=lambda i: (-(1 / (RRF_K + i) + 1 / (RRF_K + model_rank[i])), i))
    if trace is not None:
        trace.step("rerank", {
            "candidates": len(cands), "unread": margins.count(None),
            "order": [{"id": cands[i].hit.id, "search": i, "model": model_rank[i],
                       "margin": None if (m := margins[i]) is None else round(m, 3)} for i in fused]})
    return [cands[i].hit for i in fused] + rest
