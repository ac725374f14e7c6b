"""Where the evidence of a multi-place item is missed: each gold span's rank, whole query and parts.

For every dev item whose gold evidence lies in two or more spans (issue 47), the hybrid policy's
retrieval ranks the film's evidence for the whole question, and again for each part of it on its
own: each option of a multiple-choice question, each side of a claim that joins two events by
order or cause ('A before B', 'A because B'). A gold span not shown within the budget is missed;
the script prints, per half of the dev films, how many spans are missed and where each part's own
query ranks them (first 5, first 20, later, not among the candidates). A missed span that no
part of the question finds either lies in lines that never name what the question asks (an event
seen, not said, in a text-only film): no reordering of this retrieval can show it.

    python bench/missed_spans.py --library L [--dev ../shared/datasets/dev] [--budget 1000] [--items]

L: a library holding the dev films (`python bench/real_films.py --library L --retrieval-only`).
Reads the dev set for measuring only; prints no item's text unless --items is given.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from pathlib import Path

from mf2_official import HALVES  # the dev set's fixed halves (beside this script)

from moviemem import Library
from moviemem.agents.readers.claims import joined_parts
from moviemem.eval import evidence as ev
from moviemem.eval.formats import load_benchmark
from moviemem.eval.retrieval_eval import Probe, films_of, probes
from moviemem.retrievers.registry import get_retriever

ROOT = Path(__file__).resolve().parent.parent
FILES = ("mf2_dev_mcq.jsonl", "mf2_dev_claims.jsonl")


def parts(probe: Probe) -> list[str]:
    q = probe.question
    if q.kind == "mcq":
        return list(q.options)
    joined = joined_parts(q.text)
    return list(joined) if joined else []


def bucket(rank: int | None) -> str:
    return "none" if rank is None else "1-5" if rank <= 5 else "6-20" if rank <= 20 else ">20"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", type=Path, required=True)
    ap.add_argument("--dev", type=Path, default=ROOT.parent / "shared" / "datasets" / "dev")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--items", action="store_true", help="also print each missed span's item and ranks")
    args = ap.parse_args()
    lib = Library(args.library)
    retriever = get_retriever("hybrid")
    for name in FILES:
        counts: dict[str, Counter[str]] = {h: Counter() for h in HALVES}
        # a false claim has its true twin's gold: counted once
        several = [p for p in probes(load_benchmark(args.dev / name))
                   if len(p.gold) >= 2 and not p.item_id.endswith(":false")]
        films = films_of(lib, several)
        for probe in several:
            half = next(h for h, ids in HALVES.items() if probe.film_id in ids)
            film, lines = films[probe.film_id]
            ranked = retriever.retrieve(film, probe.question, lines=lines)
            shown = [(e.start, e.end) for e in retriever.pack(ranked, args.budget, lines)]
            spans = [(e.start, e.end) for e in ranked]
            part_spans = [[(e.start, e.end) for e in retriever.retrieve(
                film, dataclasses.replace(probe.question, text=p, options=(), kind="claim"), lines=lines)]
                for p in parts(probe)]
            for gold in probe.gold:
                counts[half]["spans"] += 1
                if any(ev.overlaps(s, gold) for s in shown):
                    continue
                whole = ev.first_hit(spans, [gold])
                ranks = [r for r in (ev.first_hit(ps, [gold]) for ps in part_spans) if r is not None]
                best = min(ranks) if ranks else None
                counts[half]["missed"] += 1
                counts[half][f"whole {bucket(whole)}"] += 1
                counts[half]["no parts" if not part_spans else f"parts {bucket(best)}"] += 1
                if args.items:
                    print(f"  {half} {probe.item_id} gold {gold}: whole query rank {whole}, best part rank {best}")
        for half, c in counts.items():
            keys = ("whole 6-20", "whole >20", "whole none", "parts 1-5", "parts 6-20", "parts >20", "parts none",
                    "no parts")
            print(f"{name} half {half}: {c['missed']} of {c['spans']} gold spans missed at {args.budget} tokens; "
                  + ", ".join(f"{k} {c[k]}" for k in keys if c[k]))


if __name__ == "__main__":
    main()
