"""Third-party plug-ins: a policy, a retriever, an ingest stage and a benchmark format shipped by a separate
package, installed with pip into this test's environment and found through entry points,
without touching moviemem."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from moviemem import Library
from moviemem.agents.registry import POLICIES, get_policy, list_policies
from moviemem.eval.formats import FORMATS, formats, read_jsonl
from moviemem.foundation.errors import MovieMemError
from moviemem.ingest.registry import STAGES, ordered_stages
from moviemem.retrievers.registry import RETRIEVERS

PLUGIN = '''
"""A tiny moviemem plug-in package."""
from dataclasses import dataclass

from moviemem.agents.base import BasePolicy
from moviemem.agents.parsing import Parsed
from moviemem.eval.formats import FormatSpec, Item
from moviemem.ingest.stage import Outcome, Stage
from moviemem.retrievers.types import Evidence
from moviemem.retrievers.gather import QuestionRetriever


class LineCount(BasePolicy):
    """Answers with how many lines the film says."""

    @dataclass
    class Settings:
        prefix: str = "lines:"

    def _answer(self, film, question, run):
        n = len(film.utterances())
        run.note(f"counted {n} lines")
        return Parsed(None, f"{self.settings.prefix} {n}", None, False)


class LastLines(QuestionRetriever):
    """The film's last two lines, whatever is asked."""

    def _gather(self, film, question, trace, lines, judge):
        if trace is not None:
            trace.note("last lines retriever")
        return [Evidence("utterance", film.film_id, u.start, u.end, u.text, score=1.0, id=f"utterance:{u.idx}")
                for u in reversed(film.utterances()[-2:])]


class WordCount(Stage):
    name = "wordcount"
    needs = ("probe", "transcript")

    def run(self, ctx):
        words = sum(len(u.text.split()) for u in ctx.rows("utterances"))
        return Outcome(note=f"{words} words")


class Quote(Item):
    line: str
    speaker: str


QUOTE = FormatSpec("quote", Quote, frozenset({"line", "speaker"}), "who said it")


class Broken:
    pass

