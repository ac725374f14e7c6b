"""Peak memory of `moviemem compare` and `moviemem report` on a large results.jsonl.

Writes two synthetic MCQ run directories (run.json, items.jsonl, results.jsonl; each answer carries
evidence spans with text and a trace, as a real policy's do) of about --mb megabytes each in a temporary
folder, then runs `compare` and `report --no-inspector` (and, with --inspector, `report` with the
inspector) each in a fresh process and prints that process's peak RSS. No model and no library: the
records are written directly. Run it against another checkout (main, say) with --root, a folder holding
the package as `moviemem`.

    python -m moviemem.bench.log_memory --mb 50
    python bench/log_memory.py --mb 50 --root /tmp/main-root    # the same figures for another checkout
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import resource, sys
from pathlib import Path
what, a, b = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
from moviemem.eval.compare import Side, compare
from moviemem.eval.report import write_report
if what == "compare":
    compare(Side(a), Side(b))
elif what != "imports only":
    write_report(a, inspector=what == "report+inspector")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _record(i: int, policy: str, rng: random.Random, spans: int) -> dict[str, object]:
    film = f"f{i % 20}"
    right = rng.random() < 0.6
    evidence = [{"kind": "utterance", "start": float(s * 7), "end": float(s * 7 + 5), "score": rng.random(),
                 "text": " ".join(rng.choice(("the", "key", "attic", "Anna", "door", "night", "rain", "said"))
                                  for _ in range(60)), "cited": s == 0} for s in range(spans)]
    trace = [{"kind": "retrieve", "query": f"where is the key {i}", "n": spans},
             {"kind": "prompt", "ref": "mcq@v3", "chars": 9000},
             {"kind": "parse", "how": "json", "invalid": False}]
    usage = {"input_tokens": 2000 + i % 500, "output_tokens": 5, "latency_s": 0.5}
    answer = {"choice": "A" if right else "B", "text": "A" if right else "B", "policy": policy, "backbone": "s",
              "evidence": evidence, "trace": trace, "usage": usage, "calls": 1}
    return {"log_version": 2, "key": f"{policy}\ts\tq{i}", "policy": policy, "backbone": "s", "item_id": f"q{i}",
            "film_id": film, "format": "mcq", "category": "plot", "status": "answered", "correct": right,
            "detail": {"pred": "A" if right else "B"}, "answers": {"answer": answer}, "usage": usage,
            "spend": {"calls": 1}, "wall_s": 0.6}


def write_run(run: Path, megabytes: float, seed: int, spans: int = 12) -> int:
    """A run directory of about `megabytes` of results; returns its item count."""
    run.mkdir(parents=True)
    rng = random.Random(seed)
    size = len(json.dumps(_record(0, "p", rng, spans))) + 1
    n = max(1, int(megabytes * 1e6 / size))
    (run / "run.json").write_text(json.dumps({"log_version": 2, "format": "mcq", "policies": ["p"], "backbones": ["s"]}))
    with (run / "items.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i}", "film_id": f"f{i % 20}", "question": f"Where is the key {i}?",
                                "options": ["Attic", "Cellar", "Inn", "Shop"], "answer": "A", "category": "plot"}) + "\n")
    with (run / "results.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps(_record(i, "p", rng, spans)) + "\n")
    return n


def peak_mb(what: str, a: Path, b: Path, root: str | None) -> int:
    env = dict(os.environ)
    if root:
        env["PYTHONPATH"] = root
    out = subprocess.run([sys.executable, "-c", PROBE, what, str(a), str(b)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{what} failed: {out.stderr.strip().splitlines()[-1]}")
    return int(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=30, help="size of each results.jsonl in MB (default 30)")
    ap.add_argument("--root", help="PYTHONPATH for the measured processes (a folder holding `moviemem`)")
    ap.add_argument("--inspector", action="store_true", help="also measure report with its HTML inspector")
    args = ap.parse_args()
    if not args.mb > 0:
        raise SystemExit("--mb must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        n = write_run(a, args.mb, seed=1)
        write_run(b, args.mb, seed=2)
        size = (a / "results.jsonl").stat().st_size / 1e6
        print(f"{n} records, results.jsonl {size:.1f} MB each")
        for what in ("imports only", "compare", "report", *(["report+inspector"] if args.inspector else [])):
            print(f"{what}: peak RSS {peak_mb(what, a, b, args.root)} MB")


if __name__ == "__main__":
    main()
