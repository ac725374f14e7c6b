"""Saved llama.cpp prompt states on disk, so a film's long prefix is read once per machine, not once per process.

Reading a film's transcript (or its caption history) is most of a full-context question's cost on a local
model: minutes per film. The in-process RAM cache keeps that read for the life of one process; this store
keeps it across processes (a new `bench`, `ask`, MCP server or Ray worker). After a call that read at least
`min_tokens` new prompt tokens, the model's state (its KV cache and the token ids it holds) is written here;
a later call whose prompt shares at least `min_tokens` more tokens with a saved state than the model already
holds restores it and reads only the rest.

One file a state, `<key>-<head>-<tokens>.state`: `key` digests what must match for the bytes to mean the
same thing (the model file's SHA-256, the llama.cpp build, the context settings), `head` the prompt's
first HEAD_TOKENS tokens (so a lookup opens only states of the same film and prompt), `tokens` all its
tokens. The file is

    MAGIC (8) | version (u32) | header length (u32) | SHA-256 of the header (32) | header (JSON)
    | token ids (int32, checked by the header's tokens_sha256) | llama.cpp state (checked by payload_sha256)

so every byte is verified before use: a damaged or foreign file is ignored with one warning and removed
(the call reads its prompt and writes a good state again). Writes go to a temporary file held under an
exclusive lock, fsynced, then renamed into place: a reader never sees half a state, and a writer killed
mid-write leaves only a temporary file that the next writer removes (its lock died with it). Renames,
eviction and clearing hold the folder's lock (`.lock`), so processes sharing the folder on a POSIX file
system (Ray workers) agree. Least-recently-used states go first when the folder passes `max_bytes`; a
restore touches the file's mtime, which is its "last use" (atime is often off).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("moviemem.backbones")

MAGIC = b"MMPSTATE"
VERSION = 1
SUFFIX = ".state"
TMP_PREFIX, TMP_SUFFIX = ".tmp-", ".part"  # a state being written: never matched by *.state
DIGESTS = "model-digests.json"  # the weights' SHA-256 by file stamp (foundation.digests.recorded_sha256)
FOLDER = "prefix-states"  # under the library's cache folder
HEAD_TOKENS = 256  # a state is filed under a digest of its first tokens: the system prompt and the film's first lines
# in the key of a state that holds a request's shared prefix read alone (what full-context questions restore); a
# state saved at the end of any other long call lacks it and is restored only by calls that mark no shared prefix
SHARED_READ = {"read": "shared prefix alone"}
BUILD_RECORD = "moviemem-llama-build.json"  # scripts/setup.sh writes it into the environment (doctor reads it too)
_FIXED = struct.Struct("<8sII32s")
_CHUNK = 1 << 24


@dataclass(frozen=True)
class Asking:
    """Who is asking: the film (a label in `moviemem cache`) and the library's cache folder (None: the setting's)."""

    film: str | None = None
    cache_folder: Path | None = None


_asking: ContextVar[Asking | None] = ContextVar("moviemem_prefix_asking", default=None)


@contextlib.contextmanager
def asking(film: str | None, cache_folder: str | Path | None) -> Iterator[None]:
    """Calls made inside are about `film` and keep their saved states in `cache_folder`/prefix-states."""
    token = _asking.set(Asking(film, Path(cache_folder) if cache_folder is not None else None))
    try:
        yield
    finally:
        _asking.reset(token)


def current() -> Asking:
    return _asking.get() or Asking()


def build_key() -> str:
    """The llama.cpp build: setup's record of how it was compiled (its key covers the version, CMake arguments,
    compiler and Python), else the installed version marked unrecorded."""
    try:
        import llama_cpp

        version = str(llama_cpp.__version__)
    except ImportError:
        version = "none"
    try:
        record = json.loads((Path(sys.prefix) / BUILD_RECORD).read_text())
        return f"{version}:{record.get('level')}:{record.get('key')}"
    except (OSError, ValueError, AttributeError):
        return f"{version}:unrecorded"


def token_digest(ids: Any) -> str:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(ids, dtype="<i4").tobytes()).hexdigest()


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def common_prefix(a: Any, b: Any) -> int:
    """How many leading token ids two arrays share."""
    import numpy as np

    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


@dataclass
class Entry:
    """One saved state, as its header says (payload not read)."""

    path: Path
    header: dict[str, Any]
    tokens: Any  # numpy int32 array
    offset: int  # where the payload starts
    size: int  # bytes on disk
    last_use: float  # mtime
    inode: int

    @property
    def n_tokens(self) -> int:
        return int(self.header["n_tokens"])


class Damaged(Exception):
    """A state file that is not what its header says."""


def _flock(fd: int, exclusive: bool = True, block: bool = True) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if block else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


class PrefixStates:
    """The saved states of one folder. `max_bytes` caps the folder (least recently used go first)."""

    def __init__(self, folder: str | Path, max_bytes: int, min_tokens: int) -> None:
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)
        self.min_tokens = max(HEAD_TOKENS, int(min_tokens))
        self._warned: set[str] = set()

    # -- locking

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The folder's lock: renames, eviction and removal happen one process at a time."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _flock(fd)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- reading

    def warn(self, path: Path, why: str) -> None:
        if str(path) not in self._warned:
            self._warned.add(str(path))
            log.warning("saved prompt state %s is ignored and will be rewritten: %s", path.name, why)

    def read_entry(self, path: Path) -> Entry:
        """The header and token ids of a state file, verified; raises Damaged."""
        import numpy as np

        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            fixed = f.read(_FIXED.size)
            if len(fixed) != _FIXED.size:
                raise Damaged("shorter than its header")
            magic, version, head_len, head_sha = _FIXED.unpack(fixed)
            if magic != MAGIC:
                raise Damaged("not a moviemem prompt state")
            if version != VERSION:
                raise Damaged(f"format version {version}, this moviemem reads {VERSION}")
            raw = f.read(head_len)
            if len(raw) != head_len or hashlib.sha256(raw).digest() != head_sha:
                raise Damaged("its header does not match its checksum")
            try:
                header = json.loads(raw)
                n = int(header["n_tokens"])
                payload_len = int(header["payload_len"])
            except (ValueError, KeyError, TypeError):
                raise Damaged("its header is not readable") from None
            blob = f.read(4 * n)
            if len(blob) != 4 * n or hashlib.sha256(blob).hexdigest() != header.get("tokens_sha256"):
                raise Damaged("its token ids do not match their checksum")
            offset = _FIXED.size + head_len + 4 * n
            if st.st_size != offset + payload_len:
                raise Damaged(f"{st.st_size:,} bytes where its header says {offset + payload_len:,}")
        return Entry(path, header, np.frombuffer(blob, dtype="<i4").astype(np.intc), offset, st.st_size, st.st_mtime,
                     st.st_ino)

    def entries(self) -> list[Entry]:
        """Every readable state here, least recently used first (damaged ones are warned about and left out)."""
        out = []
        for path in sorted(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []:
            try:
                out.append(self.read_entry(path))
            except Damaged as exc:
                self.warn(path, str(exc))
            except FileNotFoundError:
                continue  # evicted meanwhile
        return sorted(out, key=lambda e: e.last_use)

    def find(self, key: dict[str, Any], tokens: Any, at_least: int) -> tuple[Entry, int] | None:
        """The saved state sharing the longest prefix with `tokens` (at least `at_least` tokens), and that length.
        A damaged candidate is warned about once and removed."""
        if len(tokens) < HEAD_TOKENS or not self.folder.is_dir():
            return None
        pattern = f"{key_digest(key)}-{token_digest(tokens[:HEAD_TOKENS])[:16]}-*{SUFFIX}"
        best: tuple[Entry, int] | None = None
        for path in self.folder.glob(pattern):
            try:
                entry = self.read_entry(path)
            except FileNotFoundError:
                continue
            except Damaged as exc:
                self.drop(path, str(exc))
                continue
            if entry.header.get("key") != key:
                self.drop(path, "it was saved for another model, build or context")
                continue
            shared = common_prefix(entry.tokens, tokens)
            if shared >= at_least and (best is None or shared > best[1]):
                best = (entry, shared)
        return best

    def payload(self, entry: Entry) -> bytearray | None:
        """The state's llama.cpp bytes, checked against their SHA-256 (None, warned and removed, if damaged);
        the file's mtime is touched: its last use."""
        length = int(entry.header["payload_len"])
        data = bytearray(length)
        digest = hashlib.sha256()
        view = memoryview(data)
        try:
            with open(entry.path, "rb") as f:
                if os.fstat(f.fileno()).st_ino != entry.inode:
                    return None  # replaced since its header was read: the caller looks again next time
                f.seek(entry.offset)
                got = 0
                while got < length:
                    n = f.readinto(view[got:got + _CHUNK])
                    if not n:
                        break
                    digest.update(view[got:got + n])
                    got += n
        except FileNotFoundError:
            return None
        if got != length or digest.hexdigest() != entry.header.get("payload_sha256"):
            self.drop(entry.path, "its state bytes do not match their checksum", entry.inode)
            return None
        with contextlib.suppress(OSError):  # a file another user owns: its use is not recorded, nothing else
            os.utime(entry.path)
        return data

    def drop(self, path: Path, why: str, inode: int | None = None) -> None:
        """Warn once and remove a bad file, unless another process has replaced it meanwhile."""
        self.warn(path, why)
        with self.locked(), contextlib.suppress(FileNotFoundError):
            if inode is None or os.stat(path).st_ino == inode:
                path.unlink()

    # -- writing

    def save(self, key: dict[str, Any], tokens: Any, payload: Any, *, film: str | None, backbone: str) -> Path | None:
        """Write a state atomically, then evict down to the cap. None when the state alone exceeds the cap."""
        import numpy as np

        view = memoryview(payload).cast("B")
        blob = np.ascontiguousarray(tokens, dtype="<i4").tobytes()
        if _FIXED.size + len(blob) + len(view) + 4096 > self.max_bytes:
            return None
        header = {"key": key, "n_tokens": len(tokens), "tokens_sha256": hashlib.sha256(blob).hexdigest(),
                  "payload_len": len(view), "payload_sha256": hashlib.sha256(view).hexdigest(),
                  "film": film, "backbone": backbone, "created": time.time()}
        raw = json.dumps(header, sort_keys=True).encode()
        name = f"{key_digest(key)}-{token_digest(tokens[:HEAD_TOKENS])[:16]}-{token_digest(tokens)[:16]}{SUFFIX}"
        target = self.folder / name
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=TMP_PREFIX, suffix=TMP_SUFFIX)
        try:
            _flock(fd)  # held while writing: a cleaner that can take it knows the writer is gone
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(_FIXED.pack(MAGIC, VERSION, len(raw), hashlib.sha256(raw).digest()))
                f.write(raw)
                f.write(blob)
                for start in range(0, len(view), _CHUNK):
                    f.write(view[start:start + _CHUNK])
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            with self.locked():
                os.replace(tmp, target)
                self._evict(keep=target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        return target

    def _evict(self, keep: Path | None = None) -> list[Path]:
        """With the folder's lock held: remove abandoned temporary files, then least recently used states until
        the folder is within the cap."""
        for tmp in self.folder.glob(f"{TMP_PREFIX}*{TMP_SUFFIX}"):
            try:
                fd = os.open(tmp, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                if _flock(fd, block=False):  # its writer died (kill -9, a lost node): nobody holds it
                    tmp.unlink(missing_ok=True)
            finally:
                os.close(fd)
        states = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                st = path.stat()
                states.append((st.st_mtime, st.st_size, path))
        total = sum(s for _, s, _ in states)
        gone = []
        for _, size, path in sorted(states):
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size
            gone.append(path)
        return gone

    def clear(self, film: str | None = None) -> tuple[int, int]:
        """Remove every state (or a film's); returns (states, bytes) removed."""
        removed = freed = 0
        if not self.folder.is_dir():
            return 0, 0
        with self.locked():
            for entry in self.entries() if film else []:
                if entry.header.get("film") == film:
                    entry.path.unlink(missing_ok=True)
                    removed, freed = removed + 1, freed + entry.size
            if film is None:
                for path in list(self.folder.glob(f"*{SUFFIX}")):
                    with contextlib.suppress(FileNotFoundError):
                        size = path.stat().st_size
                        path.unlink()
                        removed, freed = removed + 1, freed + size
        return removed, freed


# ----------------------------------------------------------------------------- where, for callers above


def folder_for(cache_folder: str | Path | None = None, **settings: Any) -> Path:
    """The state folder: the llm_state_dir setting, else `<cache folder>/prefix-states` (the library's cache
    folder: `cache_folder`, else the settings' cache folder)."""
    from .settings import get_backbone_settings

    s = get_backbone_settings(**settings)
    if s.llm_state_dir is not None:
        return s.llm_state_dir.expanduser()
    return (Path(cache_folder).expanduser() if cache_folder is not None else s.cache_path) / FOLDER


def open_states(cache_folder: str | Path | None = None, **settings: Any) -> PrefixStates:
    from .settings import get_backbone_settings

    s = get_backbone_settings(**settings)
    return PrefixStates(folder_for(cache_folder, **settings), s.llm_state_max_bytes, s.llm_state_min_tokens)


def listing(states: PrefixStates) -> list[dict[str, Any]]:
    """What `moviemem cache` shows: one row a state, most recently used first."""
    return [{"film": e.header.get("film"), "backbone": e.header.get("backbone"), "tokens": e.n_tokens,
             "bytes": e.size, "last_use": e.last_use, "file": e.path.name}
            for e in reversed(states.entries())]


def saved_prefixes(cache_folder: str | Path | None, backbone: str) -> set[str]:
    """The films whose shared prefix (a full-context question's transcript or captions) a backbone (by name, as
    `moviemem cache` lists it: "local", "local-small", "llamacpp:/path") has saved in this cache folder: a plan
    counts their first read as restored, not read. States saved outside a film's question (no film known) or at
    the end of another call are left out."""
    return {str(e.header["film"]) for e in open_states(cache_folder).entries()
            if e.header.get("backbone") == backbone and e.header.get("film")
            and isinstance(e.header.get("key"), dict) and e.header["key"].get("read") == SHARED_READ["read"]}


_stores: dict[tuple[str, int, int], PrefixStates] = {}
_stores_lock = threading.Lock()


def store_at(folder: Path, max_bytes: int, min_tokens: int) -> PrefixStates:
    """One store object per folder and settings in a process, so its warnings are said once."""
    with _stores_lock:
        key = (str(folder), max_bytes, min_tokens)
        if key not in _stores:
            _stores[key] = PrefixStates(folder, max_bytes, min_tokens)
        return _stores[key]


# ----------------------------------------------------------------------------- a llama.cpp context's state


def capture(llm: Any) -> tuple[Any, Any]:
    """The token ids a llama_cpp.Llama holds and its context's state bytes (KV cache, last logits), copied once:
    `save_state()` would also copy the n_batch x vocabulary score matrix (~300 MB) that sampling never reads."""
    from llama_cpp import llama_cpp as C  # noqa: N812 - the C API, named as llama.cpp's own examples do

    size = int(C.llama_state_get_size(llm.ctx))
    buf = (ctypes_ubyte() * size)()
    n = int(C.llama_state_get_data(llm.ctx, buf, size))
    if n > size:
        raise RuntimeError("llama.cpp wrote more state than it announced")
    return llm.input_ids[: llm.n_tokens].copy(), memoryview(buf).cast("B")[:n]


def restore(llm: Any, tokens: Any, payload: bytearray, keep: int) -> None:
    """Load saved state bytes into a llama_cpp.Llama and keep its first `keep` tokens: the next eval drops the
    KV cells past them (as `Llama.generate` and `Llama.eval` do for any shorter shared prefix)."""
    from llama_cpp import llama_cpp as C  # noqa: N812

    buf = (ctypes_ubyte() * len(payload)).from_buffer(payload)
    if int(C.llama_state_set_data(llm.ctx, buf, len(payload))) != len(payload):
        llm.n_tokens = 0  # the context may hold part of it: read everything again
        raise Damaged("llama.cpp did not accept the state")
    llm.input_ids[: len(tokens)] = tokens
    llm.n_tokens = keep


def ctypes_ubyte() -> Any:
    import ctypes

    return ctypes.c_uint8
