"""Build llama-cpp-python for the instruction sets this machine executes, and cache the wheel by how
it was built.

llama.cpp's default build compiles with -march=native, which trusts /proc/cpuinfo; a virtual machine
that lists AMX it cannot run then dies with SIGILL on the first tile instruction. Here every
instruction set is named explicitly (GGML_NATIVE=OFF), chosen from what `foundation/cpu.py` saw run,
and AMX is never built. The cache key covers the version, the CMake arguments, the compiler and the
Python tag; a wheel's record names the features it needs, and a wheel is only reused on a machine
that runs all of them (a home directory shared by machines of different CPUs is the case in point).

    python scripts/llama_build.py plan  [--level L] [--wheels DIR]   # key, then a cached wheel or nothing
    python scripts/llama_build.py build [--level L] [--wheels DIR]   # compile (minutes), record, print the wheel
    python scripts/llama_build.py show  [--level L]                  # the plan, and what the CPU lists but cannot run
    python scripts/llama_build.py cmake-args [--level L]             # CMAKE_ARGS for a pip install by hand

Levels: `best` (everything that runs here), `safe` (AVX2/FMA/F16C/BMI2: no AVX-512, no VNNI) and
`baseline` (SSE4.2 only), the fallbacks setup takes when a build fails its smoke test.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

VERSION = "0.3.36"
PACKAGE = f"llama-cpp-python=={VERSION}"
# feature -> the ggml CMake option that builds it
OPTION = {"sse42": "GGML_SSE42", "avx": "GGML_AVX", "avx2": "GGML_AVX2", "fma": "GGML_FMA", "f16c": "GGML_F16C",
          "bmi2": "GGML_BMI2", "avx_vnni": "GGML_AVX_VNNI", "avx512": "GGML_AVX512", "avx512vbmi": "GGML_AVX512_VBMI",
          "avx512vnni": "GGML_AVX512_VNNI", "avx512bf16": "GGML_AVX512_BF16"}
# what a feature's kernels assume besides itself
NEEDS = {"avx": {"sse42"}, "avx2": {"avx"}, "fma": {"avx"}, "f16c": {"avx"}, "avx_vnni": {"avx2"},
         "avx512": {"avx2", "fma", "f16c"}, "avx512vbmi": {"avx512"}, "avx512vnni": {"avx512"}, "avx512bf16": {"avx512"}}
LEVELS = {"best": set(OPTION), "safe": {"sse42", "avx", "avx2", "fma", "f16c", "bmi2"}, "baseline": {"sse42"}}
# never built, whatever the machine lists: a guest may list AMX and trap on it
ALWAYS_OFF = ["GGML_NATIVE", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_BACKEND_DL", "GGML_CPU_ALL_VARIANTS",
              "LLAVA_BUILD"]
# AMX tile instructions: a built library holding any of them is refused
FORBIDDEN = ("tilezero", "tileloadd", "tilestored", "ldtilecfg", "tdpbssd", "tdpbf16ps", "tilerelease")


def _cpu() -> object:
    """foundation/cpu.py, loaded by path: this script runs before moviemem is installed."""
    path = Path(__file__).resolve().parent.parent / "foundation" / "cpu.py"
    spec = importlib.util.spec_from_file_location("_moviemem_cpu", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Plan:
    level: str
    features: list[str]  # the instruction sets built, each of which this machine ran
    cmake_args: list[str]
    compiler: str
    python: str
    key: str

    @property
    def folder(self) -> str:
        return f"llama_cpp_python-{VERSION}-{self.level}-{self.key}"


def choose(level: str, runnable: frozenset[str]) -> list[str]:
    """The level's features that run here and whose prerequisites run here too."""
    chosen = {f for f in LEVELS[level] if f in runnable}
    changed = True
    while changed:
        changed = False
        for f in sorted(chosen):
            if not NEEDS.get(f, set()) <= chosen:
                chosen.discard(f)
                changed = True
    return sorted(chosen)


def compiler_version() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or "cc"
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.splitlines() or ["unknown"])[0].strip()