raise_on_import = None
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    (src / "mm_plugin_pkg").mkdir()
    (src / "mm_plugin_pkg" / "__init__.py").write_text(PLUGIN)
    (src / "mm_plugin_broken.py").write_text("raise ImportError('this plug-in needs a library that is not installed')\n")
    (src / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "mm-plugin-pkg"
        version = "0.1"

        [tool.setuptools]
        packages = ["mm_plugin_pkg"]
        py-modules = ["mm_plugin_broken"]

        [project.entry-points."moviemem.policies"]
        linecount = "mm_plugin_pkg:LineCount"
        broken = "mm_plugin_broken:Policy"

        [project.entry-points."moviemem.retrievers"]
        lastlines = "mm_plugin_pkg:LastLines"
        passages = "mm_plugin_pkg:LastLines"

        [project.entry-points."moviemem.stages"]
        wordcount = "mm_plugin_pkg:WordCount"

        [project.entry-points."moviemem.formats"]
        quote = "mm_plugin_pkg:QUOTE"
    '''))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(src)], check=True)
    return target


@pytest.fixture
def plugins(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(installed))
    for reg in (POLICIES, STAGES, FORMATS, RETRIEVERS):  # rediscover with the package on the path; forget it afterwards
        monkeypatch.setattr(reg, "_entries", dict(reg._entries))
        monkeypatch.setattr(reg, "_discovered", False)
        monkeypatch.setattr(reg, "failures", {})
        monkeypatch.setattr(reg, "clashes", {})


def test_an_installed_policy_stage_and_format_work_like_builtins(plugins: None, tmp_path: Path):
    # policy: listed with its defaults, loaded by name, answers on a film; a broken one is a value
    assert "linecount" in POLICIES.names() and "broken" in POLICIES.names()
    listing = {p.name: p for p in list_policies()}
    assert listing["linecount"].defaults == {"prefix": "lines:"} and "entry point" in listing["linecount"].source
    assert "broken" not in listing and "not installed" in POLICIES.failures["broken"]
    with pytest.raises(MovieMemError, match="policy 'broken'.*failed to load"):
        get_policy("broken")

    # stage: placed after what it needs, run by name on an ingest, its note recorded
    order = [s.name for s in ordered_stages()]
    assert order.index("wordcount") > order.index("transcript")
    srt = tmp_path / "film.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe letter is on the table.\n\n"
                   "2\n00:00:04,000 --> 00:00:06,000\nRead it before noon.\n")
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(srt, film_id="tiny", duration_s=10, stages=["wordcount"])
    runs = {r.stage: r for r in film.stages()}
    assert runs["wordcount"].status == "done" and runs["wordcount"].reason == "10 words"

    answer = get_policy("linecount", prefix="n =").answer(film, _question(), _backbone())
    assert answer.text == "n = 2" and answer.policy == "linecount"

    # format: detected from its keys and validated like a built-in
    assert "quote" in formats()
    items = tmp_path / "quotes.jsonl"
    items.write_text('{"id": "q1", "film_id": "tiny", "line": "Read it before noon.", "speaker": "Ann"}\n')
    bench = read_jsonl(items)
    assert bench.format == "quote" and bench.items[0].speaker == "Ann"


def _question():
    from moviemem.agents.types import Question

    return Question.make("How many lines are said?")


def _backbone():
    from moviemem.backbones import load

    return load("scripted")


def test_an_installed_retriever_works_in_retrieval_eval_hybrid_and_bench(plugins: None, tmp_path: Path):
    import json

    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.retrieval_eval import retrieval_eval
    from moviemem.eval.runner import run_bench

    srt = tmp_path / "film.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe letter is on the table.\n\n"
                   "2\n00:00:40,000 --> 00:00:42,000\nRead it before noon.\n\n"
                   "3\n00:01:20,000 --> 00:01:22,000\nThe lighthouse keeper wrote it.\n")
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(srt, film_id="tiny", duration_s=100)
    assert "lastlines" in RETRIEVERS.names() and "entry point" in RETRIEVERS.entry("lastlines").source
    # a plug-in that takes a built-in's name is never silently ignored (nor silently preferred)
    with pytest.raises(MovieMemError, match=r"retriever 'passages' is registered more than once \(moviemem; entry point "
                                            r"mm_plugin_pkg:LastLines of mm-plugin-pkg\)"):
        RETRIEVERS.entry("passages")

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "film_id": "tiny", "question": "Who wrote the letter?",
                                 "options": ["the keeper", "the baker"], "answer": "A", "evidence": [[80.0, 82.0]]}) + "\n")
    res = retrieval_eval(lib, load_benchmark(items), ["lastlines"], [100])
    assert res["retrievers"][0]["name"] == "lastlines" and res["retrievers"][0]["recall_at_budget"]["100"] == 1.0

    backbone = ScriptedBackbone(['{"answer": "A", "confidence": 4, "evidence": ["E1"]}'] * 4)
    answer = get_policy("hybrid", retriever="lastlines").answer(film, _question_about_letter(), backbone)
    assert answer.choice == "A" and {e.text for e in answer.evidence} == {"Read it before noon.", "The lighthouse keeper wrote it."}
    assert any("last lines retriever" in s.data.get("text", "") for s in answer.trace if s.kind == "note")

    run_bench(load_benchmark(items), ["hybrid[retriever=lastlines]"], [ScriptedBackbone(['{"answer": "A", "confidence": 4, "evidence": []}'], cycle=True)],
              tmp_path / "run", library=lib)
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert rows and rows[0]["policy"] == "hybrid[retriever=lastlines]"
    shown = rows[0]["answers"]["answer"]["evidence"]
    assert rows[0]["correct"] and any("lighthouse" in e["text"] for e in shown)
    assert {e["retriever"] for e in shown} == {"lastlines"}  # evidence is labelled with the retriever that found it

    with pytest.raises(MovieMemError, match="unknown retriever 'nope'"):
        get_policy("hybrid", retriever="nope")

    # moviemem search --retriever: what a policy would be offered, as the plug-in ranks it
    from moviemem.serve.film_tools import retrieve

    found = retrieve(lib, "tiny", "who wrote the letter", "lastlines", k=1)
    assert found["retriever"] == "lastlines" and [e["text"] for e in found["evidence"]] == ["The lighthouse keeper wrote it."]
    assert [e["text"] for e in retrieve(lib, "tiny", "letter", "lastlines", k=1, end=50.0)["evidence"]] == ["Read it before noon."]


def test_a_plugin_postprocessor_step_runs_in_the_routed_retriever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A step registered like any plug-in and named in the settings' `steps` runs between the built-in
    ones, sees the searches, and records itself in the answer's trace."""
    import moviemem
    from moviemem.backbones import ScriptedBackbone
    from moviemem.retrievers.postprocess import POSTPROCESSORS, Postprocessor
    from moviemem.retrievers.types import Evidence

    monkeypatch.setattr(POSTPROCESSORS, "_entries", dict(POSTPROCESSORS._entries))  # registered for this test only

    @moviemem.register("postprocessor", "keeper-first")
    class KeeperFirst:
        """Hits that name the keeper first."""

        packs = False

        def __init__(self, settings: object):
            self.settings = settings

        def postprocess(self, ranked: list[Evidence], hits) -> list[Evidence]:
            if hits.trace is not None:
                hits.trace.note(f"keeper-first over {len(hits.searches)} searches")
            return sorted(ranked, key=lambda e: "keeper" not in e.text)

    assert isinstance(KeeperFirst(None), Postprocessor) and "keeper-first" in POSTPROCESSORS.names()
    srt = tmp_path / "film.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe letter is on the table.\n\n"
                   "2\n00:01:20,000 --> 00:01:22,000\nThe lighthouse keeper wrote it.\n")
    film = Library(tmp_path / "lib").ingest_text(srt, film_id="tiny", duration_s=100)
    steps = ["fuse", "keeper-first", "fit-budget"]
    policy = get_policy(f"hybrid[steps={json.dumps(steps)},units=lines,budget_tokens=20]")
    answer = policy.answer(film, _question_about_letter(), ScriptedBackbone(['{"answer": "A", "confidence": 4, "evidence": ["E1"]}']))
    notes = [s.data["text"] for s in answer.trace if s.kind == "note"]
    assert any(n.startswith("keeper-first over ") for n in notes)
    assert [e.text for e in answer.evidence] == ["The lighthouse keeper wrote it."]  # ranked first, so it fits the budget
    with pytest.raises(MovieMemError, match="unknown postprocessor 'nope'"):
        get_policy("hybrid[steps=[\"fuse\", \"nope\"]]").answer(film, _question_about_letter(), ScriptedBackbone(["{}"]))


def _question_about_letter():
    from moviemem.agents.types import Question

    return Question.make("Who wrote the letter?", ["the keeper", "the baker"])


def test_one_register_for_every_kind(monkeypatch: pytest.MonkeyPatch):
    """`moviemem.register(kind, name, target, **meta)` adds any kind, directly or as a decorator,
    and each kind checks what only it needs."""
    import moviemem
    from moviemem.agents.readers.registry import READERS
    from moviemem.backbones.registry import BACKBONES
    from moviemem.backbones.scripted import ScriptedBackbone
    from moviemem.eval.formats import ADAPTERS, MCQ
    from moviemem.eval.tasks import TASKS, MCQTask
    from moviemem.ingest.stage import Stage
    from moviemem.retrievers.postprocess import POSTPROCESSORS
    from moviemem.retrievers.routing import CHANNEL_RETRIEVERS

    registries = {"backbone": BACKBONES, "policy": POLICIES, "retriever": RETRIEVERS, "postprocessor": POSTPROCESSORS,
                  "stage": STAGES, "format": FORMATS, "adapter": ADAPTERS, "task": TASKS, "reader": READERS,
                  "channel": CHANNEL_RETRIEVERS}
    assert set(registries) == set(moviemem.KINDS)
    for registry in registries.values():  # registered for this test only
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))

    @moviemem.register("backbone", "echo-kind")
    def echo(arg: str | None, **options: object) -> ScriptedBackbone:
        """Says its argument."""
        return ScriptedBackbone([arg or ""])

    class Mine(Stage):
        name = "mine"

    def reader(path: object) -> list[object]:
        """Reads nothing."""
        return []

    added = {"policy": moviemem.register("policy", "mine", type(get_policy("closed-book")), needs=("transcript",)),
             "stage": moviemem.register("stage", "mine", Mine),
             "retriever": moviemem.register("retriever", "mine", RETRIEVERS.get("hybrid")),
             "format": moviemem.register("format", "mine", MCQ, keys=["question", "options", "answer", "mine"]),
             "adapter": moviemem.register("adapter", "mine", reader)}
    assert BACKBONES.get("echo-kind") is echo and BACKBONES.entry("echo-kind").meta["description"] == "Says its argument."
    assert STAGES.get("mine") is Mine and added["stage"] is Mine
    assert POLICIES.entry("mine").meta["needs"] == ("transcript",)
    assert FORMATS.get("mine").keys == frozenset({"question", "options", "answer", "mine"})
    assert ADAPTERS.entry("mine").meta["description"] == "Reads nothing."
    assert moviemem.register("reader", "mine", reader) is reader and READERS.entry("mine").meta["description"] == "Reads nothing."
    assert moviemem.register("channel", "mine", reader, table="utterances") is reader
    assert CHANNEL_RETRIEVERS.entry("mine").meta == {"table": "utterances", "routes": {}}
    for kind, name, target, meta, why in [
        ("backbone", "a:b", echo, {}, "no ':'"),
        ("backbone", "echo2", echo, {"colour": "red"}, "unknown option"),
        ("policy", "p2", Mine, {"colour": "red"}, "unknown option"),
        ("format", "f2", MCQ, {}, "keys"),
        ("format", "f3", dict, {"keys": ["x"]}, "subclass"),
        ("task", "mcq2", MCQTask(), {}, "own format name"),
        ("reader", "r2", reader, {"colour": "red"}, "unknown option"),
        ("channel", "c2", reader, {}, "give the table it reads"),
        ("gadget", "g", echo, {}, "unknown plug-in kind"),
    ]:
        with pytest.raises(MovieMemError, match=why):
            moviemem.register(kind, name, target, **meta)


def test_a_plugin_stage_keeps_its_own_table_through_register_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A plug-in stage with a table of its own: `register_table` names its row model and owner, and the
    table is then written, kept per run, shown through the film's view (`until` hides later rows) and
    skipped when nothing changed, as the built-in tables are."""
    from typing import ClassVar

    import moviemem
    from moviemem.ingest.stage import Outcome, Stage
    from moviemem.memory import schema

    class WordRow(schema.Row):
        table: ClassVar[str] = "line_words"
        idx: int
        start: float
        end: float
        words: int

    class LineWords(Stage):
        name = "line-words"
        needs = ("transcript",)

        def run(self, ctx):
            rows = [WordRow(film_id=ctx.film_id, idx=u.idx, start=u.start, end=u.end, words=len(u.text.split()))
                    for u in ctx.rows("utterances")]
            ctx.write(rows)
            return Outcome(note=f"{len(rows)} lines counted")

    monkeypatch.setattr(STAGES, "_entries", dict(STAGES._entries))  # registered for this test only
    moviemem.register("stage", "line-words", LineWords)
    schema.register_table(WordRow, "line-words")
    try:
        srt = tmp_path / "film.srt"
        srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe letter is on the table.\n\n"
                       "2\n00:00:40,000 --> 00:00:42,000\nRead it before noon.\n")
        lib = Library(tmp_path / "lib")
        film = lib.ingest_text(srt, film_id="tiny", duration_s=60, stages=["line-words"])
        assert LineWords().owns == ["line_words"]
        runs = {r.stage: r for r in film.stages()}
        assert runs["line-words"].status == "done" and runs["line-words"].reason == "2 lines counted"
        assert sorted(film.arrow("line_words").column("words").to_pylist()) == [4, 6]
        assert film.until(10.0).arrow("line_words").column("words").to_pylist() == [6]  # timed: later rows hidden
        again = lib.ingest_text(srt, film_id="tiny", duration_s=60, stages=["line-words"])
        assert [r.run_id for r in again.stages() if r.stage == "line-words"] == [runs["line-words"].run_id]
    finally:
        # registered for this test only; undone in place, since other modules hold these by name
        schema.ROW_MODELS.pop("line_words")
        schema.TABLE_OWNER.pop("line_words")
        schema.TIMED_TABLES.discard("line_words")


def test_a_new_format_with_its_own_task_gets_its_report_section(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A format registered with its own Task is asked, scored (AnswerRecords in, a Score out), summarised and
    given its own section of report.md, with no edit to report.py."""
    from collections.abc import Sequence
    from typing import ClassVar

    import moviemem
    from moviemem.agents.types import Answer
    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.formats import Benchmark, Item, validate_rows
    from moviemem.eval.records import AnswerRecord, Metrics, ResultRecord, Score, SummaryRow
    from moviemem.eval.report import write_report
    from moviemem.eval.runner import run_bench
    from moviemem.eval.tasks import TASKS, Query, Task

    class Count(Item):
        """How many times something happens."""

        format: ClassVar[str] = "count"
        question: str
        count: int

    class CountTask(Task):
        format = "count"

        def queries(self, item: Count) -> list[Query]:  # type: ignore[override]  # handed items of its own format
            return [Query("answer", item.question, "open")]

        def score(self, item: Count, answers: dict[str, AnswerRecord]) -> Score:  # type: ignore[override]
            a = answers["answer"]
            guess = int(a.text) if a.text.isdigit() else None
            return Score(None if guess is None else guess == item.count, {"off_by": None if guess is None else guess - item.count},
                         None if guess is not None else "no number")

        def summarise(self, items: Sequence[Count], records: Sequence[ResultRecord]) -> Metrics:  # type: ignore[override]
            out = super().summarise(items, records)
            out["mean_abs_error"] = sum(abs(r.detail["off_by"]) for r in records if r.detail.get("off_by") is not None) / len(records)  # type: ignore[typeddict-unknown-key]
            return out

        def report_section(self, rows: Sequence[SummaryRow]) -> list[str]:
            return ["", "## Counting error", "", *(f"- {r['policy']}: {r['mean_abs_error']:.2f}" for r in rows)]  # type: ignore[typeddict-item]

    for registry in (FORMATS, TASKS):  # registered for this test only
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    moviemem.register("format", "count", Count, keys=["question", "count"])
    moviemem.register("task", "count", CountTask())

    def answer(film_id, query, policy, backbone):
        return Answer(choice=None, text="3" if policy == "good" else "5", confidence=None, invalid=False, policy=policy,
                      backbone=backbone.name)

    rows = [(i + 1, {"id": f"c{i}", "film_id": "f", "question": f"How many doors {i}?", "count": 3 + i % 2})
            for i in range(4)]
    bench = Benchmark("count", validate_rows(rows, "count", "count.jsonl"), "count.jsonl", "jsonl")
    run_bench(bench, ["good", "bad"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run", answerer=answer)
    report = write_report(tmp_path / "run", inspector=False)["report"].read_text()
    assert "## Counting error\n\n- bad: 1.50\n- good: 0.50" in report
    assert "| good | scripted | 4 |" in report and "50.0 [" in report  # the common tables, from the same records
