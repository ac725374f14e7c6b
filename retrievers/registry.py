"""The registry of question-level retrievers: name -> factory of a `QuestionRetriever`.

One `plugins.Registry`, as for backbones and policies; an installed package adds one through the
entry-point group `moviemem.retrievers` (target: a callable taking no arguments, or a
`QuestionRetriever` subclass). The hybrid policy (`hybrid[retriever=NAME]`), `retrieval-eval
--retrievers` and `moviemem search --retriever` all resolve names here. The built-ins are presets of
the routed retriever, kept so that units, search modes and fusion can be compared by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from .gather import QuestionRetriever, Routed
from .routing import CHANNELS
from .settings import GatherSettings

RETRIEVERS: Registry[Callable[[], QuestionRetriever]] = Registry("retriever")
DEFAULT = "hybrid"  # what the hybrid policy gathers with out of the box


def _only(kind: str, k: int = 10) -> dict[str, tuple[tuple[str, int], ...]]:
    return {t: ((kind, k),) for t in CHANNELS}


def _routed(**kw: Any) -> Callable[[], QuestionRetriever]:
    return lambda: Routed(GatherSettings(**kw))


def _transcript(**kw: Any) -> dict[str, Any]:
    """Settings that search the transcript channel alone, for comparing units, search modes and fusion."""
    return {"channels": _only("utterance"), **kw}


_BUILTIN: dict[str, tuple[str, dict[str, Any]]] = {
    "hybrid": ("the hybrid policy's own gathering, default settings", {}),
    "hybrid-lines": ("hybrid routing over single lines, vector + BM25, round-robin over queries (moviemem 0.1's hybrid)",
                     {"units": "lines", "search": "hybrid", "fusion": "interleave", "informative": False,
                      "context_lines": 0}),
    "hybrid-joined": ("the hybrid policy's gathering with each option searched only joined to the question (moviemem 0.2)",
                      {"option_alone": False}),
    "passages": ("passages, BM25, question and each option, fused", _transcript(units="passages", search="fts", context_lines=0)),
    "passages-hybrid": ("passages, vector + BM25", _transcript(units="passages", search="hybrid", context_lines=0)),
    "passages-vector": ("passages, vector search only", _transcript(units="passages", search="vector", context_lines=0)),
    "passages-question": ("passages, BM25, the question alone (no per-option queries)",
                          _transcript(units="passages", search="fts", per_option=0, context_lines=0)),
    "lines": ("single lines, vector + BM25, fused, informative lines first",
              _transcript(units="lines", search="hybrid", context_lines=0)),
    "lines-context1": ("single lines (vector + BM25) shown with 1 neighbour either side",
                       _transcript(units="lines", search="hybrid", context_lines=1, context="fixed")),
    "lines-context2": ("single lines (vector + BM25) shown with 2 neighbours either side",
                       _transcript(units="lines", search="hybrid", context_lines=2, context="fixed")),
    "lines-grow": ("single lines (vector + BM25), then up to 2 neighbours either side as the budget allows",
                   _transcript(units="lines", search="hybrid", context_lines=2, context="budget")),
    "mixed1": ("passages and single lines (1 neighbour either side) fused, BM25",
               _transcript(units="mixed", search="fts", context_lines=1, context="fixed")),
    "mixed2-hybrid": ("passages and single lines (2 neighbours either side) fused, vector + BM25",
                      _transcript(units="mixed", context_lines=2, search="hybrid", context="fixed")),
    "hybrid-grow": ("the hybrid policy's gathering, line hits widened as the budget allows (context=budget)",
                    {"context": "budget"}),
    "hybrid-option-lines": ("the hybrid policy's gathering, each option's own best line first (option_lines=1)",
                            {"option_lines": 1}),
    "hybrid-context1": ("the hybrid policy's gathering, line hits shown with 1 neighbour either side (context_lines=1)",
                        {"context_lines": 1}),
    "hybrid-lines-grow": ("the hybrid policy's routing over single lines, widened as the budget allows",
                          {"units": "lines", "context": "budget"}),
    "hybrid-rerank": ("the hybrid policy's gathering, its first 30 candidates reranked by a model's yes/no relevance "
                      "(rerank=30; needs a backbone with log-probabilities)", {"rerank": 30}),
}
for _name, (_description, _settings) in _BUILTIN.items():
    RETRIEVERS.add(_name, _routed(**_settings), description=_description)
RETRIEVERS.add("scene-prior", "moviemem.retrievers.scene_prior:ScenePrior",
              description="the hybrid gathering re-ranked by the scenes whose summaries match the question (measures summaries)")
RETRIEVERS.add("best-line", "moviemem.retrievers.best_line:BestLine",
              description="the one line or caption that best matches the question (where a moment is in the film)")


def get_retriever(name: str) -> QuestionRetriever:
    """A fresh retriever by registry name (a plug-in's factory is checked to make one)."""
    made = RETRIEVERS.get(name)()
    if not isinstance(made, QuestionRetriever):
        raise MovieMemError(f"retriever {name!r} ({RETRIEVERS.entry(name).source}) made a {type(made).__name__}, "
                            "not a QuestionRetriever")
    made.name = name
    return made


def describe(name: str) -> str:
    """A retriever's one-line description, without importing a plug-in."""
    entry = RETRIEVERS.entry(name)
    return str(entry.meta.get("description") or getattr(entry.load(), "__doc__", "") or "").strip().split("\n")[0]
