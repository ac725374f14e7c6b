"""Is this machine ready to run moviemem? One check a concern, each with the one line that fixes it.

Run by `moviemem doctor` (a person, a script with --json), by `make setup` after installing (the
llama.cpp check proves the build runs on this CPU), and by each Ray answering worker before it takes
work, so that a bad node fails once, loudly, not once a task.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..foundation.config import Settings, get_settings
from ..foundation.cpu import probe
from ..foundation.errors import MovieMemError

MIN_FREE_BYTES = 2 << 30  # an import of a film collection with its search packs; models are counted apart
# loading SmolLM2-135M and writing a token takes about 2 s here, the default Qwen2.5-Coder-1.5B 6-30 s (30 with
# the two cores shared); a hang is far past this
LOAD_TIMEOUT_S = 180.0
BUILD_RECORD = "moviemem-llama-build.json"  # written into the environment by scripts/setup.sh
DEFAULT_BACKBONE = "local"  # the bundled offline model `ask` uses when none is named: the llama check always loads it


@dataclass(frozen=True)
class Check:
    """One finding: `ok` False is a failure (exit 2), None a check that could not run here (said why)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def _tool(name: str, command: str, fix: str) -> Check:
    path = shutil.which(command)
    if path is None:
        return Check(name, False, f"`{command}` is not on PATH", fix)
    try:
        done = subprocess.run([path, "-version" if command.startswith("ff") else "--version"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"{path} does not run: {exc}", fix)
    first = ((done.stdout or done.stderr).strip().splitlines() or ["?"])[0]
    return Check(name, done.returncode == 0, f"{path}: {first[:80]}", "" if done.returncode == 0 else fix)


def check_ffmpeg() -> Check:
    return _tool("ffmpeg", "ffmpeg", "apt-get install ffmpeg (make setup installs it)")


def check_tesseract() -> Check:
    return _tool("tesseract", "tesseract", "apt-get install tesseract-ocr tesseract-ocr-eng (make setup installs them)")


def check_models(settings: Settings, verify: bool = False) -> list[Check]:
    """Each offline model in place and its file the one its SHA-256 names: hashed once, then trusted while
    the file's stamp (size, times, inode) is the one recorded after that hash (re-hashed with `verify`);
    an optional one that is not prepared is said, not failed."""
    from ..models.offline import identity, status

    out = []
    for item in status(settings):
        name = str(item["name"])
        if not item["ready"] and not item["default"]:
            out.append(Check(f"model {name}", None, "optional, not prepared", f"moviemem models prepare {name}"))
            continue
        if not item["ready"]:
            out.append(Check(f"model {name}", False, f"not prepared under {item['path']}", f"moviemem models prepare {name}"))
            continue
        started = time.perf_counter()
        try:
            how = identity(name, settings, rehash=verify)
        except MovieMemError as exc:
            out.append(Check(f"model {name}", False, str(exc), f"moviemem models prepare {name} --verify"))
            continue
        said = ("its SHA-256 checked, unchanged since (size, times, inode)" if how == "stamp"
                else f"{how}: matches its SHA-256 ({time.perf_counter() - started:.1f} s)")
        out.append(Check(f"model {name}", True, said))
    return out


def check_cpu() -> Check:
    """The instruction sets this CPU lists and runs; a listed one it cannot run is named (a guest with AMX)."""
    p = probe()
    if p.note:
        return Check("cpu", None, p.note)
    odd = "; lists but cannot run: " + ", ".join(f"{k} ({v})" for k, v in sorted(p.failed.items())) if p.failed else ""
    return Check("cpu", True, "runs " + " ".join(sorted(p.runnable)) + odd)


def check_llama_build(runnable: frozenset[str] | None = None) -> Check:
    """What the installed llama-cpp-python was built for (setup's record), against what this CPU runs."""
    record_path = Path(sys.prefix) / BUILD_RECORD
    if not record_path.is_file():
        return Check("llama.cpp build", None, f"no build record at {record_path} (installed without make setup)")
    try:
        record = json.loads(record_path.read_text())
    except ValueError:
        record = None
    features = record.get("features", []) if isinstance(record, dict) else None
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):  # a string would count letters
        return Check("llama.cpp build", False, f"{record_path} is damaged (not a JSON object with a list of features)",
                     "make setup")
    needs = set(features)
    runs = probe().runnable if runnable is None else runnable
    missing = needs - runs
    what = f"{record.get('level')} build {record.get('key')}: " + (" ".join(sorted(needs)) or "no extra instruction set")
    if missing:
        return Check("llama.cpp build", False, f"{what}; this CPU does not run {' '.join(sorted(missing))}",
                     "make setup (it rebuilds llama-cpp-python for this CPU)")
    return Check("llama.cpp build", True, what)


