"""Answers of the quick read commands (`films`, `show`), kept beside the library and valid only
while no table has changed since they were computed.

Importing LanceDB alone takes about 1.5 s, ten times what listing films should cost. LanceDB
changes a table only by committing a new version file into its `_versions` folder, so the
folders' modification times and entry counts (and the set of tables) fingerprint everything a
read can see: an answer saved with the current fingerprint is the answer a fresh read would
give. Any write anywhere in the library invalidates every saved answer; the next read computes
it again. Local libraries only (an object store has no cheap folder listing); no LanceDB here.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..foundation.errors import MovieMemError
from ..foundation.files import PRIVATE, atomic_write_text

log = logging.getLogger(__name__)
T = TypeVar("T")
Refresh = Callable[[str | None], object]
FOLDER = ("cache", "catalog")


def fingerprint(root: Path) -> str | None:
    """The library's tables and their version folders' states; None when it has no table yet."""
    try:
        tables = sorted(e.name for e in os.scandir(root) if e.name.endswith(".lance") and e.is_dir())
        parts = []
        for name in tables:
            versions = root / name / "_versions"
            st = versions.stat()
            parts.append(f"{name}:{st.st_mtime_ns}:{sum(1 for _ in os.scandir(versions))}")
    except OSError:
        return None
    if not parts:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _path(root: Path, key: str) -> Path:
    return root.joinpath(*FOLDER, hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def cached(root: Path, key: str, compute: Callable[[], T], refresh: Refresh | None = None) -> T:
    """`compute()`, or its saved answer when the library has not changed since it was saved.
    The answer must be plain JSON. A library that cannot be written to is simply read each time.
    `refresh(fingerprint)` runs first: a long-lived reader brings its open tables up to that state
    (MemoryStore.refresh), so that no answer read from an older version of a table is saved under
    a newer fingerprint, and what it reads next is as new as the answer."""
    before = fingerprint(root) if root.is_dir() else None
    if refresh is not None:
        refresh(before)
    path = _path(root, key)
    if before is not None:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("fingerprint") == before and saved.get("key") == key:
                value: T = saved["value"]
                return value
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # no answer saved yet, or one from an older format: compute it
    value = compute()
    # a write that landed while computing leaves the answer unsaved rather than saved under the wrong state
    if before is not None and fingerprint(root) == before:
        _save(path, {"key": key, "fingerprint": before, "value": value})
    return value


def _save(path: Path, payload: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(payload, ensure_ascii=False, default=str), mode=PRIVATE)
    except OSError as exc:  # a read-only library: reads still work, each one computes
        log.debug("catalog answer not saved in %s: %s", path.parent, exc)


def saved(uri: str | Path, key: str, compute: Callable[[], T], refresh: Refresh | None = None) -> T:
    """`cached` for a library given by path or URI: an object store's library computes every time."""
    if "://" in str(uri):
        if refresh is not None:
            refresh(None)
        return compute()
    return cached(Path(uri), key, compute, refresh)


def unknown_film(film_id: str, known: Sequence[str], lister: str) -> MovieMemError:
    """The error for an id the library does not hold, naming the nearest ids it does (a typo's likely
    target) and `lister`, what lists them where the user is (a CLI command, an MCP tool)."""
    near = difflib.get_close_matches(film_id, known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near[:-1])} or {near[-1]}? " if len(near) > 1 else \
        f"did you mean {near[0]}? " if near else ""
    return MovieMemError(f"film {film_id!r} is not in the library ({hint}{lister} lists the films)")
