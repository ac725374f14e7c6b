"""Answers on real films: retrieval recall and answer accuracy on the MF² dev set (issue 20).

Imports the dev set's films from their full MF² subtitles (text-only films) into a library, then
1. retrieval alone (no model): evidence recall and coverage at token budgets for the hybrid
   policy's retrieval and for moviemem 0.1's line-level retrieval (`hybrid-lines`);
2. answering with the offline `local` backbone: each policy over the MCQ and claim files,
   resumable run directories, then `moviemem report` (accuracy with intervals, paired tests
   against closed-book, evidence recall and outcomes, searches).

    python bench/real_films.py [--dev ../shared/datasets/dev] [--mf2 ../shared/datasets/mf2]
        [--library out/real-lib] [--out out/real-runs] [--policies hybrid,closed-book,archival]
        [--backbone local] [--formats mcq,claims] [--retrieval-only]

The dev set is for measuring, never for tuning to its items; nothing of it is written into the project.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from mf2_films import import_mf2_films  # beside this script

ROOT = Path(__file__).resolve().parent.parent
FILES = {"mcq": "mf2_dev_mcq.jsonl", "claims": "mf2_dev_claims.jsonl"}


def import_dev_films(lib, dev: Path, mf2: Path) -> list[str]:
    """The dev set's films, imported from their MF² transcripts (skipped when already there)."""
    wanted = sorted({json.loads(line)["film_id"] for f in FILES.values() for line in (dev / f).read_text().splitlines()
                     if line.strip()})
    secs = import_mf2_films(lib, mf2, wanted, synopses=True)
    if secs is not None:
        print(f"imported {len(wanted)} films in {secs:.1f} s")
    return wanted


def retrieval(lib, dev: Path, formats: list[str]) -> None:
    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.retrieval_eval import retrieval_eval

    budgets = [450, 750, 1000, 2000]  # 750: multiple choice read in two orders; 1,000: claims and open questions
    print("\n## Retrieval (no model): evidence recall / coverage at evidence-token budgets")
    for fmt in formats:
        res = retrieval_eval(lib, load_benchmark(dev / FILES[fmt]), ["hybrid-lines", "hybrid", "passages"], budgets)
        print(f"\n{fmt}: {res['items']} queries")
        print(f"{'retriever':14s} " + " ".join(f"{'@' + str(b):>13s}" for b in budgets) + "   MRR")
        for r in res["retrievers"]:
            cells = " ".join(f"{r['recall_at_budget'][str(b)]:.2f} / {r['coverage_at_budget'][str(b)]:.2f}" for b in budgets)
            print(f"{r['name']:14s} {cells}   {r['mrr']:.2f}")


def answering(lib, dev: Path, out: Path, formats: list[str], policies: list[str], backbone: str) -> None:
    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.log import read_log
    from moviemem.eval.report import write_report
    from moviemem.eval.run import RunLog
    from moviemem.eval.runner import run_bench

    for fmt in formats:
        run_dir = out / fmt
        started = time.perf_counter()
        res = run_bench(load_benchmark(dev / FILES[fmt], library=lib), policies, [backbone], run_dir, library=lib)
        print(f"\n## {fmt}: {res.answered} answered, {res.invalid} invalid in {time.perf_counter() - started:.0f} s "
              f"-> {run_dir}")
        write_report(run_dir, inspector=True)
        lat: dict[str, list[float]] = {}
        for rec in read_log(run_dir):
            lat.setdefault(rec.policy, []).append(rec.wall_s)
        for r in RunLog(run_dir).rows:
            acc = r.get("pairwise_accuracy") or r.get("accuracy") or {}
            ci = f"[{100 * acc.get('ci_low', 0):.1f}, {100 * acc.get('ci_high', 0):.1f}]" if acc else ""
            print(f"{r['policy']:28s} acc {100 * (acc.get('value') or 0):5.1f} {ci:14s} n={r['n']:3d} "
                  f"median input tokens {r['median_input_tokens']}  recall {r.get('evidence_recall')}  "
                  f"outcomes {r.get('outcomes')}  searched {r.get('searched_share')}  "
                  f"median wall {statistics.median(lat[r['policy']]):.1f} s")
        print(f"report: {run_dir / 'report.md'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", type=Path, default=ROOT.parent / "shared" / "datasets" / "dev")
    ap.add_argument("--mf2", type=Path, default=ROOT.parent / "shared" / "datasets" / "mf2")
    ap.add_argument("--library", type=Path, default=ROOT / "out" / "real-lib")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "real-runs")
    ap.add_argument("--policies", default="hybrid,closed-book,archival")
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--formats", default="mcq,claims")
    ap.add_argument("--retrieval-only", action="store_true")
    args = ap.parse_args()
    if not (args.dev / FILES["mcq"]).exists():
        print(f"the MF² dev set is not at {args.dev} (see ../shared/DATA.md); nothing to measure", file=sys.stderr)
        return 2
    from moviemem import Library

    lib = Library(args.library)
    import_dev_films(lib, args.dev, args.mf2)
    formats = [f for f in args.formats.split(",") if f]
    retrieval(lib, args.dev, formats)
    if not args.retrieval_only:
        answering(lib, args.dev, args.out, formats, [p for p in args.policies.split(",") if p], args.backbone)
    return 0


if __name__ == "__main__":
    sys.exit(main())
