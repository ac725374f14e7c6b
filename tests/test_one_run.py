"""One typed run (issue 63 item 3): eval/run.py's RunLog is what the summary, the report, the inspector, compare
and the judge read, each value read once; a task's scoring detail is typed (Task.detail) and read back as its
type, an old run's keys included, a damaged one refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval import log
from moviemem.eval.compare import Side, compare
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.judge import judge_summary
from moviemem.eval.records import AnswerRecord, Detail, Score
from moviemem.eval.report import write_report
from moviemem.eval.run import RunLog, open_run
from moviemem.eval.runner import run_bench
from moviemem.eval.tasks import ChoiceDetail, JudgedDetail, PairDetail, RelationDetail, TimeDetail, task_for
from moviemem.foundation.errors import MovieMemError


def _answer(film_id, query, policy, backbone):
    reply = backbone.chat([user(query.question)], max_tokens=4)
    choice = "A" if policy == "closed-book" else "B"
    return Answer(choice=choice, text=choice, confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                  usage=reply.usage)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [(i + 1, {"id": f"q{i}", "film_id": f"f{i % 3}", "question": f"Q{i}?", "options": ["a", "b", "c", "d"],
                     "answer": "AB"[i % 2]}) for i in range(6)]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl")
    out = tmp_path_factory.mktemp("one") / "run"
    run_bench(bench, ["closed-book", "subtitles"], [ScriptedBackbone(["x"], cycle=True)], out, answerer=_answer)
    return out


def test_a_run_is_read_once_and_every_reader_takes_it(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = RunLog(run)
    assert open_run(opened) is opened and open_run(run).dir == run
    assert [it.id for it in opened.items] == [f"q{i}" for i in range(6)] and opened.task.format == "mcq"
    rows = opened.rows
    assert [(r["policy"], r["n"], r["accuracy"]["k"]) for r in rows] == [("closed-book", 6, 3), ("subtitles", 6, 3)]
    assert opened.row(("subtitles", "scripted")) is rows[1] and opened.row(("nope", "scripted")) is None
    # the items and the lean records are read once however many readers ask: the report and its inspector both
    # take the same RunLog and never read items.jsonl or the whole log again
    reads = {"items": 0}
    real = log.read_items

    def counted(run_dir):
        reads["items"] += 1
        return real(run_dir)

    monkeypatch.setattr(log, "read_items", counted)
    fresh = RunLog(run)
    write_report(fresh)
    assert reads["items"] == 1 and (run / "report.md").exists() and (run / "inspector" / "index.html").exists()
    assert judge_summary(fresh) == []  # mcq declares no rubric
    side = Side(run, "closed-book")
    assert side.run is side.run  # a side opens its run once
    (overall,) = compare(side, Side(run, "subtitles"))[:1]
    assert overall.n == 6 and overall.a_only == 3 and overall.b_only == 3


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(MovieMemError, match="not a run directory"):
        RunLog(tmp_path)


def test_each_task_types_its_detail_and_reads_it_back(run: Path) -> None:
    opened = RunLog(run)
    rec = next(opened.records())
    detail = opened.task.detail_of(rec)
    assert isinstance(detail, ChoiceDetail) and detail.pred == "A" and detail.gold == "A"
    assert {f: task_for(f).detail for f in ("mcq", "claims", "relations", "localization", "open", "narration")} == {
        "mcq": ChoiceDetail, "claims": PairDetail, "relations": RelationDetail,
        "localization": TimeDetail, "open": JudgedDetail, "narration": JudgedDetail}
    # a claim pair's detail as written now and as a run before issue 61 wrote it: the same verdicts
    assert PairDetail.model_validate({"on_true": True, "on_false": True}).verdicts == (True, True)
    assert PairDetail.of(True, True).line() == {"said_true_on_true_claim": True, "said_false_on_false_claim": False}
    # a plug-in's mapping is taken as a Detail with its own keys, written as they were given
    plug = Score(True, {"off_by": 0})
    assert isinstance(plug.detail, Detail) and plug.detail.line() == {"off_by": 0}


def test_a_damaged_detail_is_refused_in_one_line(run: Path, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in (run / log.RESULTS).read_text().splitlines()]
    lines[0]["detail"] = {"pred": ["not", "a", "letter"]}
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (log.MANIFEST, log.ITEMS):
        (copy / name).write_bytes((run / name).read_bytes())
    (copy / log.RESULTS).write_text("".join(json.dumps(x) + "\n" for x in lines))
    opened = RunLog(copy)
    with pytest.raises(MovieMemError, match="detail is not a ChoiceDetail"):
        opened.task.detail_of(next(opened.records()))


def test_scores_of_the_builtin_tasks_are_typed() -> None:
    mcq = task_for("mcq")
    item = mcq.model.model_validate({"id": "q", "film_id": "f", "question": "Q?", "options": ["a", "b"], "answer": "B"})
    ans = AnswerRecord.model_validate({"choice": "B", "text": "B", "invalid": False})
    score = mcq.score(item, {"answer": ans})
    assert score.correct is True and isinstance(score.detail, ChoiceDetail) and score.detail.pred == "B"
