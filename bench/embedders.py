"""Two text embedders compared on the dev set's gold evidence, per half, paired by query (issue 56).

Each library holds the ten dev films imported with one embedder (the embedder is recorded with the
rows, and queries are embedded with the same one):

    python bench/real_films.py --library L1 --retrieval-only                          # minilm, the default
    MOVIEMEM_EMBEDDER=mpnet python bench/real_films.py --library L2 --retrieval-only  # all-mpnet-base-v2
    python bench/embedders.py --library minilm=L1 --library mpnet=L2 [--budgets 500,1000,2000]

For the default retriever (hybrid) it prints, per file, half and where the gold evidence lies (one span,
two or more): recall and coverage at each budget and the MRR of each library, then the paired change at
the middle budget (queries whose recall rose / fell, mean change with a paired bootstrap interval and
p-value). A claim pair's two claims are two queries. The dev set is read for measuring only.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from mf2_official import HALVES  # the dev set's fixed halves (beside this script)

from moviemem import Library
from moviemem.eval import evidence as ev
from moviemem.eval.formats import load_benchmark
from moviemem.eval.metrics import paired_bootstrap
from moviemem.eval.retrieval_eval import Probe, films_of, probes, score_probe
from moviemem.retrievers.registry import DEFAULT, get_retriever

ROOT = Path(__file__).resolve().parent.parent
FILES = ("mf2_dev_mcq.jsonl", "mf2_dev_claims.jsonl")


@dataclasses.dataclass(frozen=True)
class Scores:
    """One query's retrieval under one library."""

    recall: dict[int, float]
    coverage: dict[int, float]
    rr: float


def score_all(library: Path, items: Sequence[Probe], budgets: Sequence[int]) -> dict[str, Scores]:
    retriever = get_retriever(DEFAULT)
    films = films_of(Library(library), items)
    out: dict[str, Scores] = {}
    for p in items:
        film, lines = films[p.film_id]
        row = score_probe(film, lines, p, retriever, budgets)
        out[p.item_id] = Scores({b: float(row["recall_at_budget"][str(b)] or 0.0) for b in budgets},
                                {b: float(row["coverage_at_budget"][str(b)] or 0.0) for b in budgets}, float(row["rr"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", action="append", required=True, help="NAME=PATH, twice: the baseline first")
    ap.add_argument("--dev", type=Path, default=ROOT.parent / "shared" / "datasets" / "dev")
    ap.add_argument("--budgets", default="500,1000,2000")
    args = ap.parse_args()
    libs = dict(s.split("=", 1) for s in args.library)
    if len(libs) != 2:
        ap.error("name exactly two libraries: --library NAME=PATH --library NAME=PATH")
    budgets = [int(b) for b in args.budgets.split(",")]
    mid = budgets[len(budgets) // 2]
    (base, base_path), (new, new_path) = libs.items()
    for name in FILES:
        items = probes(load_benchmark(args.dev / name))
        scored = {base: score_all(Path(base_path), items, budgets), new: score_all(Path(new_path), items, budgets)}
        print(f"\n## {name}: {DEFAULT} retrieval, recall / coverage at {', '.join(map(str, budgets))} tokens; MRR")
        print(f"| half | spans | n | embedder | {' | '.join(f'@{b}' for b in budgets)} | MRR |")
        print("|---|---|---|---|" + "---|" * len(budgets) + "---|")
        for half, films in HALVES.items():
            for spans, keep in (("one", lambda p: len(p.gold) == 1), ("2+", lambda p: len(p.gold) > 1),
                                ("all", lambda p: True)):
                group = [p for p in items if p.film_id in films and keep(p)]
                if not group:
                    continue
                for emb in (base, new):
                    s = [scored[emb][p.item_id] for p in group]
                    cells = " | ".join(f"{ev.mean([x.recall[b] for x in s]):.3f} / {ev.mean([x.coverage[b] for x in s]):.3f}"
                                       for b in budgets)
                    print(f"| {half} | {spans} | {len(group)} | {emb} | {cells} | {ev.mean([x.rr for x in s]):.3f} |")
        print(f"\nPaired by query, recall at {mid} tokens ({new} against {base}):")
        for half, films in HALVES.items():
            group = [p for p in items if p.film_id in films]
            a = [scored[new][p.item_id].recall[mid] for p in group]
            b = [scored[base][p.item_id].recall[mid] for p in group]
            up = sum(x > y for x, y in zip(a, b))
            down = sum(x < y for x, y in zip(a, b))
            d = paired_bootstrap(a, b)
            print(f"- half {half}: {len(group)} queries, {up} rose, {down} fell; mean change {d.diff:+.3f} "
                  f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}], p {d.p_value:.2f}")


if __name__ == "__main__":
    main()
