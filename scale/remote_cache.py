"""The replay cache shared by Ray workers through one actor.

The cache is SQLite in WAL mode: safe for processes on one machine, not across machines,
because WAL coordinates readers and writers through shared memory (SQLite's documentation:
WAL does not work over a network filesystem). So on a cluster one actor, pinned to the
driver's node, owns the database file, and every worker reads and writes through it. Keys and
stored replies are those of backbones/cache.py, so serial runs and Ray runs share one cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backbones.base import Backbone
from ..backbones.cache import MODES, ReplayCache
from ..backbones.types import Capabilities, Reply
from ..foundation.errors import MovieMemError
from .cluster import import_ray


@dataclass
class _Keyed:
    """Stands for a backbone inside the server: the cache only needs its model id."""

    model_id: str
    name: str = "cache-server"
    capabilities: Capabilities = field(default_factory=Capabilities)


class CacheServer:
    """Ray actor body: one ReplayCache database file, read and written on behalf of workers."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._caches: dict[str, ReplayCache] = {}

    def _cache(self, model_id: str) -> ReplayCache:
        if model_id not in self._caches:
            self._caches[model_id] = ReplayCache(_Keyed(model_id), self.path, "readwrite")  # type: ignore[arg-type]  # the cache reads only the model id of its backbone
        return self._caches[model_id]

    def get(self, key: str) -> dict[str, Any] | None:
        reply = self._cache("").get(key)
        return None if reply is None else reply.to_dict()

    def put(self, key: str, model_id: str, data: dict[str, Any]) -> None:
        self._cache(model_id).put(key, Reply.from_dict(data))

    def entries(self) -> int:
        return self._cache("").entries()

    def where(self) -> str:
        return str(self._cache("").path)


def start_server(path: str | Path) -> Any:
    """The cache actor, on this (the driver's) node, where `path` is a local directory or file."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = ray.remote(CacheServer).options(
        num_cpus=0, max_restarts=3, max_task_retries=3,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
    ).remote(str(path))
    ray.get(actor.where.remote())  # a bad path fails now, not mid-run
    return actor


class RemoteCache(ReplayCache):
    """A ReplayCache whose database lives behind a CacheServer actor (same keys, same modes)."""

    def __init__(self, backbone: Backbone, server: Any, mode: str) -> None:
        if mode not in MODES:
            raise MovieMemError(f"unknown cache mode {mode!r}; use one of {', '.join(MODES)}")
        super().__init__(backbone, Path("ray-cache-server"), "off")  # "off": touches no local file
        self.mode = mode
        self.server = server
        self.path = Path(f"ray-actor:{import_ray().get(server.where.remote())}")

    def get(self, key: str) -> Reply | None:
        data = import_ray().get(self.server.get.remote(key))
        return None if data is None else replace(Reply.from_dict(data), cached=True)

    def put(self, key: str, reply: Reply) -> None:
        data = reply.to_dict()
        data.pop("cached", None)
        data.pop("transient", None)
        import_ray().get(self.server.put.remote(key, self.model_id, data))

    def entries(self) -> int:
        return int(import_ray().get(self.server.entries.remote()))

    def close(self) -> None:
        """Nothing local to close: the server owns the database."""
