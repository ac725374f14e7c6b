"""The backbone as a relevance judge for the retrievers' rerank step (hybrid[rerank=N]).

The model reads each candidate with the question and says whether it helps answer it; the
log-probability margin of "yes" over "no" is its relevance. Question-first prompts share their
prefix, which llama.cpp reads once per question. Every call is an input-token cost of the answer
(counted in its usage), and the rerank step in the trace lists each candidate's margin.
"""

from __future__ import annotations

from ..retrievers.rerank import Judge
from .base import Run
from .prompts import RERANK, question_head
from .readers.letters import can_read, label_scores
from .types import Question


def relevance_judge(run: Run, question: Question) -> Judge | None:
    """The yes/no judge for `question`; None where the backbone gives no log-probabilities or the question
    is no multiple choice or claim (the retriever then says in the trace that it skipped the rerank)."""
    if not can_read(run, question):
        return None
    head = question_head(question)

    def judge(text: str) -> float | None:
        got = label_scores(run, RERANK, RERANK.render(question=head, passage=text), ("yes", "no"))
        return None if isinstance(got, str) else got.get("yes", -30.0) - got.get("no", -30.0)

    return judge
