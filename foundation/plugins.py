"""One registry shape for every kind of plug-in: backbones, policies, retrievers, stages, formats,
adapters, tasks.

A registry maps a name to a target: the object itself, or a dotted path `"package.module:attr"`
that is imported only when the entry is used, so listing names never imports a heavy client.
Each kind has an entry-point group (`moviemem.backbones`, `moviemem.policies`, `moviemem.stages`,
`moviemem.formats`, `moviemem.tasks`, ...): an installed package adds a plug-in without touching
moviemem. In code every kind is added the same way, `registry.register(name, target, **meta)` or
as a decorator (`moviemem.register(kind, ...)` finds the registry by kind); a kind that needs more
than a name and a target checks it in its `check`. A plug-in that fails to import is reported as a
value (`failures`), never hides the others, and is named in the error when it is asked for.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar, cast

from .errors import MovieMemError

log = logging.getLogger("moviemem.foundation.plugins")

T = TypeVar("T")
X = TypeVar("X")
# a kind's check of what is registered in code: (name, target, meta) -> (target, meta) to store, or MovieMemError
Check = Callable[[str, Any, dict[str, Any]], tuple[Any, dict[str, Any]]]
MISSING: Any = object()  # "no target given": register() then returns a decorator


def import_target(path: str) -> Any:
    """`package.module:attr.sub` (or `package.module.attr`) -> the object."""
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry(Generic[T]):
    """One registered plug-in: `target` is the object or its dotted path; `meta` is what a
    listing shows without importing it (description, capabilities, needs, ...)."""

    name: str
    target: Any
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "moviemem"
    _loaded: Any = field(default=None, repr=False)

    @property
    def lazy(self) -> bool:
        return isinstance(self.target, str)

    def load(self) -> T:
        if self._loaded is None:
            self._loaded = import_target(self.target) if isinstance(self.target, str) else self.target
        return cast(T, self._loaded)  # the registry's kind is T by construction


class Registry(Generic[T]):
    """name -> Entry, with entry-point discovery on first lookup of an unknown name or listing."""

    def __init__(self, kind: str, group: str | None = None, check: Check | None = None) -> None:
        self.kind = kind
        self.group = group or f"moviemem.{kind}s"
        self.check = check
        self._entries: dict[str, Entry[T]] = {}
        self._discovered = False
        self.failures: dict[str, str] = {}  # name -> why it could not be loaded
        self.clashes: dict[str, list[str]] = {}  # name -> every source that registers it (two or more)

    def add(self, name: str, target: Any, *, source: str = "moviemem", **meta: Any) -> Entry[T]:
        if not name or not isinstance(name, str):
            raise MovieMemError(f"a {self.kind} needs a non-empty name, not {name!r}")
        entry: Entry[T] = Entry(name, target, meta, source)
        self._entries[name] = entry
        self.failures.pop(name, None)
        return entry

    def register(self, name: str, target: Any = MISSING, **meta: Any) -> Any:
        """Add a plug-in defined in code: `register("name", obj, **meta)`, or as a decorator
        `@register("name", **meta)`; returns the object, checked by the kind's `check`."""

        def add(obj: X) -> X:
            stored, checked = self.check(name, obj, dict(meta)) if self.check is not None else (obj, meta)
            self.add(name, stored, source=getattr(obj, "__module__", "") or "moviemem", **checked)
            return obj

        return add if target is MISSING else add(target)

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for ep in entry_points(group=self.group):
            source = f"entry point {ep.value}" + (f" of {ep.dist.name}" if ep.dist is not None else "")
            if ep.name in self._entries:  # two packages, or a package and moviemem, claim one name: never pick one silently
                self.clashes.setdefault(ep.name, [self._entries[ep.name].source]).append(source)
                continue
            self._entries[ep.name] = Entry(ep.name, ep.value, {}, source)

    def names(self) -> list[str]:
        self._discover()
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entry(self, name: str) -> Entry[T]:
        if name not in self:
            raise MovieMemError(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self._entries)) or 'none'}")
        if name in self.clashes:
            raise MovieMemError(f"{self.kind} {name!r} is registered more than once ({'; '.join(self.clashes[name])}): "
                                "uninstall or rename one of them")
        return self._entries[name]

    def get(self, name: str) -> T:
        """The loaded plug-in; a failed import is a MovieMemError naming the plug-in and the cause."""
        entry = self.entry(name)
        try:
            return entry.load()
        except Exception as exc:  # noqa: BLE001 - any import error of a plug-in becomes one clear message
            why = f"{type(exc).__name__}: {exc}"
            self.failures[name] = why
            raise MovieMemError(f"{self.kind} {name!r} ({entry.source}, {entry.target}) failed to load: {why}") from None

    def load_all(self) -> dict[str, T]:
        """Every plug-in that loads; the others are recorded in `failures` and logged."""
        out: dict[str, T] = {}
        for name in self.names():
            try:
                out[name] = self.get(name)
            except MovieMemError as exc:
                log.warning("%s", exc)
        return out


def first_doc_line(obj: Any) -> str:
    """What a listing shows of a plug-in registered without a description."""
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    return doc[0] if doc else ""
