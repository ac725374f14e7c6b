"""Who answers a bench's queries: the Answerer protocol and the default, a library's films asked in turn.
Kept apart from the runner so that what plans or replays a run (eval/plan.py) needs no runner."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from .tasks import Query


class Answerer(Protocol):
    """Answers one query about one film with one policy and backbone; returns an Answer
    (anything with choice, text, confidence, invalid, error, evidence, trace, usage)."""

    def __call__(self, film_id: str, query: Query, policy: str, backbone: Any) -> Any: ...


class AskingFilm(Protocol):
    """What the default answerer needs of a library's film (library.Film, above eval/): `ask`, returning an Answer."""

    def ask(self, question: str, options: list[str] | None = None, kind: str | None = None, policy: str = "hybrid",
            backbone: Any = "local", until: float | None = None) -> Any: ...


class LibraryAnswerer:
    """The default Answerer: `library.film(film_id).ask(...)`, one Film object per film."""

    def __init__(self, library: Any):
        self.library = library
        self._films: dict[str, AskingFilm] = {}
        self._lock = threading.Lock()

    def film(self, film_id: str) -> AskingFilm:
        with self._lock:
            if film_id not in self._films:
                self._films[film_id] = self.library.film(film_id)
            return self._films[film_id]

    def __call__(self, film_id: str, query: Query, policy: str, backbone: Any) -> Any:
        return self.film(film_id).ask(query.question, options=list(query.options) or None, kind=query.kind,
                                      policy=policy, backbone=backbone, until=query.until)  # get_policy reads the spec

    def check_policies(self, policies: Sequence[str]) -> None:
        check_policies(policies)


def check_policies(policies: Sequence[str]) -> None:
    """Refuse unknown policy names and settings (`name[key=value,...]`) before any call is made."""
    from ..agents.registry import get_policy

    for p in policies:
        get_policy(p)
