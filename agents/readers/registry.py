"""Readers by name: `hybrid[reader=NAME]` picks one here, a built-in or a plug-in's, with its own settings
where it is named (`hybrid[reader=letters(rotations=one, budget_tokens=1000)]`), as a postprocessor step
takes its own.

One `plugins.Registry`, as for every kind: `moviemem.register("reader", name, factory)` in code, or the
entry-point group `moviemem.readers`. A factory takes its settings, the run (its backbone says what it can
give) and the question, and makes a `Reader` (base.py). It declares its settings as a step does: a `Settings`
dataclass on the factory (a class's nested one; `@own_settings(MySettings)` on a function); each written
setting is checked against its field's type, and an unknown or badly typed one is refused in one line when
the policy is built, before any question is asked. A factory that declares none is handed None.

The built-ins (builtin.py, their settings in settings.py): `letters`, `claims`, `json`, and two that choose
among them: `logprobs` (claims for a claim, else letters) and `auto`, the default (logprobs where the backbone
gives them for a multiple-choice question or a claim, else json, saying why in the trace). A reader that
chooses among others declares their names (`@own_settings(chooses=("letters", "claims"))`) and takes each one's
settings under that reader's name, `READER.SETTING`: `auto(letters.rotations=one, claims.foil_form=statements,
json.max_tokens=256)`; it is handed a dict of each chosen reader's name -> its settings, and makes the one it
picks with `get_reader(name, settings[name], run, question)`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from ...foundation.errors import MovieMemError
from ...foundation.plugins import Registry, first_doc_line
from ...foundation.specs import checked, parse_call, setting_types, write_call
from ..base import Run
from ..types import Question
from .base import Reader
from .settings import LEGACY_READER

ReaderFactory = Callable[[Any, Run, Question], Reader]
F = TypeVar("F", bound=Callable[..., Any])


def own_settings(settings: type | None = None, chooses: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Declares a function factory's own settings (a dataclass), or the readers it chooses among, as a class
    factory declares them with a nested `Settings` (and a `chooses` attribute)."""

    def declare(factory: F) -> F:
        for key, value in (("Settings", settings), ("chooses", chooses)):
            setattr(factory, key, value)
        return factory

    return declare


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


def _chooses(factory: ReaderFactory) -> tuple[str, ...]:
    return tuple(getattr(factory, "chooses", None) or ())


def _declared(factory: ReaderFactory) -> Any:
    """The factory's own `Settings` dataclass, or None where it declares none."""
    own = getattr(factory, "Settings", None)
    return own if isinstance(own, type) and dataclasses.is_dataclass(own) else None


def reader_settings(name: str, written: dict[str, Any]) -> Any:
    """The settings `name`'s factory is handed, from those written where it is named, each checked against its
    type: its `Settings` dataclass, None where it declares none, or for a reader that chooses among others, each
    chosen reader's name -> its own (written `READER.SETTING`)."""
    factory = READERS.get(name)
    chooses = _chooses(factory)
    if chooses:
        own: dict[str, dict[str, Any]] = {c: {} for c in chooses}
        for key, value in written.items():
            head, dot, rest = key.partition(".")
            if not dot or head not in own:
                raise MovieMemError(f"reader {name} has no setting {key!r}; it takes each reader's own as "
                                    f"READER.SETTING, READER one of {', '.join(chooses)}")
            own[head][rest] = value
        return {c: reader_settings(c, w) for c, w in own.items()}
    declared = _declared(factory)
    fields = [f.name for f in dataclasses.fields(declared)] if declared is not None else []
    unknown = [k for k in written if k not in fields]
    if unknown:
        raise MovieMemError(f"reader {name} has no setting {unknown[0]!r}; settings: {', '.join(fields) or 'none'}")
    if declared is None:
        return None
    hints = setting_types(declared)
    return declared(**{k: checked(f"reader {name}", k, v, hints.get(k)) for k, v in written.items()})


def parse_reader(spec: str) -> tuple[str, Any]:
    """`name` or `name(key=value,...)` -> the reader's name and the settings its factory is handed (checked)."""
    name, written = parse_call(spec, "reader")
    return name, reader_settings(name, written)


def fold_reader_legacy(spec: str, flat: dict[str, Any]) -> str:
    """`spec` with the readers' old flat settings (settings.LEGACY_READER: hybrid[rotations=one, cite=none])
    written onto the readers that own them, where the spelling does not give them itself and they differ from
    the reader's default: `auto` + rotations=one -> `auto(claims.rotations="one")`. A setting whose reader is
    not named (hybrid[reader=json, rotations=one]) changes nothing, as before."""
    name, written = parse_call(spec, "reader")
    chooses = _chooses(READERS.get(name))
    for old, value in flat.items():
        for owner, key in LEGACY_READER[old][1]:
            spelled = key if owner == name else f"{owner}.{key}" if owner in chooses else None
            if spelled is None or spelled in written:
                continue
            default = next(f.default for f in dataclasses.fields(_declared(READERS.get(owner))) if f.name == key)
            if value != default:
                written[spelled] = value
    return write_call(name, written)


def get_reader(name: str, settings: Any, run: Run, question: Question) -> Reader:
    """The reader registered as `name`, made for this question with its settings (`reader_settings`; a
    plug-in's factory is checked to make one)."""
    made = READERS.get(name)(settings, run, question)
    if not callable(getattr(made, "read", None)) or not callable(getattr(made, "budget", None)):
        raise MovieMemError(f"reader {name!r} ({READERS.entry(name).source}) made a {type(made).__name__}, "
                            "not a Reader (`budget(question, default)` and `read(run, reading)`)")
    return made
