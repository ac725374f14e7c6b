"""Start-to-answer time of the quick commands, each in a fresh interpreter as a shell runs it.

Times `moviemem --help`, `--version`, `films`, `show FILM` and `search FILM QUERY` on a library:
the first call of each after the library was last written (it reads LanceDB and saves its
answer or the film's state) and then the median of `--repeat` later calls (answered from the saved
answers and the film's search packs, without importing LanceDB). Target: <= 1 s each.

    python bench/cli_start.py --library /path/to/library --film FILM [--query "..."] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "moviemem.cli", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", type=Path, required=True)
    ap.add_argument("--film", required=True)
    ap.add_argument("--query", default="why does he leave the house")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    lib = ["--library", str(args.library)]
    shutil.rmtree(args.library / "cache" / "catalog", ignore_errors=True)  # as after a write: nothing saved yet
    commands = {"--help": ["--help"], "--version": ["--version"], "films": ["films", *lib],
                "show": ["show", args.film, *lib], "search": ["search", args.film, args.query, "--k", "5", *lib]}
    result: dict[str, object] = {"library": str(args.library), "load_avg": round(os.getloadavg()[0], 2)}
    for name, cmd in commands.items():
        first = timed(cmd)
        later = statistics.median(timed(cmd) for _ in range(args.repeat))
        result[name] = {"first_s": round(first, 2), "later_median_s": round(later, 2)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"command start to answer on {args.library} (load average {result['load_avg']} on {os.cpu_count()} cores)")
        for name in commands:
            r = result[name]
            assert isinstance(r, dict)
            print(f"  {name:10s} first {r['first_s']:.2f} s, then median {r['later_median_s']:.2f} s")
    return result


if __name__ == "__main__":
    main()
