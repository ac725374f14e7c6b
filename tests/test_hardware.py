"""Thread defaults from the hardware (issue 19): physical cores in the affinity mask, capped by a cgroup quota."""

from __future__ import annotations

from pathlib import Path

from moviemem.foundation.hardware import cgroup_cpu_limit, physical_cores


def _sys(root: Path, siblings: dict[int, str], cpu_max: str | None = None, v1: tuple[str, str] | None = None) -> Path:
    for cpu, text in siblings.items():
        d = root / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(text + "\n")
    if cpu_max is not None:
        (root / "fs" / "cgroup").mkdir(parents=True)
        (root / "fs" / "cgroup" / "cpu.max").write_text(cpu_max + "\n")
    if v1 is not None:
        (root / "fs" / "cgroup" / "cpu").mkdir(parents=True)
        (root / "fs" / "cgroup" / "cpu" / "cpu.cfs_quota_us").write_text(v1[0])
        (root / "fs" / "cgroup" / "cpu" / "cpu.cfs_period_us").write_text(v1[1])
    return root


def test_smt_siblings_count_once(tmp_path: Path) -> None:
    root = _sys(tmp_path, {0: "0,4", 1: "1,5", 2: "2,6", 3: "3,7", 4: "0,4", 5: "1,5", 6: "2,6", 7: "3,7"})
    assert physical_cores(set(range(8)), root) == 4
    assert physical_cores({0, 4}, root) == 1  # both siblings of one core
    assert physical_cores({0, 1}, root) == 2


def test_no_smt_means_every_cpu_is_a_core(tmp_path: Path) -> None:
    root = _sys(tmp_path, {0: "0", 1: "1"})
    assert physical_cores({0, 1}, root) == 2  # the old default, cpu_count // 2, gave 1 here
    assert physical_cores({0, 1}, tmp_path / "nothing") == 2  # no topology files: one core per CPU


def test_cgroup_quota_caps_the_cores(tmp_path: Path) -> None:
    root = _sys(tmp_path / "a", {i: str(i) for i in range(16)}, cpu_max="200000 100000")
    assert cgroup_cpu_limit(root) == 2.0 and physical_cores(set(range(16)), root) == 2
    root = _sys(tmp_path / "b", {i: str(i) for i in range(4)}, cpu_max="max 100000")
    assert cgroup_cpu_limit(root) is None and physical_cores(set(range(4)), root) == 4
    root = _sys(tmp_path / "c", {i: str(i) for i in range(8)}, v1=("150000", "100000"))
    assert physical_cores(set(range(8)), root) == 1  # 1.5 CPUs of quota: one thread, never more than the quota
    root = _sys(tmp_path / "d", {i: str(i) for i in range(8)}, v1=("-1", "100000"))
    assert cgroup_cpu_limit(root) is None
