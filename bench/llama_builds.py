"""What portability costs: prompt reading and generation speed of llama.cpp builds, side by side.

    python bench/llama_builds.py --build portable= --build native=/tmp/native-site [--rounds 3] [--prompt-tokens 1100]

Each `--build NAME=DIR` is a llama-cpp-python installed with `pip install --target DIR` (empty DIR: the
one in this environment, which `make setup` built for the instruction sets this CPU runs). Every
measurement runs in a fresh child process with that build first on its path, the builds alternating
round by round so that a busy machine slows each alike; the `local` model (Qwen2.5-Coder-1.5B Q4_K_M)
reads the same real dialogue (../shared/media/sintel_en.srt) cold, then writes tokens one by one.
Prints the median of the rounds per build, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, {bench!r})
import llama_cpp
from throughput import transcript_text
from moviemem.foundation.hardware import default_threads
from moviemem.models import model_path

t = default_threads()
llm = llama_cpp.Llama(str(model_path("local")), n_ctx=4096, n_threads=t, n_threads_batch=t, verbose=False, flash_attn=True)
tokens = llm.tokenize(transcript_text(int({prompt} * 0.8)).encode())[:{prompt}]
start, cpu0 = time.perf_counter(), time.process_time(); llm.eval(tokens)
read, read_cpu = time.perf_counter() - start, time.process_time() - cpu0
start = time.perf_counter()
for i in range({gen}):
    llm.eval([tokens[i % len(tokens)]])
gen = time.perf_counter() - start
print(json.dumps({{"file": llama_cpp.__file__, "threads": t, "prompt_tokens": len(tokens),
                  "prompt_tok_s": len(tokens) / read, "prompt_tok_cpu_s": len(tokens) / read_cpu,
                  "gen_tok_s": {gen} / gen}}))
llm.close()
"""


def one(site: str, prompt: int, gen: int) -> dict[str, float]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    code = CHILD.format(bench=str(ROOT / "bench"), prompt=prompt, gen=gen)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"build at {site or 'this environment'} failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", required=True, help="NAME=DIR (empty DIR: this environment's build)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=1100)
    ap.add_argument("--gen-tokens", type=int, default=32)
    args = ap.parse_args()
    builds = dict(b.split("=", 1) for b in args.build)
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, site in builds.items():
            runs[name].append(one(site, args.prompt_tokens, args.gen_tokens))
    print(f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f}; {args.rounds} alternating rounds")
    print(f"{'build':>10} {'prompt tok/s: median (each round)':>44} {'per CPU-second':>15} {'gen tok/s':>10}")
    for name, rs in runs.items():
        reads = [r["prompt_tok_s"] for r in rs]
        cpu = [r["prompt_tok_cpu_s"] for r in rs]
        gens = [r["gen_tok_s"] for r in rs]
        each = ", ".join(f"{x:.1f}" for x in reads)
        print(f"{name:>10} {statistics.median(reads):>10.1f} ({each}){statistics.median(cpu):>15.1f}"
              f"{statistics.median(gens):>10.1f}")
    print("(tokens per CPU-second: the prompt's tokens over the CPU time the process spent reading them, which other"
          " work on the machine slows far less than the wall clock)")
    first = runs[next(iter(runs))][0]
    print(f"(local, {first['prompt_tokens']:.0f}-token prompt read cold, {first['threads']:.0f} threads, flash attention on)")


if __name__ == "__main__":
    main()
