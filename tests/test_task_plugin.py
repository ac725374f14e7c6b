"""One Task per benchmark (issue 63.2): a plug-in format defined in this file alone, its item model, queries,
scoring, judge rubric, retrieval probes and inspector fields all declared by its Task, runs through bench,
the judge, report, retrieval-eval and the inspector, with no file of the package touched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

import moviemem
from moviemem.agents.types import Answer, Question
from moviemem.backbones import ScriptedBackbone
from moviemem.eval.formats import FORMATS, Item, load_benchmark
from moviemem.eval.judge import judge_run, judge_summary
from moviemem.eval.records import AnswerRecord, Score
from moviemem.eval.report import write_report
from moviemem.eval.retrieval_eval import retrieval_eval
from moviemem.eval.runner import run_bench
from moviemem.eval.tasks import TASKS, Probe, Query, Shown, Task
from moviemem.foundation.errors import MovieMemError
from moviemem.retrievers.gather import QuestionRetriever
from moviemem.retrievers.registry import RETRIEVERS
from moviemem.retrievers.types import Evidence


class Sighting(Item):
    """Where a thing is first seen, and who sees it."""

    format: ClassVar[str] = "sighting"
    thing: str
    witness: str
    seen_at: float
    reference: str
    evidence: list[tuple[float, float]] = []


RUBRIC = {"place": "it names where the thing is first seen (5: exactly, 0: not at all)",
          "witness": "it names who sees it (5: right, 0: wrong or missing)"}


class SightingTask(Task):
    format = "sighting"
    model = Sighting
    keys = ("thing", "witness", "seen_at")
    rubric = RUBRIC
    fields = (Shown("thing", "Thing sought"), Shown("witness", "Seen by"), Shown("seen_at", "First seen", time=True))

    def queries(self, item: Sighting) -> list[Query]:  # type: ignore[override]  # handed items of its own format
        return [Query("answer", f"Where is the {item.thing} first seen?", "open")]

    def score(self, item: Sighting, answers: dict[str, AnswerRecord]) -> Score:  # type: ignore[override]
        text = answers["answer"].text
        return Score(item.witness.lower() in text.lower(), {"said": text})

    def judge_reference(self, item: Sighting) -> str:  # type: ignore[override]
        return f"Thing: {item.thing}\nReference: {item.reference}\n"

    def probes(self, item: Sighting) -> list[Probe]:  # type: ignore[override]
        return [Probe(Question.make(f"the {item.thing}", kind="open")),
                Probe(Question.make(f"{item.witness} sees something", kind="open"), "witness")]


class Echo(QuestionRetriever):
    """Finds the lantern at 30-34 s, and keeps every question it was asked."""

    asked: ClassVar[list[str]] = []

    def _gather(self, film: Any, question: Question, trace: Any, lines: Any, judge: Any) -> list[Evidence]:
        Echo.asked.append(question.text)
        return [Evidence("utterance", "f", 30.0, 34.0, "Mara: a lantern in the window!")]

    def pack(self, ranked: list[Evidence], budget: int, lines: Any) -> list[Evidence]:
        return ranked


class Films:
    """A library of one film, for a retriever that reads nothing of it."""

    def film(self, film_id: str) -> object:
        return object()


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    for registry in (FORMATS, TASKS, RETRIEVERS):  # registered for this test only
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    moviemem.register("task", "sighting", SightingTask())  # one registration: the task names its format's model
    moviemem.register("retriever", "echo", Echo)
    Echo.asked.clear()


ROWS = [{"id": f"s{i}", "film_id": "f", "thing": "lantern", "witness": "Mara", "seen_at": 30.5 + i,
         "reference": "In the window, by Mara.", "evidence": [[30.0, 35.0]]} for i in range(2)]


def _answer(film_id: str, query: Query, policy: str, backbone: Any) -> Answer:
    return Answer(choice=None, text="Mara sees it in the window" if policy == "good" else "nobody", confidence=None,
                  invalid=False, policy=policy, backbone=backbone.name)


def test_a_plugin_format_declares_its_judge_rubric_probes_and_inspector_fields(plugin: None, tmp_path: Path):
    path = tmp_path / "sightings.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    bench = load_benchmark(path)  # the format came with its task, detected from the keys it declares
    assert bench.format == "sighting" and isinstance(bench.items[0], Sighting)

    run = tmp_path / "run"
    run_bench(bench, ["good", "bad"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=_answer)

    # the judge grades with the task's rubric, against the reference the task gives
    asked: list[str] = []

    def grader(request: Any) -> str:
        asked.append(request.messages[-1].text)
        return json.dumps({c: 4 for c in RUBRIC})

    counts = judge_run(run, ScriptedBackbone(grader, name="grader"))
    assert counts == {"judged": 4, "failed": 0, "skipped_invalid": 0}
    assert all(f"- place: {RUBRIC['place']}" in p and "Thing: lantern\nReference: In the window, by Mara.\n" in p
               and "Reply as JSON with the keys place, witness." in p for p in asked)
    assert {c for r in judge_summary(run) for c in r["criteria"]} == set(RUBRIC)

    # report.md: the common tables and the judge's, with the plug-in's criteria as columns
    report = write_report(run)["report"].read_text()
    assert "| good | scripted | 2 |" in report and "| place | witness | overall |" in report

    # the inspector: the fields the task declares, in its order, times as h:mm:ss
    page = (run / "inspector" / "items" / "1.html").read_text()
    shown = [page.index(x) for x in ("Thing sought", "lantern", "Seen by", "Mara", "First seen", "0:00:30.5")]
    assert shown == sorted(shown) and "Gold evidence" in page
    assert "lantern" in (run / "inspector" / "index.html").read_text()  # the first field leads the index row

    # retrieval-eval asks the task's probes (each keyed) and measures them against the gold spans
    res = retrieval_eval(Films(), bench, ["echo"], [100])
    assert res["items"] == 4 and Echo.asked == ["the lantern", "Mara sees something"] * 2
    assert res["retrievers"][0]["recall_at_budget"]["100"] == 1.0


def test_a_format_without_probes_is_said_by_retrieval_eval_not_skipped(plugin: None, tmp_path: Path):
    """Relations declare no retrieval probes: items with gold spans are named as unmeasurable, in one line."""
    path = tmp_path / "rel.jsonl"
    path.write_text(json.dumps({"id": "r1", "film_id": "f", "event_a": "a", "event_b": "b", "label": "before",
                                "evidence": [[1.0, 2.0]]}) + "\n")
    with pytest.raises(MovieMemError, match=r"format 'relations' declares no retrieval probes \(its Task.probes\)"):
        retrieval_eval(Films(), load_benchmark(path), ["echo"], [100])


def test_a_task_names_its_model_once(monkeypatch: pytest.MonkeyPatch):
    """A task that names an item model needs its keys; it may not claim a format registered with another model."""
    for registry in (FORMATS, TASKS):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))

    class Keyless(SightingTask):
        format = "keyless"
        keys = ()

    class Clash(SightingTask):
        format = "mcq"

    with pytest.raises(MovieMemError, match="give the keys that identify its lines"):
        moviemem.register("task", "keyless", Keyless())
    with pytest.raises(MovieMemError, match="names item model Sighting, but format 'mcq' is registered with MCQ"):
        moviemem.register("task", "mcq", Clash())
    assert "keyless" not in FORMATS and "keyless" not in TASKS


def test_the_inspector_fields_of_a_plugin_without_declared_fields_are_its_model_fields(plugin: None):
    class Plain(SightingTask):
        fields = None

    item = Sighting.model_validate(ROWS[0])
    assert Plain().shown(item) == [("Thing", "lantern"), ("Witness", "Mara"), ("Seen at", "30.5"),
                                   ("Reference", "In the window, by Mara.")]
    assert SightingTask().shown(item)[2] == ("First seen", "0:00:30.5")
