"""moviemem: a queryable memory of a full-length film, and agent policies that answer from it."""

from typing import Any

from .foundation._version import __version__
from .foundation.errors import MovieMemError
from .foundation.plugins import MISSING, import_target

__all__ = ["Answer", "Evidence", "Film", "Library", "MovieMemError", "Question", "__version__", "register"]

# every kind of plug-in and the registry that holds it (each imported only when its kind is used)
KINDS = {
    "backbone": "moviemem.backbones.registry:BACKBONES",
    "policy": "moviemem.agents.registry:POLICIES",
    "retriever": "moviemem.retrievers.registry:RETRIEVERS",
    "postprocessor": "moviemem.retrievers.postprocess:POSTPROCESSORS",
    "channel": "moviemem.retrievers.routing:CHANNEL_RETRIEVERS",
    "reader": "moviemem.agents.readers.registry:READERS",
    "stage": "moviemem.ingest.registry:STAGES",
    "format": "moviemem.eval.formats:FORMATS",
    "adapter": "moviemem.eval.formats:ADAPTERS",
    "task": "moviemem.eval.tasks:TASKS",
}


def register(kind: str, name: str, target: Any = MISSING, **meta: Any) -> Any:
    """Add a plug-in of any kind defined in code, the one way for all of them:
    `register("policy", "mine", Mine, description=...)`, or as a decorator `@register("backbone", "echo")`.
    An installed package uses the kind's entry-point group instead (`moviemem.policies`, ...)."""
    if kind not in KINDS:
        raise MovieMemError(f"unknown plug-in kind {kind!r}; kinds: {', '.join(KINDS)}")
    return import_target(KINDS[kind]).register(name, target, **meta)


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
        from .retrievers.types import Evidence

        return Evidence
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
