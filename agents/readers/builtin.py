"""The built-in readers' factories, as the reader registry (registry.py) names them: each takes the readers'
settings, the run and the question. `auto` and `logprobs` choose among the others by what the backbone
gives and what the question is."""

from __future__ import annotations

from ..base import Run
from ..types import Question
from .base import Reader, ReaderSettings
from .claims import ClaimsReader
from .json_answer import JsonReader
from .letters import LettersReader, can_read
from .order_locate import claim_order
from .registry import get_reader


def letters(settings: ReaderSettings, run: Run, question: Question) -> Reader:
    return LettersReader(settings)


def claims(settings: ReaderSettings, run: Run, question: Question) -> Reader:
    """With order=locate, a claim's two ordered events are placed at their lines in the film."""
    return ClaimsReader(settings, claim_order if settings.order == "locate" else None)


def json(settings: ReaderSettings, run: Run, question: Question) -> Reader:
    return JsonReader(settings)


def logprobs(settings: ReaderSettings, run: Run, question: Question) -> Reader:
    return get_reader("claims" if question.kind == "claim" else "letters", settings, run, question)


def auto(settings: ReaderSettings, run: Run, question: Question) -> Reader:
    """Log-probabilities where the backbone gives them for this question, else JSON, saying why where a
    reader of log-probabilities would have read it."""
    if can_read(run, question):
        return logprobs(settings, run, question)
    fallback = (f"{getattr(run.backbone, 'name', 'the backbone')} gives no log-probabilities"
                if question.kind in ("mcq", "claim") else "")
    return JsonReader(settings, fallback)
