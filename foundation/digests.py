"""A file's SHA-256 over all its bytes (films, subtitles, model weights), memoised on
(path, size, mtime) so a file is read once per process. Not to be confused with
`backbones.media.media_fingerprint`, which samples large media for cache keys."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    st = Path(path).stat()
    return _digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
