"""Atomic file writes: a file appears whole under its final name or not at all.

The new content goes to a fresh temporary file in the target's own folder (so the rename never
crosses file systems), which `os.replace` moves over the target in one step; readers, a crash, or a
writer racing another see the old file or the new one, never half of either. A failed write removes
its temporary file and leaves the old target untouched. `atomic_path` hands the temporary path to
code that writes by path (ffmpeg, tarfile); `atomic_write` and `atomic_write_text` write it here.
Nothing is fsynced: the rename is safe against crashes of the process, not against power loss.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import UnwritableError

PUBLIC = 0o644  # what a plain open() makes under the usual umask
PRIVATE = 0o600  # what mkstemp makes: the owner only


@contextmanager
def atomic_path(path: str | Path, *, mode: int = PUBLIC, suffix: str = ".tmp") -> Iterator[Path]:
    """A fresh, empty temporary file beside `path`, moved over `path` with permissions `mode` when
    the block ends without an error, and removed when it raises. `suffix` lets a writer that picks
    its format by file name (ffmpeg, matplotlib) see the right one. The folder must exist."""
    target = Path(path)
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    except OSError as exc:  # a folder that is missing or not writable: a one-line error naming the target
        raise UnwritableError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object], *, mode: int = PUBLIC) -> Path:
    """`write(f)` into a temporary binary file, then moved over `path` (see `atomic_path`)."""
    with atomic_path(path, mode=mode) as tmp, open(tmp, "wb") as f:
        write(f)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, mode: int = PUBLIC) -> Path:
    """`text` as UTF-8, written atomically (see `atomic_path`)."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")), mode=mode)
