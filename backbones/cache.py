"""ReplayCache: wraps any backbone and answers repeated requests from SQLite.

The key is a SHA-256 of the backbone's `model_id` and the normalised request (text,
media content hashes, tools, schema, max_tokens, temperature): reruns and rescoring cost
nothing, and credentials never enter the key or the database. The database uses WAL and
a busy timeout, so several processes (a benchmark's workers) can share one file.

Modes: off (pass through), read (serve hits, do not store), write (always call, store),
readwrite (serve hits, store misses), replay-only (serve hits, a miss is an error).

The key holds `model_id`, not the spec: one model served under two specs shares its replies. The other side of
that is a backbone whose model changed while its `model_id` did not, which would answer with the old model's
replies; so the cache records which specs each `model_id` answered for and warns, once a process, when a second
spec appears (docs/backbones.md: change `model_id` when the model changes).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

from tenacity import retry, retry_if_exception, stop_after_delay, wait_random_exponential

from ..foundation.config import CacheMode
from ..foundation.errors import MovieMemError
from .base import Backbone, Wrapper
from .retry import redact
from .settings import get_backbone_settings
from .types import Reply, Request

log = logging.getLogger(__name__)
MODES: tuple[str, ...] = get_args(CacheMode)
KEY_VERSION = 1
DB_NAME = "replies.sqlite"


class ReplayMiss(MovieMemError):
    """replay-only mode met a request it has no reply for."""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0


def request_key(model_id: str, request: Request) -> str:
    payload = {"v": KEY_VERSION, "model": model_id, "request": request.fingerprint()}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _db_path(path: str | Path | None) -> Path:
    base = Path(path).expanduser() if path else get_backbone_settings().cache_path
    return base if base.suffix in (".sqlite", ".db") else base / DB_NAME


@retry(retry=retry_if_exception(lambda e: isinstance(e, sqlite3.OperationalError) and "locked" in str(e)),
       stop=stop_after_delay(60), wait=wait_random_exponential(multiplier=0.02, max=1.0), reraise=True)
def _set_up(conn: sqlite3.Connection) -> None:
    """Pragmas and schema of a new connection. Switching a file that another process is creating
    to WAL fails at once with "database is locked" (SQLite does not wait on its busy handler for
    it), so two processes opening one new cache together retry here rather than fail."""
    conn.execute("PRAGMA busy_timeout=60000")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model_id TEXT NOT NULL,"
                 " reply TEXT NOT NULL, created REAL NOT NULL)")
    conn.execute("CREATE TABLE IF NOT EXISTS specs (model_id TEXT NOT NULL, spec TEXT NOT NULL, first_seen REAL NOT NULL,"
                 " PRIMARY KEY (model_id, spec))")


class ReplayCache(Wrapper):
    """A Backbone that answers from its cache first. `stats` counts hits, misses and writes."""

    def __init__(self, backbone: Backbone, path: str | Path | None = None, mode: CacheMode | str | None = None):
        mode = mode or get_backbone_settings().cache_mode
        if mode not in MODES:
            raise MovieMemError(f"unknown cache mode {mode!r}; use one of {', '.join(MODES)}")
        super().__init__(backbone)
        self.mode = mode
        self.path = _db_path(path)
        self.stats = CacheStats()
        self._stats_lock = threading.Lock()
        self._local = threading.local()
        self.warning: str | None = None  # set when this model_id answered for another spec before (`_check_spec`)
        if mode != "off":
            try:  # create the schema now: a bad path fails at load, not mid-run
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn()
                self._check_spec()
            except (OSError, sqlite3.Error) as exc:
                raise MovieMemError(f"cannot keep a replay cache at {self.path}: {exc}") from None

    def _check_spec(self) -> None:
        """Record the spec this model_id answers for; warn when it answered for another (its model may differ)."""
        spec = redact(str(self.name), self.secrets())
        conn = self._conn()
        conn.execute("INSERT OR IGNORE INTO specs (model_id, spec, first_seen) VALUES (?, ?, ?)",
                     (self.model_id, spec, time.time()))
        others = [r[0] for r in conn.execute("SELECT spec FROM specs WHERE model_id = ? AND spec != ? ORDER BY first_seen",
                                             (self.model_id, spec))]
        if others:
            self.warning = (f"replay cache {self.path}: model_id {self.model_id!r} answered for {others[0]!r} before and "
                            f"now for {spec!r}; replies stored for one are served to the other. If the model changed, "
                            "give it its own model_id (docs/backbones.md)")
            log.warning("%s", self.warning)

    def __repr__(self) -> str:
        return f"<ReplayCache {self.name} mode={self.mode} {self.path}>"

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            _set_up(conn)
            self._local.conn = conn
        return conn

    def key(self, request: Request) -> str:
        return request_key(self.model_id, request)

    def get(self, key: str) -> Reply | None:
        row = self._conn().execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return replace(Reply.from_dict(json.loads(row[0])), cached=True)

    def put(self, key: str, reply: Reply) -> None:
        data = reply.to_dict()
        data.pop("cached", None)
        data.pop("transient", None)
        # a server that echoes the key (or a URL with credentials) must not leave it on disk
        stored = redact(json.dumps(data, ensure_ascii=False), self.secrets())
        self._conn().execute("INSERT OR REPLACE INTO replies (key, model_id, reply, created) VALUES (?, ?, ?, ?)",
                             (key, self.model_id, stored, time.time()))

    def _count(self, field: str) -> None:
        with self._stats_lock:
            setattr(self.stats, field, getattr(self.stats, field) + 1)

    def send(self, request: Request) -> Reply:
        if self.mode == "off":
            return self.inner.send(request)
        key = self.key(request)
        if self.mode in ("read", "readwrite", "replay-only"):
            hit = self.get(key)
            if hit is not None:
                self._count("hits")
                return hit
            self._count("misses")
            if self.mode == "replay-only":
                raise ReplayMiss(f"replay cache {self.path} has no reply for this request to {self.model_id} "
                                 f"(key {key[:12]}); rerun with cache mode readwrite to fill it")
        reply = self.inner.send(request)
        if self.mode in ("write", "readwrite") and not reply.transient:
            self.put(key, reply)
            self._count("writes")
        return reply

    def entries(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def report(self) -> dict[str, Any]:
        """Hit counts for run logs: this process's hits, misses, writes, and entries stored."""
        total = self.stats.hits + self.stats.misses
        return {"path": str(self.path), "mode": self.mode, "model_id": self.model_id, "hits": self.stats.hits,
                "misses": self.stats.misses, "writes": self.stats.writes,
                "hit_rate": round(self.stats.hits / total, 4) if total else None,
                "entries": self.entries() if self.mode != "off" else None}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