def make_plan(level: str, runnable: frozenset[str], compiler: str, extra: str = "") -> Plan:
    features = choose(level, runnable)
    args = [f"-D{o}=OFF" for o in ALWAYS_OFF]
    args += [f"-D{OPTION[f]}={'ON' if f in features else 'OFF'}" for f in sorted(OPTION)]
    args += extra.split()
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    identity = json.dumps({"version": VERSION, "cmake_args": args, "compiler": compiler, "python": python}, sort_keys=True)
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Plan(level, features, args, compiler, python, key)


def reusable(record: dict[str, object], plan: Plan, runnable: frozenset[str]) -> str | None:
    """Why a cached build cannot serve here, or None when it can."""
    if record.get("key") != plan.key:
        return f"it was built as {record.get('key')}, this machine's plan is {plan.key}"
    needs = {str(f) for f in record.get("features", [])}  # type: ignore[union-attr]
    missing = needs - runnable
    if missing:
        return f"it needs {', '.join(sorted(missing))}, which this machine does not run"
    return None


def cached_wheel(wheels: Path, plan: Plan, runnable: frozenset[str]) -> Path | None:
    """The cached wheel for this plan, if its record says it runs here."""
    folder = wheels / plan.folder
    try:
        record = json.loads((folder / "build.json").read_text())
    except (OSError, ValueError):
        return None
    if reusable(record, plan, runnable) is not None:
        return None
    found = sorted(folder.glob(f"llama_cpp_python-{VERSION}-*.whl"))
    return found[0] if found else None


def forbidden_instructions(wheel: Path) -> list[str]:
    """AMX instructions in the wheel's shared libraries (objdump; [] when objdump is missing)."""
    objdump = shutil.which("objdump")
    if not objdump:
        return []
    hits: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if ".so" not in Path(name).name:
                continue
            path = Path(zf.extract(name, tmp))
            text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True).stdout
            hits += [f"{Path(name).name}: {op}" for op in FORBIDDEN if f"\t{op}" in text or f" {op} " in text]
    return hits


def build(wheels: Path, plan: Plan) -> Path:
    """Compile into a scratch folder beside the cache, check, record, then move into place whole."""
    wheels.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{plan.folder}.", dir=wheels))
    log = wheels / f"{plan.folder}.log"
    env = dict(os.environ, CMAKE_ARGS=" ".join(plan.cmake_args), CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1),
               FORCE_CMAKE="1")
    started = time.time()
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-binary", "llama-cpp-python",
                               "--no-cache-dir", PACKAGE, "-w", str(scratch)], env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise SystemExit(f"llama_build: compiling {PACKAGE} failed; the end of {log}:\n{tail}")
    wheel = next(scratch.glob("*.whl"))
    bad = forbidden_instructions(wheel)
    if bad:
        shutil.rmtree(scratch, ignore_errors=True)
        raise SystemExit(f"llama_build: the build holds AMX instructions ({', '.join(bad[:3])}); it would not run on guests "
                         "that list AMX without running it")
    record = {**asdict(plan), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "build_s": round(time.time() - started),
              "wheel": wheel.name, "amx_checked": shutil.which("objdump") is not None}
    (scratch / "build.json").write_text(json.dumps(record, indent=1) + "\n")
    final = wheels / plan.folder
    if final.exists():  # a build with another record (or none) under this name: replaced whole
        shutil.rmtree(final)
    os.replace(scratch, final)
    return final / wheel.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["plan", "build", "show", "cmake-args"])
    parser.add_argument("--level", choices=sorted(LEVELS), default="best")
    parser.add_argument("--wheels", type=Path, default=Path(os.environ.get("MOVIEMEM_WHEELS",
                                                                           Path.home() / ".cache" / "moviemem" / "wheels")))
    args = parser.parse_args(argv)
    probe = _cpu().probe()  # type: ignore[attr-defined]
    if probe.note:
        print(f"llama_build: {probe.note}; building for no extra instruction set", file=sys.stderr)
    plan = make_plan(args.level, probe.runnable, compiler_version(), os.environ.get("CMAKE_ARGS", ""))
    if args.command == "cmake-args":
        print(" ".join(plan.cmake_args))
    elif args.command == "show":
        print(json.dumps({**asdict(plan), "listed_not_run": probe.failed}, indent=1))
    elif args.command == "plan":
        wheel = cached_wheel(args.wheels, plan, probe.runnable)
        print(f"{plan.key}|{wheel or ''}|{' '.join(plan.features)}")  # "|": a field may be empty
    else:
        print(build(args.wheels, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
