"""Two processes racing for one film's lock: each started while the test holds the lock, so both read the
library first and then wait; released once both say they wait. Returns their exit codes and output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock


def race(held: FileLock, commands: list[tuple[str, list[str]]], waiting: str, logs_dir: Path) -> tuple[list[int], list[str]]:
    """Run each (name, moviemem arguments) with `held` held until every one's output says `waiting`; return the
    exit codes in start order and each one's output."""
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": os.pathsep.join(sys.path)}
    procs, logs = [], []
    for name, args in commands:
        log = logs_dir / f"{name}.log"
        with log.open("w") as out:
            procs.append(subprocess.Popen([sys.executable, "-c", "from moviemem.cli import main; main()", *args],
                                          stdout=out, stderr=subprocess.STDOUT, env=env))
        logs.append(log)
    try:
        deadline = time.monotonic() + 120
        while not all(waiting in p.read_text() for p in logs):
            assert time.monotonic() < deadline, [p.read_text() for p in logs]
            assert all(p.poll() is None for p in procs), [p.read_text() for p in logs]
            time.sleep(0.2)
    finally:
        held.release()
    codes = [p.wait(timeout=120) for p in procs]
    return codes, [p.read_text() for p in logs]
