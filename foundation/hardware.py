"""How many cores this process may really use, for thread defaults.

`os.cpu_count()` counts logical CPUs of the whole machine. What a compute-bound engine (llama.cpp,
CTranslate2, ONNX Runtime) should start is the number of physical cores it is allowed to run on:
the CPUs in its affinity mask, with SMT siblings counted once (two threads on one core's siblings
gain little and slow each other), capped by a cgroup CPU quota (a container limited to 2 CPUs on a
64-core host must not start 32 threads). Halving `cpu_count()`, the old default, gave one thread on
a 2-core machine without SMT: half the machine's speed.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

SYS = Path("/sys")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpu_list(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def cgroup_cpu_limit(root: Path = SYS) -> float | None:
    """CPUs allowed by the cgroup quota (v2 `cpu.max`, else v1 cfs quota/period), or None when unlimited."""
    v2 = _read(root / "fs" / "cgroup" / "cpu.max")
    if v2:
        quota, _, period = v2.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota_s = _read(root / "fs" / "cgroup" / "cpu" / "cpu.cfs_quota_us")
    period_s = _read(root / "fs" / "cgroup" / "cpu" / "cpu.cfs_period_us")
    if quota_s and period_s and int(quota_s) > 0 and int(period_s) > 0:
        return int(quota_s) / int(period_s)
    return None


def physical_cores(cpus: set[int] | None = None, root: Path = SYS) -> int:
    """Physical cores among `cpus` (default: this process's affinity), capped by the cgroup quota."""
    if cpus is None:
        cpus = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cores: set[frozenset[int]] = set()
    for cpu in cpus:
        siblings = _read(root / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list")
        cores.add(frozenset(_cpu_list(siblings) & cpus) if siblings else frozenset({cpu}))
    n = max(1, len(cores))
    limit = cgroup_cpu_limit(root)
    return max(1, min(n, math.floor(limit))) if limit else n


@lru_cache(maxsize=1)
def default_threads() -> int:
    """Threads for one compute-bound engine running alone in this process."""
    return physical_cores()


def threads_for(share: int = 1) -> int:
    """Threads for one of `share` engines running side by side: the cores divided, never oversubscribed."""
    return max(1, default_threads() // max(1, share))
