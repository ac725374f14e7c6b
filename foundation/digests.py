"""A file's SHA-256 over all its bytes (films, subtitles, model weights), memoised on
(path, size, mtime) so a file is read once per process, and optionally recorded beside what it guards
so a new process need not read a GB of weights again. Not to be confused with
`backbones.media.media_fingerprint`, which samples large media for cache keys."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from .files import atomic_write_text


def file_sha256(path: str | Path) -> str:
    st = Path(path).stat()
    return _digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    return read_sha256(path)


def read_sha256(path: str | Path) -> str:
    """A file's SHA-256 read from its bytes now, never from the memo: a check that must see what is on
    disk (a model's `--verify`, a file whose stamp changed)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_stamp(path: str | Path) -> list[int]:
    """What changes when a file's bytes may have changed: size, modification and change times, inode and
    device. The change time (ctime) cannot be set back by a user, so a file rewritten in place and given
    its old modification time still differs."""
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def trusted_sha256(entry: object, stamp: list[int]) -> str | None:
    """The SHA-256 that `entry` (`{"stamp": ..., "sha256": ...}`, recorded after hashing a file) holds while the
    file's stamp is still `stamp`; None when it is not such an entry or the file may have changed since. The
    one rule by which a recorded digest stands in for reading the file (a model's marker, `recorded_sha256`)."""
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
        return str(entry["sha256"])
    return None


def recorded_sha256(path: str | Path, record: Path) -> str:
    """`file_sha256`, trusted from `record` (a JSON map of resolved path to stamp and digest) while the file's
    stamp is the one recorded after hashing it; hashed and recorded otherwise. A record that cannot be
    read is rebuilt, one that cannot be written only costs the next process a hash."""
    key = str(Path(path).resolve())
    stamp = file_stamp(key)
    try:
        known = json.loads(record.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    trusted = trusted_sha256(known.get(key), stamp)
    if trusted is not None:
        return trusted
    digest = file_sha256(key)
    known[key] = {"stamp": stamp, "sha256": digest}
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(record, json.dumps(known, indent=1))
    except OSError:
        pass  # a read-only folder: the digest still serves this process
    return digest
