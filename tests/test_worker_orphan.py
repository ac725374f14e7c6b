"""A killed bench leaves no model worker behind: the worker notices its parent's death even in the middle
of a call (end-of-file on the socket is read only between calls)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent

PARENT = """
import sys
from moviemem.backbones.llamacpp_worker import Worker
Worker("sleeper", {"target": "worker_sleeper:Sleeper", "options": {"pid_file": sys.argv[1]}})
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.is_file() and "State:\tZ" in status.read_text())


def test_a_worker_busy_in_a_call_ends_soon_after_its_parent_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = int(pid_file.read_text())
        assert _alive(worker)  # busy in its init call, which sleeps for two minutes
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(worker), "the worker outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
