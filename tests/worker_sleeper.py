"""A stand-in backbone for the worker's init: it writes its process id and then sleeps, as a model reading a
long prompt would hold the worker (tests/test_worker_orphan.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path


class Sleeper:
    def __init__(self, pid_file: str, isolate: bool = False) -> None:
        Path(pid_file).write_text(str(os.getpid()))
        time.sleep(120)
