"""Readers by name: `hybrid[reader=NAME]` picks one here, a built-in or a plug-in's.

One `plugins.Registry`, as for every kind: `moviemem.register("reader", name, factory)` in code, or the
entry-point group `moviemem.readers`. A factory takes the readers' settings, the run (its backbone says
what it can give) and the question, and makes a `Reader` (base.py). The built-ins (builtin.py): `letters`,
`claims`, `json`, and two that choose among them: `logprobs` (claims for a claim, else letters) and
`auto`, the default (logprobs where the backbone gives them for a multiple-choice question or a claim,
else json, saying why in the trace)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...foundation.errors import MovieMemError
from ...foundation.plugins import Registry, first_doc_line
from ..base import Run
from ..types import Question
from .base import Reader, ReaderSettings

ReaderFactory = Callable[[ReaderSettings, Run, Question], Reader]


def _check(name: str, factory: ReaderFactory, meta: dict[str, Any]) -> tuple[ReaderFactory, dict[str, Any]]:
    unknown = set(meta) - {"description"}
    if unknown:
        raise MovieMemError(f"reader {name!r}: unknown option(s) {', '.join(sorted(unknown))}; known: description")
    return factory, {"description": meta.get("description") or first_doc_line(factory)}


READERS: Registry[ReaderFactory] = Registry("reader", "moviemem.readers", check=_check)
for _name, _target, _description in [
    ("auto", "moviemem.agents.readers.builtin:auto",
     "log-probabilities where the backbone gives them (mcq, claims), else JSON"),
    ("logprobs", "moviemem.agents.readers.builtin:logprobs", "claims for a claim, else the option letters"),
    ("letters", "moviemem.agents.readers.builtin:letters", "multiple choice by the option letters' log-probabilities"),
    ("claims", "moviemem.agents.readers.builtin:claims", "a claim judged TRUE or FALSE from log-probabilities"),
    ("json", "moviemem.agents.readers.builtin:json", "a written JSON answer citing the evidence ids"),
]:
    READERS.add(_name, _target, description=_description)


def get_reader(name: str, settings: ReaderSettings, run: Run, question: Question) -> Reader:
    """The reader registered as `name`, made for this question (a plug-in's factory is checked to make one)."""
    made = READERS.get(name)(settings, run, question)
    if not callable(getattr(made, "read", None)) or not callable(getattr(made, "budget", None)):
        raise MovieMemError(f"reader {name!r} ({READERS.entry(name).source}) made a {type(made).__name__}, "
                            "not a Reader (`budget(question, default)` and `read(run, reading)`)")
    return made
