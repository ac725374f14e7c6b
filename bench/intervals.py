"""The degenerate cases of issue 61 item 4, as report.md prints them, and the exact coverage of the paired intervals.

    python bench/intervals.py            # the cases (markdown tables)
    python bench/intervals.py --coverage # also the exact coverage of Wald and Newcombe on paired items

Cases: 0/n and n/n, two films of 2/3 each, every pair discordant, n = 1, the issue's six-item difference.
Coverage is exact, not simulated: every 2x2 table of n pairs weighed by its multinomial probability under the
cell probabilities given (both right, only A right, only B right, both wrong), counting the tables whose
interval holds the true difference.
"""

from __future__ import annotations

import argparse
import math
from itertools import product

from moviemem.eval import markdown as md
from moviemem.eval import metrics


def _proportions() -> list[list[str]]:
    rows = []
    for k, n in ((0, 10), (10, 10), (0, 1), (1, 1), (1, 2), (1, 8), (50, 100)):
        e = metrics.wilson(k, n)
        half = md.Z95 * e.se
        rows.append([f"{k}/{n}", f"{100 * e.value:.1f} ± {100 * half:.1f}", md.pct(e.to_dict()), md.wald(e.to_dict())])
    return rows


def _clustered() -> list[list[str]]:
    rows = []
    for label, correct, films in (
            ("2 films, 2/3 each", [True, True, False] * 2, ["a"] * 3 + ["b"] * 3),
            ("1 item", [True], ["a"]),
            ("4 films, 2/3 each", [True, True, False] * 4, [f for f in "abcd" for _ in range(3)]),
            ("5 films, 2/3 each but one 1/3", [True, True, False] * 4 + [True, False, False],
             [f for f in "abcde" for _ in range(3)])):
        se = metrics.clustered_se(correct, films)
        p = sum(correct) / len(correct)
        cr1 = "n/a" if math.isnan(se) else f"[{100 * max(0, p - md.Z95 * se):.1f}, {100 * min(1, p + md.Z95 * se):.1f}]"
        rows.append([label, cr1, md.ci(metrics.clustered_accuracy(correct, films).to_dict())])
    return rows


def _paired() -> list[list[str]]:
    rows = []
    for label, (n11, n10, n01, n00) in (("issue's six items: A right on B's four wrong", (2, 4, 0, 0)),
                                         ("all 5 pairs discordant, A right", (0, 5, 0, 0)),
                                         ("1 pair, A right, B wrong", (0, 1, 0, 0)),
                                         ("1 pair, both right", (1, 0, 0, 0)),
                                         ("20 pairs, 8 / 2 discordant", (5, 8, 2, 5))):
        n = n11 + n10 + n01 + n00
        d = (n10 - n01) / n
        rows.append([label, md.diff(d, *metrics.paired_wald(n10, n01, n)),
                     md.diff(d, *metrics.newcombe_paired(n11, n10, n01, n00))])
    return rows


def coverage(n: int, probs: tuple[float, float, float, float]) -> tuple[float, float]:
    """Exact coverage of the paired Wald and Newcombe 95% intervals for n pairs with these cell probabilities."""
    truth = probs[1] - probs[2]
    wald = newcombe = 0.0
    for n11, n10, n01 in product(range(n + 1), repeat=3):
        n00 = n - n11 - n10 - n01
        if n00 < 0:
            continue
        counts = (n11, n10, n01, n00)
        weight = math.factorial(n) / math.prod(math.factorial(c) for c in counts) * math.prod(
            p ** c for p, c in zip(probs, counts))
        low, high = metrics.paired_wald(n10, n01, n)
        wald += weight * (low - 1e-12 <= truth <= high + 1e-12)
        low, high = metrics.newcombe_paired(*counts)
        newcombe += weight * (low - 1e-12 <= truth <= high + 1e-12)
    return wald, newcombe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coverage", action="store_true", help="also the exact coverage of the paired intervals")
    args = ap.parse_args()
    print(md.table(["k/n", "Wald p ± z·se", "Wilson", "report's Wald (CHNB) column"], _proportions()))
    print()
    print(md.table(["films", "CR1 clustered 95% CI", "report's clustered column"], _clustered()))
    print()
    print(md.table(["paired items", "Wald difference", "Newcombe difference (report, compare)"], _paired()))
    if args.coverage:
        rows = []
        for n in (6, 20):
            for probs in ((0.25, 0.25, 0.25, 0.25), (0.5, 0.3, 0.1, 0.1), (0.7, 0.2, 0.05, 0.05), (0.1, 0.8, 0.0, 0.1)):
                w, c = coverage(n, probs)
                rows.append([n, " / ".join(f"{p:g}" for p in probs), f"{100 * w:.1f}", f"{100 * c:.1f}"])
        print()
        print(md.table(["pairs", "P(both, only A, only B, neither)", "Wald coverage %", "Newcombe coverage %"], rows))


if __name__ == "__main__":
    main()