def check_llama_runs(spec: str = "local-small", timeout: float = LOAD_TIMEOUT_S) -> Check:
    """Load a local model in a child process and write one token: a crash or hang is reported, not suffered."""
    from ..backbones import load
    from ..backbones.llamacpp_backend import LlamaCppBackbone

    fix = "make setup (it rebuilds llama-cpp-python for this CPU), then moviemem doctor"
    try:
        backbone = load(spec)
    except MovieMemError as exc:
        return Check(f"llama.cpp runs ({spec})", False, str(exc), "moviemem models prepare; pip install 'moviemem[llama]'")
    if not isinstance(backbone, LlamaCppBackbone):
        return Check(f"llama.cpp runs ({spec})", None, f"{spec} is not a llama.cpp model")
    try:
        seconds = backbone.load_check(timeout)
    except MovieMemError as exc:
        return Check(f"llama.cpp runs ({spec})", False, str(exc), fix)
    return Check(f"llama.cpp runs ({spec})", True, f"loaded and wrote a token in a child process in {seconds:.1f} s")


def check_disk(settings: Settings) -> Check:
    where = settings.library_dir
    probe_at = next((p for p in (where, *where.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe_at).free
    detail = f"{free / 2**30:.1f} GiB free at {probe_at}"
    if free < MIN_FREE_BYTES:
        return Check("disk", False, detail + f" (under {MIN_FREE_BYTES >> 30} GiB)", "free space, or set MOVIEMEM_LIBRARY to a larger disk")
    return Check("disk", True, detail)


def check_library(settings: Settings) -> Check:
    """The library opens and lists its films (a library not made yet is fine: ingest makes it)."""
    where = settings.library_dir
    if not where.exists():
        return Check("library", True, f"{where} does not exist yet (the first ingest makes it)")
    try:
        from ..memory.store import MemoryStore

        films = MemoryStore(str(where)).film_rows()
    except (MovieMemError, OSError, ValueError) as exc:
        return Check("library", False, f"{where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                     "check the folder's permissions, or set MOVIEMEM_LIBRARY")
    return Check("library", True, f"{where}: {len(films)} film(s)")


CHECKS: dict[str, str] = {"tools": "ffmpeg and tesseract", "models": "the offline weights", "cpu": "instruction sets",
                          "llama": "the llama.cpp build and one token", "disk": "free space", "library": "the library opens",
                          "speed": "the local models' reading and writing speeds, for bench --plan's wall time"}


def run_checks(only: Sequence[str] | None = None, *, settings: Settings | None = None, verify: bool = False,
               backbone: str = "local-small", on_check: Callable[[Check], None] | None = None) -> list[Check]:
    """The checks named in `only` (default: all), in a fixed order."""
    settings = settings or get_settings()
    wanted = list(only or CHECKS)
    unknown = [w for w in wanted if w not in CHECKS]
    if unknown:
        raise MovieMemError(f"unknown check {unknown[0]!r}; use one of {', '.join(CHECKS)}")
    steps: list[Callable[[], list[Check]]] = []
    if "tools" in wanted:
        steps.append(lambda: [check_ffmpeg(), check_tesseract()])
    if "models" in wanted:
        steps.append(lambda: check_models(settings, verify))
    if "cpu" in wanted:
        steps.append(lambda: [check_cpu()])
    if "llama" in wanted:
        # the default backbone always (a broken `local` must fail here, not at the first question), and the named one
        steps.append(lambda: [check_llama_build(), *(check_llama_runs(b) for b in dict.fromkeys((DEFAULT_BACKBONE, backbone)))])
    if "speed" in wanted:  # issue 61: timed here, so the plan has a wall time before the first real call
        from .speed import measure_speed

        steps.append(lambda: [Check(f"llama.cpp speed ({b})", *measure_speed(b)) for b in dict.fromkeys((DEFAULT_BACKBONE, backbone))])
    if "disk" in wanted:
        steps.append(lambda: [check_disk(settings)])
    if "library" in wanted:
        steps.append(lambda: [check_library(settings)])
    found: list[Check] = []
    for step in steps:
        for c in step():
            found.append(c)
            if on_check is not None:
                on_check(c)
    return found


def failures(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.ok is False]


def as_json(checks: Sequence[Check], seconds: float) -> dict[str, object]:
    return {"ok": not failures(checks), "seconds": round(seconds, 1), "checks": [asdict(c) for c in checks]}


def timed(fn: Callable[[], list[Check]]) -> tuple[list[Check], float]:
    started = time.perf_counter()
    return fn(), time.perf_counter() - started
