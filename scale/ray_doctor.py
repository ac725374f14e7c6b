"""The doctor's checks on every node of a Ray cluster, and on each answering worker before it takes work:
a node whose llama.cpp build cannot run there fails once, by name, instead of once a task."""

from __future__ import annotations

import socket
from collections.abc import Sequence

from ..doctor.checks import Check, failures, run_checks
from ..foundation.config import Settings
from ..foundation.errors import MovieMemError
from .cluster import import_ray


def node_checks(only: Sequence[str] | None, settings: Settings | None = None,
                backbone: str = "local-small") -> tuple[str, list[Check]]:
    """(this node's host name, its findings): the body of a task pinned to one node."""
    return socket.gethostname(), run_checks(only, settings=settings, backbone=backbone)


def doctor_on_ray(only: Sequence[str] | None, settings: Settings | None = None,
                  backbone: str = "local-small") -> list[tuple[str, list[Check]]]:
    """Run the checks once on each alive node of the connected cluster."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(node_checks).options(num_cpus=0)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    handles = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
               .remote(only, settings, backbone) for n in alive]
    return list(ray.get(handles))


def local_backbones(specs: Sequence[str]) -> list[str]:
    """The specs among `specs` that run llama.cpp on the node itself."""
    return [s for s in specs if s.split(":", 1)[0] in ("local", "local-small", "llamacpp")]


def require_healthy(actor_reports: Sequence[tuple[str, int, list[Check]]]) -> None:
    """One error naming each worker (host, pid) whose checks failed, and the first failure's fix."""
    bad = [(host, pid, failures(checks)) for host, pid, checks in actor_reports if failures(checks)]
    if not bad:
        return
    host, pid, first = bad[0]
    c = first[0]
    more = f" (and {len(bad) - 1} more worker(s))" if len(bad) > 1 else ""
    raise MovieMemError(f"Ray worker on {host} (pid {pid}) failed its check {c.name}: {c.detail}"
                        + (f"; fix: {c.fix}" if c.fix else "") + more + "; no work was given to it")


def worker_checks(specs: Sequence[str]) -> list[Check]:
    """What an answering worker checks before its first item: each local backbone loads and writes a token."""
    found: list[Check] = []
    for spec in local_backbones(specs):
        found += run_checks(["llama"], backbone=spec)
    return found
