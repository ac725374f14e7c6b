"""moviemem: a queryable memory of a full-length film, and agent policies that answer from it."""

from ._version import __version__
from .errors import MovieMemError
from .library import Film, Library

__all__ = ["Answer", "Evidence", "Film", "Library", "MovieMemError", "Question", "__version__"]


def __getattr__(name: str) -> object:
    # the answer types pull in the agents and backbones layers: import them only when asked for
    if name in ("Question", "Answer"):
        from . import agents

        return getattr(agents, name)
    if name == "Evidence":
        from .retrievers.base import Evidence

        return Evidence
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
