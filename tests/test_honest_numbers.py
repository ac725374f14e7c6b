"""Honest numbers (issue 18, items 11 and 12): replies that echo, hedge or name several letters are
invalid; the share of fallback-parsed answers is reported; proportions carry Wilson intervals."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from moviemem.agents.parsing import parse_answer
from moviemem.agents.types import Answer, Question, Step
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval import metrics
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.report import write_report
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench

Q = Question.make("Which colour is the car?", ["red", "blue", "green", "gold"])


@pytest.mark.parametrize("reply", [
    "A. red\nB. blue\nC. green\nD. gold\n\nThe answer is D. gold",  # an echo of the options, then a choice
    "A) red\nB) blue",  # an echo alone
    "A or B",  # a hedge
    "Either B or C, I cannot tell.",
    "The answer is B. Option C is also possible.",  # several letters named
    "B, C",
])
def test_echoes_hedges_and_several_letters_are_invalid(reply: str) -> None:
    got = parse_answer(reply, Q)
    assert got.invalid and got.choice is None, (reply, got.choice)
    assert "several" in (got.error or "")


@pytest.mark.parametrize("reply, want", [
    ("The answer is D.", "D"), ("D", "D"), ("(B)", "B"), ("B) blue, because the paint is dark", "B"),
    ("Gold.", "D"), ('{"answer": "C"}', "C"), ("A red car is parked; the answer is C", "C"),
])
def test_unambiguous_replies_still_read(reply: str, want: str) -> None:
    got = parse_answer(reply, Q)
    assert not got.invalid and got.choice == want, reply


def _bench(n: int) -> Benchmark:
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Q{i}?", "options": ["a", "b"], "answer": "A"})
            for i in range(n)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl")


def _answer(how_of):
    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        how = how_of(query.question, policy)
        return Answer(choice="A", text="a", confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                      usage=reply.usage, trace=[Step("parse", {"choice": "A", "invalid": False, "how": how})])
    return answer


def test_share_of_fallback_parsed_answers_per_configuration(tmp_path: Path) -> None:
    how = lambda q, p: "fallback" if p == "loose" and q in ("Q0?", "Q1?", "Q2?") else "json"  # noqa: E731
    run_bench(_bench(4), ["strict", "loose"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run",
              answerer=_answer(how))
    rows = {r["policy"]: r for r in RunLog(tmp_path / "run").rows}
    assert rows["loose"]["fallback_parsed"]["value"] == 0.75 and rows["strict"]["fallback_parsed"]["value"] == 0.0
    md = write_report(tmp_path / "run", inspector=False)["report"].read_text()
    assert "fallback-parsed %" in md and "| 75.0 [" in md


def test_wilson_interval_against_its_formula() -> None:
    z = 1.959963984540054
    for k, n in [(0, 10), (7, 10), (10, 10), (1, 3)]:
        e = metrics.wilson(k, n)
        p = k / n
        mid = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        assert (e.ci_low, e.ci_high) == (pytest.approx(max(0, mid - half)), pytest.approx(min(1, mid + half)))
    zero = metrics.accuracy([False] * 10)
    assert zero.ci_low == 0.0 and zero.ci_high > 0.25  # Wald would say 0.0-0.0
    small = metrics.accuracy([True, False])
    assert 0 < small.ci_low and small.ci_high < 1  # Wald would say [0, 100]
    assert small.se == pytest.approx(math.sqrt(0.25 / 2))  # the Wald se is kept for CHNB-style tables


def test_report_shows_wilson_and_a_labelled_wald_column(tmp_path: Path) -> None:
    run_bench(_bench(2), ["p"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run",
              answerer=_answer(lambda q, p: "json"))
    md = write_report(tmp_path / "run", inspector=False)["report"].read_text()
    assert "95% Wilson intervals" in md and "accuracy ± (Wald, CHNB)" in md
    # 2/2: Wald's 100.0 ± 0.0 is degenerate, so its column gives the Wilson interval, marked (issue 61)
    assert "| 100.0 [34.2, 100.0] | 100.0 [34.2, 100.0] (Wilson) |" in md and "± 0.0" not in md
