"""What the evidence citations of a run come to, per configuration and per group of films (issue 61, item 5).

    python bench/citations.py RUN_DIR [--group A=mf2-5,mf2-6 --group B=mf2-29,...] [--json]

For each (policy, backbone) and group: answers, the share that cite some evidence, cited within gold (the
share of cited spans that overlap an item's gold span, pooled over the group's answers; the report's
"cited %" is the mean of each item's share) beside what a uniform pick among the blocks each citing answer was
shown would have hit (the chance level), answers read by the JSON fallback, and the follow-up's cost
per answer that made one (tokens billed, tokens read: billed less the prefix the model reused, seconds; a
call replayed from the cache keeps the seconds it first took). Reads the run's results.jsonl; calls no model.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def _groups(specs: list[str]) -> dict[str, set[str]]:
    out = {}
    for spec in specs:
        name, _, films = spec.partition("=")
        if not name or not films:
            raise SystemExit(f"error: --group wants NAME=FILM,FILM, not {spec!r}")
        out[name] = set(films.split(","))
    return out


def figures(run_dir: Path, groups: dict[str, set[str]]) -> list[dict[str, Any]]:
    from moviemem.eval.evidence import overlaps
    from moviemem.eval.log import log_grid

    items, grid = log_grid(run_dir)
    gold = {it.id: [tuple(map(float, g)) for g in getattr(it, "evidence", None) or []] for it in items}
    rows = []
    for (policy, backbone), recs in sorted(grid.items()):
        for name, films in {"all": None, **groups}.items():
            answers = [(r.item_id, a) for r in recs if films is None or r.film_id in films for a in r.answers.values()
                       if not a.invalid]
            cited = [(i, e.span) for i, a in answers for e in a.evidence if e.cited and e.span is not None]
            within = [any(overlaps(s, g) for g in gold[i]) for i, s in cited if gold[i]]
            # chance: each cited span as a uniform pick among the blocks its answer was shown (their share within gold)
            chance = [sum(e.cited for e in a.evidence if e.span)
                      * statistics.mean(any(overlaps(e.span, g) for g in gold[i]) for e in a.evidence if e.span)
                      for i, a in answers if gold[i] and any(e.span for e in a.evidence)]
            steps = [[s.data for s in a.trace if s.kind == "cite" and "read_tokens" in s.data] for _, a in answers]
            cost = [(sum(d["input_tokens"] for d in st), sum(d["read_tokens"] for d in st),
                     sum(d["latency_s"] for d in st)) for st in steps if st]
            fallback = sum(bool([s for s in a.trace if s.kind == "parse"][-1:][0].data.get("reader_fallback"))
                           for _, a in answers if any(s.kind == "parse" for s in a.trace))
            answer_in = [a.usage.input_tokens for _, a in answers]
            rows.append({
                "policy": policy, "backbone": backbone, "group": name, "answers": len(answers),
                "citing": sum(any(e.cited for e in a.evidence) for _, a in answers),
                "cited_spans": len(within), "cited_within_gold": sum(within), "json_fallback": fallback,
                "within_gold_by_chance": round(sum(chance), 1),
                "followed_up": len(cost),
                "follow_up_input_tokens_mean": round(statistics.mean(c[0] for c in cost), 1) if cost else None,
                "follow_up_read_tokens_median": statistics.median(c[1] for c in cost) if cost else None,
                "follow_up_read_tokens_mean": round(statistics.mean(c[1] for c in cost), 1) if cost else None,
                "follow_up_s_median": round(statistics.median(c[2] for c in cost), 3) if cost else None,
                "follow_up_s_mean": round(statistics.mean(c[2] for c in cost), 3) if cost else None,
                "answer_input_tokens_median": statistics.median(answer_in) if answer_in else None,
                "answer_s_median": round(statistics.median(a.usage.latency_s or 0 for _, a in answers), 2)
                if answers else None})
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--group", action="append", default=[], help="NAME=FILM,FILM (repeatable)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not (args.run_dir / "results.jsonl").is_file():
        raise SystemExit(f"error: {args.run_dir} holds no results.jsonl")
    rows = figures(args.run_dir, _groups(args.group))
    if args.json:
        print(json.dumps(rows, indent=1))
        return rows
    for r in rows:
        share = f"{r['citing']}/{r['answers']}"
        gold = f"{r['cited_within_gold']}/{r['cited_spans']}"
        print(f"{r['policy']} / {r['backbone']} [{r['group']}]: citing {share}, cited within gold {gold} "
              f"(a uniform pick among the blocks shown: {r['within_gold_by_chance']}), "
              f"JSON fallback {r['json_fallback']}, follow-up per answer: {r['follow_up_input_tokens_mean']} tokens "
              f"billed, {r['follow_up_read_tokens_mean']} read (median {r['follow_up_read_tokens_median']}), "
              f"{r['follow_up_s_mean']} s (median {r['follow_up_s_median']}); answer median "
              f"{r['answer_input_tokens_median']} input tokens, {r['answer_s_median']} s")
    return rows


if __name__ == "__main__":
    main()
