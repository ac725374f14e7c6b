"""`--ray ADDRESS`: parse it, connect, and say what the cluster offers.

Addresses: `auto` (the cluster this machine belongs to, started with `ray start`), `local`
(a private cluster on this machine, on 127.0.0.1 only, gone when the command ends),
`ray://HOST:PORT` (Ray Client) or `HOST:PORT` (the head node's GCS address).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..foundation.errors import MovieMemError

ADDRESS_HELP = "auto, local, ray://HOST:PORT or HOST:PORT"
RAY_PIN = "ray==2.58.0"
_HOSTPORT = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$")
# Ray resolves 127.0.0.1 to the machine's routable address unless this is off; `local` stays on loopback
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def parse_address(address: str) -> str:
    """The address as Ray takes it; a one-line MovieMemError for anything else."""
    a = (address or "").strip()
    if a in ("auto", "local"):
        return a
    rest = a[len("ray://"):] if a.startswith("ray://") else a
    m = _HOSTPORT.match(rest)
    if m is None or not 0 < int(m.group(1)) < 65536:
        raise MovieMemError(f"bad --ray address {address!r}: use {ADDRESS_HELP}")
    return a


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MovieMemError(f"--ray needs the ray package: pip install '{RAY_PIN}'") from None
    return ray


@dataclass(frozen=True)
class Cluster:
    """Alive nodes and their resources (the biggest node bounds what one task may ask for)."""

    nodes: int
    cpus: float
    gpus: float
    max_node_cpus: float
    max_node_gpus: float
    node_cpus: tuple[float, ...] = ()

    def cpus_per_worker(self, workers: int) -> float:
        """The most CPUs each of `workers` actors can have with all of them placed at once
        (whole CPUs when there are enough, a share of one otherwise)."""
        if workers <= 0 or not self.node_cpus:
            return 1.0
        def fits(c: int) -> bool:
            return sum(int(n / c + 1e-9) for n in self.node_cpus) >= workers

        whole = [c for c in range(int(self.max_node_cpus), 0, -1) if fits(c)]
        return float(whole[0]) if whole else round(self.cpus / workers, 3)

    def line(self) -> str:
        gpus = f", {self.gpus:g} GPUs" if self.gpus else ""
        return f"Ray cluster: {self.nodes} node(s), {self.cpus:g} CPUs{gpus}"


def describe() -> Cluster:
    ray = import_ray()
    if not ray.is_initialized():
        raise MovieMemError("Ray is not initialised: connect first (ray.init or moviemem --ray ADDRESS)")
    alive = [n for n in ray.nodes() if n.get("Alive")]
    cpus = [float(n["Resources"].get("CPU", 0)) for n in alive]
    gpus = [float(n["Resources"].get("GPU", 0)) for n in alive]
    return Cluster(len(alive), sum(cpus), sum(gpus), max(cpus, default=0.0), max(gpus, default=0.0), tuple(cpus))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def connect(address: str, *, num_cpus: int | None = None) -> bool:
    """Connect to (or, for `local`, start) a cluster; True when this call initialised Ray.
    An already initialised Ray (a notebook, a test) is used as it is."""
    addr = parse_address(address)
    if addr == "local" and "ray" not in sys.modules:
        os.environ.setdefault(_LOOPBACK_ENV, "0")
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        if addr == "local":
            ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
        else:
            # worker output stays in the cluster's logs: stdout is for --json
            ray.init(address=addr, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError, OSError) as exc:
        raise MovieMemError(f"cannot reach the Ray cluster at {address}: {_first_line(exc)}") from None
    return True


@contextlib.contextmanager
def session(address: str) -> Iterator[Cluster]:
    """Connected for the `with` block; disconnects (and stops a `local` cluster) only if it connected."""
    started = connect(address)
    try:
        yield describe()
    finally:
        if started:
            import_ray().shutdown()


def fit(name: str, wanted: dict[str, Any], cluster: Cluster) -> tuple[dict[str, Any], str | None]:
    """Ray options for one task, shrunk to what the biggest node has (a task asking for more
    would wait forever); the note says what was shrunk. A GPU asked of a cluster with none is an error."""
    opts = dict(wanted)
    note = None
    gpus = float(opts.get("num_gpus", 0) or 0)
    if gpus and cluster.max_node_gpus <= 0:
        raise MovieMemError(f"stage {name} asks for {gpus:g} GPU but no node of the Ray cluster has one")
    if gpus > cluster.max_node_gpus:
        opts["num_gpus"] = cluster.max_node_gpus
        note = f"{name}: {gpus:g} GPUs asked, {cluster.max_node_gpus:g} on the biggest node"
    cpus = float(opts.get("num_cpus", 1))
    if cpus > cluster.max_node_cpus > 0:
        opts["num_cpus"] = cluster.max_node_cpus
        note = f"{name}: {cpus:g} CPUs asked, {cluster.max_node_cpus:g} on the biggest node"
    return opts, note


def cap_threads(cpus: float) -> int:
    """Inside a task: keep torch to the CPUs the task declared (a node runs several tasks)."""
    import torch

    n = max(1, int(cpus))
    torch.set_num_threads(n)
    return n
