"""Accuracy, invalid rate, median input tokens and latency per policy on a synthetic film's mcq.jsonl.

    python bench/policy_accuracy.py LIBRARY_DIR SYNTH_DIR --film synth --backbone local \
        --policies closed-book,subtitles,socratic-clip,hybrid,graph --limit 12

The film must already be in the library (ingested from SYNTH_DIR/film.mp4 with its captions).
With --truth-events the synthetic truth's events and relations are committed as the film's
events stage first (so the graph policy can run without an events backbone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", type=Path)
    ap.add_argument("synth", type=Path)
    ap.add_argument("--film", default="synth")
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--policies", default="closed-book,subtitles,socratic-clip,archival,hybrid,graph")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--truth-events", action="store_true")
    args = ap.parse_args(argv)

    from moviemem import Library
    from moviemem.backbones import load

    lib = Library(args.library)
    if args.truth_events:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from events_rows import add_truth_events

        add_truth_events(lib, args.film, json.loads((args.synth / "truth.json").read_text()))
    film = lib.film(args.film)
    items = [json.loads(x) for x in (args.synth / "mcq.jsonl").read_text().splitlines() if x.strip()]
    if args.limit:
        items = items[: args.limit]
    backbone = load(args.backbone)
    table = {}
    for policy in args.policies.split(","):
        correct = invalid = 0
        tokens, latency = [], []
        for it in items:
            ans = film.ask(it["question"], it["options"], policy=policy, backbone=backbone)
            correct += ans.choice == it["answer"]
            invalid += ans.invalid
            tokens.append(ans.usage.input_tokens)
            latency.append(ans.usage.latency_s)
        row = {"n": len(items), "accuracy": round(correct / len(items), 3), "invalid_rate": round(invalid / len(items), 3),
               "median_input_tokens": statistics.median(tokens), "median_latency_s": round(statistics.median(latency), 2)}
        table[policy] = row
        print(policy, json.dumps(row), flush=True)
    return table


if __name__ == "__main__":
    main()
