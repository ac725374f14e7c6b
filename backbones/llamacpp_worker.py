"""A local llama.cpp backbone hosted in a child process, so that a native crash costs one call, not the run.

llama.cpp is native code: an instruction the CPU cannot execute (SIGILL), a bad pointer (SIGSEGV) or an
abort takes the whole Python process with it, and a bench, an MCP server or a notebook dies with
"Illegal instruction" and nothing else. Here the model lives in `python -m moviemem.backbones.llamacpp_worker`,
which the parent talks to over a private socket pair with pickled calls (both ends are this package, so
pickle is trusted). When the child dies the parent reads end-of-file, asks the kernel how it ended and
raises `BackboneCrashed` with one line that names the backbone, the signal and `moviemem doctor`.

The parent never imports llama_cpp in this mode: a library built for instructions this machine lacks can
trap in its load-time initialisers, before any model is read.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from ..foundation.errors import BackboneCrashed, MovieMemError

# how a worker is started; tests put a program that dies on purpose in its place
COMMAND: tuple[str, ...] = (sys.executable, "-m", "moviemem.backbones.llamacpp_worker")
_SIGNALS: dict[int, str] = {signal.SIGILL: "an instruction this CPU cannot execute (SIGILL)", signal.SIGSEGV: "a memory fault (SIGSEGV)",
            signal.SIGABRT: "an abort in native code (SIGABRT)", signal.SIGBUS: "a bus error (SIGBUS)",
            signal.SIGKILL: "SIGKILL (the kernel's out-of-memory killer, or someone, ended it)",
            signal.SIGFPE: "an arithmetic fault (SIGFPE)"}


def ending(code: int | None) -> str:
    """How a child ended, in words."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"signal {-code}"
        return _SIGNALS.get(int(sig), sig.name)
    return f"exit status {code}"


class Worker:
    """One child process hosting one model. Calls are serialised: a llama.cpp context answers one at a time."""

    def __init__(self, label: str, init: dict[str, Any], command: Sequence[str] | None = None) -> None:
        self.label = label
        parent, child = socket.socketpair()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([*(command or COMMAND), str(child.fileno())], pass_fds=(child.fileno(),),
                                     stdin=subprocess.DEVNULL, env=env)
        child.close()
        self.conn = Connection(parent.detach())
        self.lock = threading.Lock()
        self.dead: str | None = None
        self.call("init", init)

    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """Run `method` in the child; raise BackboneCrashed if the child dies or (with a timeout) hangs."""
        with self.lock:
            if self.dead:
                raise BackboneCrashed(self.dead)
            try:
                self.conn.send((method, args))
                if timeout is not None and not self.conn.poll(timeout):
                    self._kill()
                    self.dead = (f"the local backbone {self.label} (llama.cpp) did not answer within {timeout:.0f} s "
                                 "and was stopped; run `moviemem doctor` to check the build")
                    raise BackboneCrashed(self.dead)
                status, value = self.conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError):
                self.dead = self._obituary()
                raise BackboneCrashed(self.dead) from None
        if status == "raise":
            raise value
        if status == "error":
            raise MovieMemError(value)
        return value

    def _obituary(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self.proc.returncode
        return (f"the local backbone {self.label} (llama.cpp) died with {ending(code)}; "
                "run `moviemem doctor` to check the build")

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)  # the child leaves when it reads end-of-file
        except subprocess.TimeoutExpired:
            self._kill()


_workers: dict[tuple[Any, ...], Worker] = {}
_workers_lock = threading.Lock()


def worker_for(key: tuple[Any, ...], label: str, init: dict[str, Any]) -> Worker:
    """The process's worker for a model and its settings, started on first use and after a crash."""
    with _workers_lock:
        found = _workers.get(key)
        if found is None or found.dead:
            if found is not None:
                found.close()
            found = _workers[key] = Worker(label, init)
        return found


@atexit.register
def close_all() -> None:
    with _workers_lock:
        for w in _workers.values():
            w.close()
        _workers.clear()


# ----------------------------------------------------------------------------- the child


ORPHAN_POLL_S = 1.0


def leave_with_parent(poll_s: float = ORPHAN_POLL_S) -> threading.Thread:
    """End this process soon after its parent dies, even mid-call: end-of-file on the socket is read only
    between calls, and a killed bench must not leave a model reading a 15k-token prompt for minutes.
    A thread watches for reparenting (llama.cpp's calls release the GIL, so it runs during one); the
    parent's death signal (prctl) is not used, as it fires when the *thread* that started the child ends."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    thread = threading.Thread(target=watch, name="leave-with-parent", daemon=True)
    thread.start()
    return thread


def serve(fd: int) -> None:
    """Answer the parent's calls until it closes the socket. Errors the user can act on go back as
    messages; anything native ends this process, which is the point."""
    sys.stdout = sys.stderr  # nothing of the model's may interleave with the parent's standard output
    leave_with_parent()
    conn = Connection(fd)
    backbone: Any = None
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if method == "init":  # the backbone's class by dotted path (the parent's own), held here in process
                module, _, name = args[0]["target"].partition(":")
                backbone = getattr(importlib.import_module(module), name)(**args[0]["options"], isolate=False)
                result: Any = None
            elif backbone is None:
                raise MovieMemError("the worker was not initialised")
            elif method == "send":  # (request, timeout, (film, state folder)): the parent's asking context
                reply = backbone.send_here(*args)
                result = (reply, backbone.last_perf)
            elif method == "prompt":
                result = backbone.prompt(*args)
            elif method == "n_ctx":
                result = backbone.n_ctx
            elif method == "load":
                started = time.perf_counter()
                backbone.model()
                result = time.perf_counter() - started
            else:
                raise MovieMemError(f"the worker has no call {method!r}")
        except Exception as exc:  # noqa: BLE001 - raised again in the parent, as it would have been in process
            try:
                conn.send(("raise", exc))
            except (pickle.PicklingError, TypeError, AttributeError):
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ok", result))


if __name__ == "__main__":
    serve(int(sys.argv[1]))
