"""Option-permutation mode for MCQ position bias (issue 18, item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moviemem import MovieMemError
from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import log_grid
from moviemem.eval.permute import position_bias, rotated
from moviemem.eval.report import write_report
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench


def _bench() -> Benchmark:
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Q{i}?", "options": ["cat", "dog", "owl"],
                     "answer": "B"}) for i in range(2)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl")


def test_rotations_move_the_answer_with_its_option() -> None:
    items = rotated(_bench()).items
    assert [it.id for it in items[:3]] == ["q0@r0", "q0@r1", "q0@r2"]
    assert all(it.options[ord(it.answer) - 65] == "dog" for it in items)
    with pytest.raises(MovieMemError, match="mcq"):
        rotated(Benchmark("claims", [], "c.jsonl"))


def _always(letter_of):
    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        c = letter_of(query, policy)
        return Answer(choice=c, text=c, confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                      usage=reply.usage)
    return answer


def test_a_model_that_always_says_a_is_inconsistent_and_all_a(tmp_path: Path) -> None:
    # "first": always A (pure position bias); "reader": always picks "dog" wherever it is
    def letter(query, policy):
        return "A" if policy == "first" else "ABC"[list(query.options).index("dog")]

    run = tmp_path / "run"
    run_bench(rotated(_bench()), ["first", "reader"], [ScriptedBackbone(["x"], cycle=True)], run,
              answerer=_always(letter))
    items, grid = log_grid(run)
    rows = {r["policy"]: r for r in position_bias(items, grid)}
    assert rows["first"]["consistency"] == 0.0 and rows["first"]["letters"] == {"A": 1.0}
    assert rows["reader"]["consistency"] == 1.0 and rows["reader"]["letters"] == pytest.approx({"A": 1 / 3, "B": 1 / 3, "C": 1 / 3})
    acc = {r["policy"]: r["accuracy"]["value"] for r in RunLog(run).rows}
    assert acc == {"first": pytest.approx(1 / 3), "reader": 1.0}
    md = write_report(run, inspector=False)["report"].read_text()
    assert "## Position bias (options rotated)" in md and "| first | scripted | 2 | 0.0 | A 100% |" in md


def test_bench_permute_flag_end_to_end(tmp_path: Path, cli) -> None:
    import json

    srt = tmp_path / "a.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n")
    assert cli("ingest", "--text", str(srt), "--json").code == 0
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "q", "film_id": "a", "question": "Who?", "options": ["x", "y"], "answer": "A"}) + "\n")
    r = cli("bench", str(bench), "--permute", "--policies", "closed-book", "--backbones", "scripted:A",
            "--out", str(tmp_path / "run"), "--json")
    assert r.code == 0, r.err
    assert r.json()["items"] == 2 and r.json()["results"][0]["accuracy"] == 0.5  # "A" is right in one rotation
    md = Path(cli("report", str(tmp_path / "run"), "--json", library=False).json()["report"]).read_text()
    assert "| closed-book | scripted:A | 1 | 0.0 | A 100% |" in md
