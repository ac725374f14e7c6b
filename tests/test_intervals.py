"""Intervals that hold on few films and few items (issue 61 item 4): the degenerate cases.

A film-clustered interval below metrics.MIN_FILMS films is no number but "too few films (N)" (JSON: null bounds
and a reason); a paired difference has Newcombe's score interval, within [-100, +100]; a Wald interval that
degenerates is shown as Wilson. Cases: 0/n, n/n, two films of 2/3 each, all pairs discordant, n = 1.
"""

from __future__ import annotations

import json
import math
from itertools import product
from pathlib import Path

import pytest
from statsmodels.stats.proportion import proportion_confint

from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval import markdown as md
from moviemem.eval import metrics
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import jsonable
from moviemem.eval.report import write_report
from moviemem.eval.runner import run_bench

Z = 1.959963984540054


def _newcombe_by_hand(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 written out again, from statsmodels' Wilson intervals."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = proportion_confint(a + b, n, method="wilson")
    l2, u2 = proportion_confint(a + c, n, method="wilson")
    den = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    phi = 0.0 if den == 0 else (max(cross - n / 2, 0) if cross > 0 else cross) / math.sqrt(den)
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return low, high


@pytest.mark.parametrize("table", [(1, 1, 7, 12), (59, 6, 16, 80), (2, 5, 6, 1), (2, 4, 0, 0), (0, 3, 0, 0),
                                   (10, 0, 0, 10), (0, 0, 0, 4)])
def test_newcombe_interval_against_its_formula(table: tuple[int, int, int, int]) -> None:
    """Each branch of the correlation: positive and reduced by n/2 (59,6,16,80), positive but within n/2 (1,1,7,12:
    taken as 0), negative (2,5,6,1), an empty margin (2,4,0,0)."""
    low, high = metrics.newcombe_paired(*table)
    want = _newcombe_by_hand(*table)
    assert (low, high) == (pytest.approx(max(-1.0, want[0])), pytest.approx(min(1.0, want[1])))
    assert metrics.newcombe_paired(table[0], table[2], table[1], table[3]) == (pytest.approx(-high), pytest.approx(-low))


def test_newcombe_figures_of_two_small_tables() -> None:
    assert metrics.newcombe_paired(1, 1, 7, 12) == (pytest.approx(-0.50692, abs=1e-5), pytest.approx(-0.02556, abs=1e-5))
    assert metrics.newcombe_paired(59, 6, 16, 80) == (pytest.approx(-0.11862, abs=1e-5),
                                                      pytest.approx(-0.00463, abs=1e-5))


def test_no_paired_interval_leaves_plus_or_minus_100_where_wald_does() -> None:
    """Every table of up to 8 pairs: Newcombe's interval holds the difference and stays in [-1, 1]; Wald leaves it."""
    wald_out = 0
    for n in range(1, 9):
        for a, b, c in product(range(n + 1), repeat=3):
            d = n - a - b - c
            if d < 0:
                continue
            low, high = metrics.newcombe_paired(a, b, c, d)
            diff = (b - c) / n
            assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0, (a, b, c, d)
            w_low, w_high = metrics.paired_wald(b, c, n)
            wald_out += w_low < -1 or w_high > 1
    assert wald_out > 0


def test_the_issues_paired_difference_reads_within_100() -> None:
    """Six items, A right on all four B got wrong: Wald said +66.7 [+28.9, +104.4]."""
    a = [True] * 6
    b = [True, True, False, False, False, False]
    p = metrics.mcnemar(a, b)
    assert md.diff(p.diff, *metrics.paired_wald(4, 0, 6)) == "+66.7 [+28.9, +104.4]"
    assert md.diff(p.diff, p.ci_low, p.ci_high) == "+66.7 [+13.1, +90.3]"
    assert p.to_dict()["interval"] == "newcombe"  # the JSON says which interval it is


def test_all_pairs_discordant() -> None:
    """A right and B wrong on every item: Wald's se is 0 (1.0 ± 0.0); Newcombe's lower bound is below 1."""
    p = metrics.mcnemar([True] * 5, [False] * 5)
    assert p.diff == 1.0 and p.ci_high == 1.0 and 0 < p.ci_low < 0.7
    assert metrics.paired_wald(5, 0, 5) == (1.0, 1.0)
    q = metrics.mcnemar([False] * 5, [True] * 5)
    assert (q.ci_low, q.ci_high) == (pytest.approx(-p.ci_high), pytest.approx(-p.ci_low))


def test_zero_of_n_and_n_of_n() -> None:
    for k, n in ((0, 10), (10, 10)):
        e = metrics.wilson(k, n)
        assert metrics.wald_degenerate(k, n) and e.se == 0.0  # Wald: 0.0 ± 0.0 or 100.0 ± 0.0
        assert e.ci_high - e.ci_low == pytest.approx(0.2775, abs=1e-4)  # Wilson's [0, 27.8] / [72.2, 100]
        cell = md.wald(e.to_dict())
        assert cell.endswith("(Wilson)") and "± 0.0" not in cell
    assert md.wald(metrics.wilson(0, 10).to_dict()) == "0.0 [0.0, 27.8] (Wilson)"
    assert not metrics.wald_degenerate(50, 100) and md.wald(metrics.wilson(50, 100).to_dict()) == "50.0 ± 9.8"
    assert metrics.wald_degenerate(1, 8)  # 12.5 ± 22.9 reaches below 0


def test_two_films_of_two_thirds_each() -> None:
    """The issue's case: the CR1 interval is [66.7, 66.7] (both films score alike); below 5 films none is given."""
    correct = [True, True, False] * 2
    films = ["a"] * 3 + ["b"] * 3
    assert metrics.clustered_se(correct, films) == pytest.approx(0.0, abs=1e-12)  # what printed [66.7, 66.7]
    e = metrics.clustered_accuracy(correct, films)
    assert e.value == pytest.approx(2 / 3) and math.isnan(e.ci_low) and math.isnan(e.ci_high)
    assert e.reason == "too few films (2)" and md.ci(e.to_dict()) == "too few films (2)"
    line = json.loads(json.dumps(jsonable(e.to_dict()), allow_nan=False))
    assert (line["ci_low"], line["ci_high"], line["se"], line["reason"]) == (None, None, None, "too few films (2)")
    assert "reason" not in metrics.accuracy(correct).to_dict()  # an estimate with its interval reads as before
    five = metrics.clustered_accuracy(correct + [True, False, True, False], films + ["c", "c", "d", "e"])
    assert five.reason is None and 0 <= five.ci_low < five.ci_high <= 1


def test_one_item() -> None:
    right, wrong = metrics.accuracy([True]), metrics.accuracy([False])
    assert (right.ci_low, right.ci_high) == (pytest.approx(0.2065, abs=1e-4), 1.0)
    assert (wrong.ci_low, wrong.ci_high) == (0.0, pytest.approx(0.7935, abs=1e-4))
    assert md.wald(right.to_dict()) == "100.0 [20.7, 100.0] (Wilson)"
    assert metrics.clustered_accuracy([True], ["f"]).reason == "too few films (1)"
    p = metrics.mcnemar([True], [False])
    assert p.diff == 1.0 and (p.ci_low, p.ci_high) == (pytest.approx(-0.1221, abs=1e-4), 1.0)
    same = metrics.mcnemar([True], [True])
    assert same.diff == 0.0 and -1 <= same.ci_low < 0 < same.ci_high <= 1


def _run(path: Path) -> Path:
    """Two films of three items each: subtitles right on two of each film's three, closed-book on none."""
    rows = [(i + 1, {"id": f"q{i}", "film_id": f"f{i // 3}", "question": f"Q {i}?", "options": ["x", "y"],
                     "answer": "A"}) for i in range(6)]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        i = int(query.question.split()[1].rstrip("?"))
        reply = backbone.chat([user(query.question)], max_tokens=4)
        letter = "A" if policy == "subtitles" and i % 3 != 2 else "B"
        return Answer(choice=letter, text=letter, confidence=1.0, invalid=False, policy=policy, backbone=backbone.name,
                      evidence=[], usage=reply.usage, trace=[])

    run_bench(bench, ["closed-book", "subtitles"], [ScriptedBackbone(["x"], cycle=True)], path, answerer=answer)
    return path


def test_the_report_on_two_films_says_so(tmp_path: Path) -> None:
    report = write_report(_run(tmp_path / "run"), inspector=False)["report"].read_text()
    results = report.split("## Results", 1)[1].split("## Cost", 1)[0]
    assert results.count("too few films (2)") == 2 and "66.7, 66.7" not in results
    assert "± 0.0" not in results and "| 0.0 [0.0, 39.0] | 0.0 [0.0, 39.0] (Wilson) |" in results  # closed-book's 0/6
    paired = report.split("## Paired comparison with `closed-book`", 1)[1]
    assert "| subtitles | scripted | 6 | +66.7 [+13.1, +90.3] | 4 / 0 |" in paired and "104.4" not in paired
    assert "Newcombe" in paired
