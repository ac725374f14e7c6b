"""The one line or caption that best matches a question's words: where a moment is in the film.

A question-level retriever like the others (registered as `best-line`), so the order reader
(agents/readers/order_locate.py) places each option through the registry instead of a search of its
own. Single rows only: a passage spans half a minute and blurs the order; both kinds are ranked in
one pool (vector + BM25), so the best line of either kind wins.
"""

from __future__ import annotations

from ..memory.view import FilmMemory
from .gather import QuestionRetriever
from .packing import Lines
from .rerank import Judge
from .text import TextRetriever
from .types import Evidence, Question, Trace

KINDS = ("utterance", "caption")


class BestLine(QuestionRetriever):
    """The single transcript line or caption that best matches the question (vector + BM25, one pool)."""

    def _gather(self, film: FilmMemory, question: Question, trace: Trace | None, lines: Lines,
                judge: Judge | None) -> list[Evidence]:
        return TextRetriever("hybrid", KINDS, pool=True).retrieve(film, question.text, k=1)
