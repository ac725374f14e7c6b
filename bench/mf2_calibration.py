"""A calibrated verdict for the MF² protocol, recomputed offline from two runs' recorded P(TRUE) (issue 56, part 2).

The small reader's TRUE/FALSE is mostly its prior. Two corrections, both from numbers the runs already
hold, so the experiment makes no model call:
- contextual calibration (Zhao et al., ICML 2021): P(TRUE) of the statement divided by P(TRUE) of a
  content-free statement ("N/A") in the same prompt, P(FALSE) likewise; TRUE when the first is larger;
- context-aware decoding (Shi et al., 2023): log P(v | evidence, statement) * (1 + alpha) - alpha *
  log P(v | statement alone) for v in TRUE, FALSE; the statement alone is the closed-book pass
  (statement_only), paired with the context run by pair and statement; alpha 0.5, the paper's default.

Both runs come from `moviemem bench HALF.csv --protocol mf2:DIR --policies "closed-book[p_true=true]"` and
`... --policies "subtitles[p_true=true]"` (or hybrid): each statement's P(TRUE) and the content-free one
are trace steps of its answer. For each half of the dev films this prints the pairs and the TPR/TNR of the
parser's verdicts (as recorded) and of each recomputed one, and each against the parser's, paired by pair
(pairs only one gets right, exact McNemar p). Choose on half A, confirm on half B: a verdict that does not
raise pairwise accuracy on both halves is not a default.

    python bench/mf2_calibration.py CLOSED_BOOK_RUN CONTEXT_RUN [--alpha 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moviemem.eval import metrics
from moviemem.eval.log import scored_log
from moviemem.eval.records import ResultRecord
from moviemem.foundation.errors import MovieMemError

HALVES = {"A": {"mf2-5", "mf2-6", "mf2-8", "mf2-11", "mf2-22"}, "B": {"mf2-29", "mf2-35", "mf2-48", "mf2-51", "mf2-54"}}
ALPHA = 0.5  # Shi et al. (2023), context-aware decoding's default weight of the contrast
FLOOR = 1e-6  # a probability read as 0 (outside the top alternatives) is this small, so logs stay finite


@dataclass(frozen=True)
class Statement:
    """What one run recorded for one statement: the parser's verdict and the first token's P(TRUE)s."""

    verdict: bool | None
    p_true: float | None
    p_content_free: float | None


def statement(rec: ResultRecord, key: str) -> Statement:
    ans = rec.answers.get(key)
    if ans is None:
        return Statement(None, None, None)
    verdict = {"TRUE": True, "FALSE": False}.get(str(ans.choice or "").upper()) if not ans.invalid else None
    scores = [s.data for s in ans.trace if s.kind == "scores" and "p_true" in s.data]  # mf2-release's p_true step
    data = scores[-1] if scores else {}
    return Statement(verdict, data.get("p_true"), data.get("p_true_content_free"))


def calibrated(s: Statement, _: Statement) -> bool | None:
    """Contextual calibration: each verdict's probability divided by the content-free statement's."""
    if s.p_true is None or s.p_content_free is None:
        return None
    t = s.p_true / max(s.p_content_free, FLOOR)
    f = (1 - s.p_true) / max(1 - s.p_content_free, FLOOR)
    return t >= f


def contrasted(alpha: float) -> Callable[[Statement, Statement], bool | None]:
    """Context-aware decoding: the context run's log-probabilities contrasted with the closed-book run's."""

    def verdict(s: Statement, closed: Statement) -> bool | None:
        if s.p_true is None or closed.p_true is None:
            return None

        def score(p: float, q: float) -> float:
            return (1 + alpha) * math.log(max(p, FLOOR)) - alpha * math.log(max(q, FLOOR))

        return score(s.p_true, closed.p_true) >= score(1 - s.p_true, 1 - closed.p_true)

    return verdict


def raw(s: Statement, _: Statement) -> bool | None:
    """P(TRUE) of the context run alone, read at 0.5 (what the parser's verdict is, where the reply is one token)."""
    return None if s.p_true is None else s.p_true >= 0.5


def _pairs(closed_dir: Path, context_dir: Path) -> list[tuple[str, ResultRecord, ResultRecord]]:
    """(film, closed-book record, context record) of every pair both runs hold."""
    grids = []
    for d in (closed_dir, context_dir):
        items, grid, _ = scored_log(d)
        if len(grid) != 1:
            raise MovieMemError(f"{d} holds {len(grid)} configurations; give a run of one policy and backbone")
        grids.append(({it.id: it.film_id for it in items}, next(iter(grid.values()))))
    (_, closed), (films, context) = grids
    by_id = {r.item_id: r for r in closed}
    pairs = [(films[r.item_id], by_id[r.item_id], r) for r in context if r.item_id in by_id]
    if not pairs:
        raise MovieMemError(f"{closed_dir} and {context_dir} share no pair")
    return pairs


def compare(closed_dir: Path, context_dir: Path, alpha: float = ALPHA) -> dict[str, Any]:
    pairs = _pairs(closed_dir, context_dir)
    rules: dict[str, Callable[[Statement, Statement], bool | None]] = {
        "parser (as run)": lambda s, _: s.verdict, "P(TRUE) >= 0.5": raw, "contextual calibration": calibrated,
        f"context-aware decoding (alpha {alpha})": contrasted(alpha)}
    out: dict[str, Any] = {}
    for half, films in {"all": None, **HALVES}.items():
        chosen = [(c, x) for film, c, x in pairs if films is None or film in films]
        if not chosen:
            continue
        verdicts = {name: [(rule(statement(x, "true"), statement(c, "true")), rule(statement(x, "false"), statement(c, "false")))
                           for c, x in chosen] for name, rule in rules.items()}
        base = [t is True and f is False for t, f in verdicts["parser (as run)"]]
        row: dict[str, Any] = {}
        for name, vs in verdicts.items():
            scores = metrics.claim_pairs([t for t, _ in vs], [f for _, f in vs])
            right = [t is True and f is False for t, f in vs]
            gained = sum(r and not b for r, b in zip(right, base))
            lost = sum(b and not r for r, b in zip(right, base))
            row[name] = {"pairs": scores.pairs, "right": sum(right), "tpr": scores.tpr.value, "tnr": scores.tnr.value,
                         "unreadable": scores.unparseable.value, "gained": gained, "lost": lost,
                         "p": _mcnemar(gained, lost)}
        out[half] = row
    return out


def _mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p from the discordant counts."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def _print(out: dict[str, Any]) -> None:
    for half, row in out.items():
        print(f"\n## {half if half == 'all' else 'half ' + half}")
        for name, r in row.items():
            print(f"  {name:40s} {r['right']:3d} / {r['pairs']} pairs; TPR {100 * r['tpr']:.1f}%, TNR {100 * r['tnr']:.1f}%, "
                  f"unreadable {100 * r['unreadable']:.1f}%; vs the parser +{r['gained']} -{r['lost']} (p {r['p']:.3g})")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("closed_book_run", type=Path, help="a protocol run of closed-book[p_true=true] (statement_only)")
    ap.add_argument("context_run", type=Path, help="a protocol run of subtitles or hybrid with p_true=true")
    ap.add_argument("--alpha", type=float, default=ALPHA, help="context-aware decoding's weight (default 0.5)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not 0 <= a.alpha < math.inf:
        print(f"error: --alpha must be a finite number >= 0, not {a.alpha}", file=sys.stderr)
        return 2
    try:
        out = compare(a.closed_book_run, a.context_run, a.alpha)
    except MovieMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1)) if a.json else _print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
