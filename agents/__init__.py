"""Agent policies: answer a question about a film from its memory, with evidence and a trace.

    from moviemem.agents import ask
    ans = ask(film, "Why does Anna go to the lighthouse?", options=[...], policy="hybrid", backbone="local")
"""

from __future__ import annotations

from typing import Any

from ..backbones import Backbone
from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .base import Policy
from .registry import POLICIES, PolicyInfo, get_policy, list_policies
from .types import Answer, Question, Step

__all__ = ["Answer", "Policy", "PolicyInfo", "Question", "Step", "ask", "get_policy", "list_policies", "POLICIES"]


def ask(film: FilmMemory, question: str | Question, options: list[str] | None = None, kind: str | None = None,
        policy: str = "hybrid", backbone: str | Backbone = "local", until: float | None = None,
        **settings: Any) -> Answer:
    """Answer `question` about `film` with `policy` on `backbone` (a spec such as "local" or a
    Backbone). `until` hides everything shown after that time; `settings` override the policy's."""
    q = question if isinstance(question, Question) else Question.make(question, options, kind)
    if until is not None:
        if not isinstance(until, (int, float)) or until <= 0:
            raise MovieMemError(f"until must be a positive number of seconds, not {until!r}")
        film = film.until(float(until))  # the view checks it is finite and at most 48 h (NaN too)
    pol = get_policy(policy, **settings)
    if isinstance(backbone, str):
        from ..backbones import load

        backbone = load(backbone)
    return pol.answer(film, q, backbone)
