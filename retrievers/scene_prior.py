"""The hybrid gathering with the scenes' summaries as a prior: does a scene's summary help find the evidence?

Registered as `scene-prior`, for `retrieval-eval` to measure the scenes stage's summaries (issue 64)
before any default uses them. The question (with its options) is matched to each scene's summary
by the summary's index terms (memory/bm25.py's analyzer, weighed by how few summaries hold each
term); the hybrid gathering's evidence then ranks by reciprocal-rank fusion of its own rank and the
rank of the scene it lies in, so lines in the scenes whose summaries match come first. A film with
no scenes gets the hybrid ranking unchanged.
"""

from __future__ import annotations

import math
from collections import Counter

from ..memory.bm25 import analyze
from ..memory.view import FilmMemory
from .gather import QuestionRetriever, Routed
from .packing import Lines
from .rerank import Judge
from .types import Evidence, Question, Trace

FUSION_K = 60  # reciprocal-rank fusion's constant, as the text retriever fuses
TOP_SCENES = 3  # scenes whose summaries match best lift the evidence inside them


def scene_ranks(film: FilmMemory, text: str) -> list[tuple[float, float]]:
    """The spans of the TOP_SCENES scenes whose summaries share the most (rare) terms with `text`, best first."""
    rows = film.scenes()
    terms = [set(analyze(r.summary)) for r in rows]
    df: Counter[str] = Counter(t for ts in terms for t in ts)
    asked = set(analyze(text))
    scored = [(sum(math.log(1 + len(rows) / df[t]) for t in asked & ts), -i) for i, ts in enumerate(terms)]
    best = sorted(((s, i) for s, i in scored if s > 0), reverse=True)[:TOP_SCENES]
    return [(rows[-i].start, rows[-i].end) for _, i in best]


class ScenePrior(QuestionRetriever):
    """The hybrid policy's gathering, re-ranked by the scenes whose summaries match the question."""

    def __init__(self) -> None:
        self.base = Routed()

    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        found = self.base._gather(film, question, trace, lines, judge)
        spans = scene_ranks(film, " ".join([question.text, *question.options]))
        if not spans:
            return found

        def score(rank: int, e: Evidence) -> float:
            mid = (e.start + e.end) / 2
            inside = next((k for k, (a, b) in enumerate(spans) if a <= mid < b), None)
            return 1 / (FUSION_K + rank) + (1 / (FUSION_K + inside) if inside is not None else 0.0)

        order = sorted(range(len(found)), key=lambda r: -score(r, found[r]))
        return [found[r] for r in order]
