"""The LLM judge: rubric scores per criterion, failed calls recorded, repeats and agreement, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.judge import RUBRICS, judge_run, judge_summary
from moviemem.eval.log import JUDGE, read_judgements
from moviemem.eval.report import write_report
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError


def _answerer(film_id, query, policy, backbone):
    reply = backbone.chat([user(query.question)], max_tokens=4)
    bad = policy == "p2" and "Q2" in query.question
    return Answer(choice=None, text="" if bad else f"{policy} says because", confidence=None, invalid=bad,
                  policy=policy, backbone=backbone.name, usage=reply.usage, error="empty" if bad else None)


@pytest.fixture
def open_run(tmp_path: Path) -> Path:
    rows = [(i + 1, {"id": f"o{i}", "film_id": "f", "question": f"Q{i}: why?", "reference": f"Because {i}."})
            for i in range(3)]
    bench = Benchmark("open", validate_rows(rows, "open", "o.jsonl"), "o.jsonl")
    run_bench(bench, ["p1", "p2"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run", answerer=_answerer)
    return tmp_path / "run"


def _grader(request):
    text = request.messages[-1].text
    if "Q1" in text and "p2 says" in text:
        return "I cannot grade this."  # not JSON: a failed judge call
    base = 4 if "p1 says" in text else 2
    bump = 1 if "Grading pass 2" in text and "Q0" in text else 0
    return json.dumps({c: base + bump for c in RUBRICS["open"]})


def test_judge_scores_failures_repeats_and_resume(open_run: Path):
    judge = ScriptedBackbone(_grader, name="grader")
    counts = judge_run(open_run, judge, repeats=2)
    # p1: 3 answered, p2: 2 answered (Q2 invalid, not judged); 2 repeats each
    assert counts == {"judged": 8, "failed": 2, "skipped_invalid": 1}
    rows = read_judgements(open_run)
    assert len(rows) == 10
    failed = [r for r in rows if r["failed"]]
    assert {r["item_id"] for r in failed} == {"o1"} and all("not JSON" in r["error"] for r in failed)
    summary = {r["policy"]: r for r in judge_summary(open_run)}
    p1 = summary["p1"]
    # items o0 (4 and 5 -> 4.5), o1 (4), o2 (4): mean 4.1667
    assert p1["criteria"]["accuracy"]["value"] == pytest.approx(12.5 / 3)
    assert p1["criteria"]["accuracy"]["n"] == 3 and p1["failed"] == 0
    assert p1["agreement"]["pairs"] == 3 and p1["agreement"]["exact"] == pytest.approx(2 / 3)
    p2 = summary["p2"]
    assert p2["failed"] == 2 and p2["criteria"]["depth"]["n"] == 1  # o1 failed twice, o2 never answered
    calls = len(judge.calls)
    assert judge_run(open_run, judge, repeats=2) == {"judged": 0, "failed": 0, "skipped_invalid": 1}
    assert len(judge.calls) == calls  # resumed: nothing judged twice
    md = write_report(open_run, inspector=False)["report"].read_text()
    assert "## Judge scores" in md and "| p1 | scripted | grader | 3 | 0 | 4.17 ± " in md


def test_judge_refuses_scored_formats(tmp_path: Path):
    rows = [(1, {"id": "q", "film_id": "f", "question": "Q?", "options": ["a", "b"], "answer": "A"})]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl")

    def ans(film_id, query, policy, backbone):
        return Answer(choice="A", text="a", confidence=None, invalid=False, policy=policy, backbone="s")

    run_bench(bench, ["p"], [ScriptedBackbone(["x"])], tmp_path / "run", answerer=ans)
    with pytest.raises(MovieMemError, match="the judge scores open and narration answers"):
        judge_run(tmp_path / "run", ScriptedBackbone(["{}"]))
    assert not (tmp_path / "run" / JUDGE).exists()
