"""moviemem: a queryable memory of a full-length film, and agent policies that answer from it."""

from ._version import __version__
from .errors import MovieMemError

__all__ = ["Answer", "Evidence", "Film", "Library", "MovieMemError", "Question", "__version__"]


def __getattr__(name: str) -> object:
    # imported when first asked for: the memory layer pulls in LanceDB, pyarrow and pandas (about
    # 1.5 s), which `moviemem --help` and `--version` never need
    if name in ("Film", "Library"):
        from . import library

        return getattr(library, name)
    if name in ("Question", "Answer"):
        from . import agents

        return getattr(agents, name)
    if name == "Evidence":
        from .retrievers.base import Evidence

        return Evidence
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
