"""Search candidates reordered by the backbone's own judgement of relevance (hybrid[rerank=N]).

Word and vector search rank a film's lines by the words they share with the question, so a line
that answers it in other words sinks under lines that merely repeat a name. The model reads each of
the first N distinct candidates with the question and says whether it helps answer it; the
log-probability margin of "yes" over "no" ranks them, and that ranking is fused with the search
ranking by reciprocal rank (Cormack et al., SIGIR 2009), as hybrid fuses its channels, so neither a
misjudging model nor a misleading word match decides alone. Query-first prompts share their prefix,
which llama.cpp reads once per question. Every call is an input-token cost of the answer (counted in
its usage) and the trace lists each candidate's margin.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..retrievers.base import Evidence
from .base import Run
from .packing import Lines, fit_budget
from .prompts import RERANK, question_head
from .reader import can_read, label_scores
from .types import Question, Step

RRF_K = 60  # the fusion constant hybrid's channel fusion uses (packing.fuse)


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


def rerank(run: Run, question: Question, ranked: list[Evidence], lines: Lines, n: int) -> list[Evidence]:
    """`ranked` with its first n distinct candidates in the order fused from search and the model's relevance."""
    if n <= 0 or not ranked:
        return ranked
    if not can_read(run, question):
        run.note("rerank skipped: it reads yes/no log-probabilities, which this backbone does not give "
                 "(or the question is not multiple choice or a claim)")
        return ranked
    cands, rest = candidates(ranked, lines, n)
    head = question_head(question)
    margins: list[float | None] = []  # None: no yes/no among the model's likeliest tokens; ranks after every read one
    for c in cands:
        got = label_scores(run, RERANK, RERANK.render(question=head, passage=c.text), ("yes", "no"))
        margins.append(None if isinstance(got, str) else got.get("yes", -30.0) - got.get("no", -30.0))
    by_model = sorted(range(len(cands)), key=lambda i: (margins[i] is None, -(margins[i] or 0.0), i))
    model_rank = {i: r for r, i in enumerate(by_model)}
    fused = sorted(range(len(cands)), key=lambda i: (-(1 / (RRF_K + i) + 1 / (RRF_K + model_rank[i])), i))
    run.trace.append(Step("rerank", {
        "candidates": len(cands), "unread": margins.count(None),
        "order": [{"id": cands[i].hit.id, "search": i, "model": model_rank[i],
                   "margin": None if (m := margins[i]) is None else round(m, 3)} for i in fused]}))
    return [cands[i].hit for i in fused] + rest
