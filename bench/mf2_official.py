"""The official MF² claim pairs of the ten dev films, run as released, reported per half beside the leaderboard.

    moviemem import-collection mf2 ../shared/datasets/mf2 --library L
    moviemem bench ../shared/datasets/dev/mf2_official_dev.csv --policies closed-book,subtitles,hybrid \\
        --backbones local --library L --out runs/official
    python bench/mf2_official.py runs/official

With the release's own protocol (issue 56; DIR is a copy of deep-spin/MF2, the library's cache kept
apart with --cache when the library is not yours to write):

    moviemem bench HALF.csv --protocol mf2:DIR:direct_free:first-occurrence --policies closed-book \\
        --backbones local --library L --out runs/protocol-HALF

Prints, for each policy and backbone in the run: pairwise accuracy (a pair is right when both of its
statements are judged right, each alone, as MF²'s protocol asks) with its 95% Wilson interval over all
its pairs and per half of the films (the dev set's fixed halves), with TPR (TRUE on the true statement),
TNR (FALSE on the false one) and the unparseable share of statements, as the release's notebook gives
them; the same per granularity (Single, Multi, Global) and per category; the median input tokens a pair
and the pairs not sent (a prompt longer than the model's context); the released protocol each policy
followed, where it followed one; then the published leaderboard (video + transcript, the whole
benchmark) for scale.
The 704 pairs of the other 43 films are the test split: never used here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from moviemem.eval import metrics, mf2_scores
from moviemem.eval.log import read_header, scored_log

HALVES = {"A": {"mf2-5", "mf2-6", "mf2-8", "mf2-11", "mf2-22"}, "B": {"mf2-29", "mf2-35", "mf2-48", "mf2-51", "mf2-54"}}
# published pairwise accuracy on the whole benchmark (video + transcript), from the dev set's README
LEADERBOARD = [("humans", 84.1), ("Gemini 2.5 Pro", 60.6), ("InternVL3-78B", 51.3), ("GPT-4o", 46.8),
               ("Qwen2.5-VL-72B", 45.9), ("MiMo-VL-7B", 38.6), ("InternVL3-8B", 36.9), ("Qwen2.5-VL-7B", 32.8),
               ("chance", 25.0)]


def _pct(e: metrics.Estimate) -> str:
    return "n/a" if not e.n else f"{100 * e.value:.1f} [{100 * e.ci_low:.1f}, {100 * e.ci_high:.1f}] (n={e.n})"


def _rates(s: metrics.ClaimScores) -> str:
    return (f"pairwise {_pct(s.pairwise)}; TPR {_share(s.tpr)}, TNR {_share(s.tnr)}, "
            f"unparseable {_share(s.unparseable)} of {s.unparseable.n} statements")


def _share(e: metrics.Estimate) -> str:
    return "n/a" if not e.n else f"{100 * e.value:.1f}%"


def _pairs(lines: list[dict[str, Any]]) -> metrics.ClaimScores:
    """MF²'s scores of some records (results.jsonl lines) from their verdicts on each pair's two statements."""
    verdicts = [mf2_scores.PairDetail.model_validate(ln.get("detail") or {}).verdicts for ln in lines]  # today's detail keys and older runs' on_true / on_false
    return metrics.claim_pairs([t for t, _ in verdicts], [f for _, f in verdicts])


def report(run_dir: Path) -> dict[str, dict[str, object]]:
    items, grid, unfit = scored_log(run_dir)
    protocols = read_header(run_dir).protocols or {}
    by_id = {it.id: it for it in items}
    out: dict[str, dict[str, object]] = {}
    for (policy, backbone), recs in sorted(grid.items()):
        its = [by_id[r.item_id] for r in recs]
        lines = [r.line() for r in recs]
        row: dict[str, object] = {"pairs": len(recs), "not_sent": unfit.get((policy, backbone), 0)}
        # the release's scores (an unparseable statement is wrong in every rate), over every pair and per half
        row["all"] = _pairs(lines)
        for half, films in HALVES.items():
            row[f"half {half}"] = _pairs([ln for ln, it in zip(lines, its) if it.film_id in films])
        verdicts = [mf2_scores.PairDetail.model_validate(r.detail).verdicts for r in recs]
        row["granularity"] = mf2_scores.by_group(its, verdicts, "granularity")
        row["category"] = mf2_scores.by_group(its, verdicts, "category")
        tokens = [r.usage.input_tokens for r in recs]
        row["median_input_tokens_a_pair"] = statistics.median(tokens) if tokens else None
        row["protocol"] = protocols.get(policy)
        out[f"{policy} / {backbone}"] = row
        print(f"\n## {policy} / {backbone}: {len(recs)} pairs answered, {row['not_sent']} not sent, "
              f"median {row['median_input_tokens_a_pair']} input tokens a pair")
        if row["protocol"]:
            p = row["protocol"]
            print(f"  protocol: {p['template']}, style {p['style']}, parser {p['parser']}, context {p['context']}, "  # type: ignore[index]
                  f"release {p['release']} (commit {p['commit'] or 'n/a'})")  # type: ignore[index]
        for key in ("all", "half A", "half B"):
            print(f"  {key:8s} {_rates(row[key])}")  # type: ignore[arg-type]
        for group in ("granularity", "category"):
            for name, scores in row[group].items():  # type: ignore[attr-defined]
                print(f"  {group} {name}: {_rates(scores)}")
    print("\nMF² leaderboard, pairwise % on the whole benchmark with video + transcript (published):")
    print("  " + ", ".join(f"{name} {acc}" for name, acc in LEADERBOARD))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    a = ap.parse_args()
    out = report(a.run_dir)
    if a.json:
        print(json.dumps(out, default=lambda o: o.to_dict() if hasattr(o, "to_dict") else str(o), indent=1))


if __name__ == "__main__":
    sys.exit(main())
