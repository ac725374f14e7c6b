"""The built-in readers' factories, as the reader registry (registry.py) names them: each takes its own settings
(settings.py), the run and the question. `auto` and `logprobs` choose among the others by what the backbone
gives and what the question is, and hand the one they choose its own settings."""

from __future__ import annotations

from typing import Any

from ..base import Run
from ..types import Question
from .base import Reader
from .claims import ClaimsReader
from .json_answer import JsonReader
from .letters import LettersReader, can_read
from .order_locate import claim_order
from .registry import get_reader, own_settings
from .settings import ClaimsSettings, JsonSettings, LettersSettings


@own_settings(LettersSettings)
def letters(settings: LettersSettings, run: Run, question: Question) -> Reader:
    return LettersReader(settings)


@own_settings(ClaimsSettings)
def claims(settings: ClaimsSettings, run: Run, question: Question) -> Reader:
    """With order=locate, a claim's two ordered events are placed at their lines in the film."""
    return ClaimsReader(settings, claim_order if settings.order == "locate" else None)


@own_settings(JsonSettings)
def json(settings: JsonSettings, run: Run, question: Question) -> Reader:
    return JsonReader(settings)


@own_settings(chooses=("letters", "claims"))
def logprobs(settings: dict[str, Any], run: Run, question: Question) -> Reader:
    chosen = "claims" if question.kind == "claim" else "letters"
    return get_reader(chosen, settings[chosen], run, question)


@own_settings(chooses=("letters", "claims", "json"))
def auto(settings: dict[str, Any], run: Run, question: Question) -> Reader:
    """Log-probabilities where the backbone gives them for this question, else JSON, saying why where a
    reader of log-probabilities would have read it."""
    if can_read(run, question):
        return logprobs(settings, run, question)
    fallback = (f"{getattr(run.backbone, 'name', 'the backbone')} gives no log-probabilities"
                if question.kind in ("mcq", "claim") else "")
    return JsonReader(settings["json"], fallback)
