"""Which x86 instruction sets this machine can really execute, tried one by one in child processes.

A virtual machine may list a feature in /proc/cpuinfo that it cannot run: an Intel Xeon guest listed
`amx_tile` and died with SIGILL on llama.cpp's first AMX tile instruction. So a feature counts only
when it is listed *and* a tiny program executing one of its instructions exits normally. Building for
`-march=native` trusts the list; building from `runnable()` trusts the machine.

Stdlib only and free of package imports: `scripts/llama_build.py` loads this file by path before
moviemem is installed.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# feature -> (the /proc/cpuinfo flags it needs, one AT&T instruction that only that feature executes)
PROBES: dict[str, tuple[tuple[str, ...], str]] = {
    "sse42": (("sse4_2",), "crc32l %%eax, %%eax"),
    "avx": (("avx",), "vxorps %%ymm0, %%ymm0, %%ymm0"),
    "avx2": (("avx2",), "vpaddd %%ymm0, %%ymm0, %%ymm0"),
    "fma": (("fma",), "vfmadd231ps %%ymm0, %%ymm0, %%ymm0"),
    "f16c": (("f16c",), "vcvtph2ps %%xmm0, %%ymm0"),
    "bmi2": (("bmi2",), "pdep %%eax, %%eax, %%eax"),
    "avx_vnni": (("avx_vnni",), "%{vex%} vpdpbusd %%ymm0, %%ymm0, %%ymm0"),
    # llama.cpp's AVX512 option turns on F, CD, VL, DQ and BW together
    "avx512": (("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
               "vpaddb %%zmm0, %%zmm0, %%zmm0\\n\\tvplzcntd %%zmm0, %%zmm0\\n\\tvandps %%zmm0, %%zmm0, %%zmm0"
               "\\n\\tvpaddd %%ymm16, %%ymm16, %%ymm16"),
    "avx512vbmi": (("avx512vbmi",), "vpermb %%zmm0, %%zmm0, %%zmm0"),
    "avx512vnni": (("avx512_vnni",), "vpdpbusd %%zmm0, %%zmm0, %%zmm0"),
    "avx512bf16": (("avx512_bf16",), "vcvtne2ps2bf16 %%zmm0, %%zmm0, %%zmm0"),
    "amx": (("amx_tile",), "tilerelease"),
}

_PROGRAM = """#include <string.h>
int main(int argc, char **argv) {{
{cases}
  return 3;
}}
"""
_CASE = '  if (argc > 1 && strcmp(argv[1], "{name}") == 0) {{ __asm__ volatile("{asm}" ::: "memory"); return 0; }}'


@dataclass(frozen=True)
class Probe:
    """What the CPU lists, what it ran, and why a listed feature did not count."""

    listed: frozenset[str]
    runnable: frozenset[str]
    failed: dict[str, str]  # listed feature -> how its test program ended
    note: str = ""  # why nothing could be tried (no compiler, not x86-64)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The flags the first CPU lists."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def listed(flags: frozenset[str]) -> frozenset[str]:
    """The features whose every cpuinfo flag is present."""
    return frozenset(name for name, (need, _) in PROBES.items() if all(f in flags for f in need))


def _ending(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def probe(compiler: str | None = None, flags: frozenset[str] | None = None, timeout: float = 10.0) -> Probe:
    """Compile one program holding every feature's instruction, then run it once per listed feature."""
    have = listed(cpu_flags() if flags is None else flags)
    cc = compiler or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if os.uname().machine not in ("x86_64", "AMD64"):
        return Probe(have, frozenset(), {}, note=f"not x86-64 ({os.uname().machine}): nothing to probe")
    if not cc:
        return Probe(have, frozenset(), {}, note="no C compiler (cc) to build the probe")
    cases = "\n".join(_CASE.format(name=n, asm=asm) for n, (_, asm) in PROBES.items())
    with tempfile.TemporaryDirectory(prefix="moviemem-cpu-") as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(_PROGRAM.format(cases=cases))
        built = subprocess.run([cc, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
        if built.returncode != 0:
            last = (built.stderr.strip().splitlines() or ["?"])[-1]
            return Probe(have, frozenset(), {}, note=f"the probe did not compile with {cc}: {last}")
        ok: set[str] = set()
        failed: dict[str, str] = {}
        for name in sorted(have):
            try:
                code = subprocess.run([str(exe), name], capture_output=True, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                failed[name] = f"hung for {timeout:.0f} s"
                continue
            if code == 0:
                ok.add(name)
            else:
                failed[name] = _ending(code)
    return Probe(have, frozenset(ok), failed)


@functools.lru_cache(maxsize=1)
def runnable() -> frozenset[str]:
    """The features this machine lists and executes (cached for the process)."""
    return probe().runnable
