"""Hybrid as registered parts (issue 63.1): a plug-in postprocessor step with its own setting, a plug-in step
that declares it needs the judge, a plug-in reader chosen by name (and one with its own setting, given where it
is named) and a plug-in search channel, each defined in this file alone and run through a small bench on a text
film (scripted backbone), with no file of the package touched; and the steps' and the readers' old flat settings
still mean what they meant."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from text_film import text_film_library

import moviemem
from moviemem import Library
from moviemem.agents import get_policy
from moviemem.agents.base import Run
from moviemem.agents.parsing import Parsed
from moviemem.agents.readers.registry import READERS, parse_reader
from moviemem.agents.types import Question
from moviemem.backbones import Reply, Request, ScriptedBackbone
from moviemem.eval.formats import load_benchmark
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError
from moviemem.retrievers.gather import Routed
from moviemem.retrievers.postprocess import POSTPROCESSORS
from moviemem.retrievers.registry import get_retriever
from moviemem.retrievers.routing import CHANNEL_RETRIEVERS
from moviemem.retrievers.settings import GatherSettings
from moviemem.retrievers.types import Evidence

FILLER = ["Sara, the weather has been strange this week.", "Did you bring the papers from the office?",
          "We never liked the long road to town.", "Sara, where were you all morning?", "The train was late again.",
          "Supper is at eight, do not forget.", "Who left the gate open?", "I lost my gloves at the market."]
CUES = [(12.0 * i, 12.0 * i + 4, FILLER[i % len(FILLER)]) for i in range(20)]
CUES += [(400.0, 404.0, "Your uncle keeps the old lamp burning on the northern cliffs every night.")]
OPTIONS = ["a lighthouse", "a bakery", "a cinema", "a bank"]
ITEMS = [{"id": f"q{i}", "film_id": "cliffs", "question": q, "options": OPTIONS, "answer": "A",
          "evidence": [[400.0, 404.0]]}
         for i, q in enumerate(["Where does Sara's uncle work?", "Where is the old lamp kept burning?"])]
JSON_ANSWER = '{"answer": "A", "confidence": 4, "evidence": ["E1"]}'


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return text_film_library(tmp_path_factory.mktemp("parts"), CUES, "cliffs", "Cliffs")


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    for registry in (POSTPROCESSORS, READERS, CHANNEL_RETRIEVERS):  # registered for this test only
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))


def _bench(library: Library, tmp_path: Path, policy: str, backbone: ScriptedBackbone) -> list[dict[str, Any]]:
    """The two items answered by `policy` through `run_bench`; each record's answer as written to results.jsonl."""
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ITEMS))
    run_bench(load_benchmark(path), [policy], [backbone], tmp_path / "run", library=library, cache=tmp_path / "cache")
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    return [json.loads(line)["answers"]["answer"] for line in lines]


def _notes(answer: dict[str, Any]) -> Iterator[str]:
    return (s["text"] for s in answer["trace"] if s["kind"] == "note")  # a step as written: its kind and its data


def test_a_plugin_step_takes_its_own_setting_where_it_is_named(library: Library, plugins: None, tmp_path: Path):
    @moviemem.register("postprocessor", "keep")
    class Keep:
        """The first `k` hits only."""

        packs = False

        @dataclass
        class Settings:
            k: int = 5

        def __init__(self, gather: GatherSettings, settings: Settings):
            self.k = settings.k

        def postprocess(self, ranked: list[Evidence], hits: Any) -> list[Evidence]:
            hits.trace.note(f"keep: {self.k} of {len(ranked)}")
            return ranked[: self.k]

    answers = _bench(library, tmp_path, "hybrid[steps=[fuse, widen(lines=0), keep(k=2), fit-budget],reader=json]",
                     ScriptedBackbone([JSON_ANSWER], cycle=True))
    assert len(answers) == 2 and all(a["choice"] == "A" for a in answers)
    for a in answers:
        assert any(n.startswith("keep: 2 of ") for n in _notes(a)) and 1 <= len(a["evidence"]) <= 2
    with pytest.raises(MovieMemError, match=r"^step keep has no setting 'n'; settings: k$"):
        get_policy("hybrid[steps=[fuse, keep(n=2)]]")
    with pytest.raises(MovieMemError, match=r"^step keep setting k=-1: -1 is not a finite number >= 0$"):
        get_policy("hybrid[steps=[fuse, keep(k=-1)]]")
    with pytest.raises(MovieMemError, match=r"^step fuse has no setting 'k'; settings: none$"):
        get_policy("hybrid[steps=[fuse(k=1)]]")


def _judge_replies(req: Request) -> Reply:
    """yes for a passage about the cliffs (the relevance judge's calls), a JSON answer otherwise."""
    text = req.messages[-1].text
    if "Passage from the film:" in text:
        yes = 0.9 if "cliffs" in text.split("Passage from the film:", 1)[1] else 0.1
        return Reply(text="yes", logprobs=[{"yes": math.log(yes), "no": math.log(1 - yes)}])
    return Reply(text=JSON_ANSWER)


def test_a_plugin_step_that_needs_the_judge_is_handed_one(library: Library, plugins: None, tmp_path: Path):
    seen: list[bool] = []

    @moviemem.register("postprocessor", "judged-first")
    class JudgedFirst:
        """The first three hits, the one the judge likes best first."""

        packs = False
        needs_judge = True  # declared: the retriever asks its caller for the judge, whatever the step's name

        def __init__(self, gather: GatherSettings):
            pass

        def postprocess(self, ranked: list[Evidence], hits: Any) -> list[Evidence]:
            seen.append(hits.judge is not None)
            if hits.judge is None:
                return ranked
            head = sorted(ranked[:3], key=lambda e: -(hits.judge(e.text) or 0.0))
            return head + ranked[3:]

    steps = "[fuse, widen(lines=0), judged-first, fit-budget]"
    assert Routed(GatherSettings(steps=("fuse", "judged-first"))).needs_judge
    backbone = ScriptedBackbone(_judge_replies, capabilities={"logprobs": True})
    answers = _bench(library, tmp_path, f"hybrid[steps={steps},reader=json]", backbone)
    assert seen == [True, True] and all(a["choice"] == "A" for a in answers)
    judged = [r for r in backbone.calls if "Passage from the film:" in r.messages[-1].text]
    assert judged and all(r.logprobs and r.max_tokens == 1 for r in judged)  # the yes/no judge, one token each
    assert all(a["calls"] == 4 for a in answers)  # three candidates judged, then the answer


def test_a_plugin_reader_is_chosen_by_name(library: Library, plugins: None, tmp_path: Path):
    read: list[list[str]] = []

    class LastOption:
        """Answers the last option, having been shown the evidence (no model call)."""

        def budget(self, question: Any, default: int) -> int:
            return 60

        def read(self, run: Any, reading: Any) -> Parsed:
            read.append([e.text for e in reading.shown])
            run.show(reading.shown)
            q = reading.question
            return Parsed(q.letters[-1], q.options[-1], None, False, how="last option")

    moviemem.register("reader", "last-option", lambda settings, run, question: LastOption())
    answers = _bench(library, tmp_path, "hybrid[reader=last-option]", ScriptedBackbone([]))
    assert [a["choice"] for a in answers] == ["D", "D"] and all(a["calls"] == 0 for a in answers)
    assert len(read) == 2 and all(read) and all(a["evidence"] for a in answers)
    with pytest.raises(MovieMemError, match="unknown reader 'nope'; known: .*last-option"):
        get_policy("hybrid[reader=nope]")


def test_a_plugin_channel_is_searched_where_its_routes_say(library: Library, plugins: None):
    class Lamp:
        """The line about the lamp, whatever the query."""

        label = "lamp"
        lines = False

        def __init__(self, gather: GatherSettings, kind: str):
            pass

        def ready(self, film: Any, trace: Any) -> bool:
            return True

        def search(self, film: Any, query: str, k: int, trace: Any) -> list[Evidence]:
            return [Evidence("note", "cliffs", 400.0, 404.0, "the lamp on the cliffs", score=1.0, id="lamp:1")]

    moviemem.register("channel", "lamp", Lamp, table="utterances", routes={"setting": 2})
    assert GatherSettings().channels["setting"][-1] == ("lamp", 2)
    film = library.film("cliffs")
    found = Routed().retrieve(film, Question.make("Where does Sara's uncle work?", OPTIONS))
    assert any(e.id == "lamp:1" for e in found)
    with pytest.raises(MovieMemError, match="channel 'bad': give the table it reads"):
        moviemem.register("channel", "bad", Lamp)


@pytest.mark.parametrize("old, steps", [
    ({"context_lines": 1}, ("fuse", "informative-first", "widen(lines=1)", "rerank", "fit-budget")),
    ({"context": "budget"}, ("fuse", "informative-first", "widen(grow=true)", "rerank", "fit-budget(rings=2)")),
    ({"context": "budget", "context_lines": 1, "core_share": 0.5},
     ("fuse", "informative-first", "widen(lines=1,grow=true)", "rerank", "fit-budget(rings=1,core_share=0.5)")),
    ({"informative": False, "rerank": 30}, ("fuse", "widen", "rerank(k=30)", "fit-budget")),
    ({"context_lines": 2, "context": "fixed", "rerank": 0}, GatherSettings().steps),
])
def test_the_old_flat_settings_are_written_onto_their_steps(old: dict[str, Any], steps: tuple[str, ...]):
    assert GatherSettings(**old).steps == steps
    spec = "hybrid[" + ",".join(f"{k}={json.dumps(v)}" for k, v in old.items()) + "]"
    assert get_policy(spec).settings.steps == steps  # what a run records: the steps with their settings
    assert get_policy(f"hybrid[steps={json.dumps(list(steps))}]").settings.steps == steps


def test_needs_judge_is_read_from_the_steps_not_a_name():
    assert get_retriever("hybrid-rerank").needs_judge and not get_retriever("hybrid").needs_judge
    assert Routed(GatherSettings(steps=("fuse", "rerank(k=3)"))).needs_judge
    assert not Routed(GatherSettings(steps=("fuse", "rerank"))).needs_judge  # k=0: off
    with pytest.raises(MovieMemError, match="unknown context 'wide'"):
        GatherSettings(context="wide")
    with pytest.raises(MovieMemError, match=r"step fit-budget setting core_share must be in \(0, 1\]"):
        get_policy("hybrid[core_share=2]")


def test_a_step_list_is_written_with_bare_names_and_each_steps_own_settings():
    from moviemem.agents.registry import parse_policy_spec

    name, settings = parse_policy_spec('hybrid[steps=[fuse, widen(lines=1,grow=true), mine(label="a, b")],reader=json]')
    assert name == "hybrid" and settings == {"steps": ["fuse", "widen(lines=1,grow=true)", 'mine(label="a, b")'],
                                             "reader": "json"}
    with pytest.raises(MovieMemError, match=r"bad step 'widen\(lines=1': use name or name\(key=value,...\)"):
        Routed(GatherSettings(steps=("fuse", "widen(lines=1")))


def test_a_plugin_reader_owns_its_setting_given_where_it_is_named(library: Library, plugins: None, tmp_path: Path):
    made: list[int] = []

    @moviemem.register("reader", "nth-option")
    class NthOption:
        """Answers the option its own setting names, having been shown the evidence (no model call)."""

        @dataclass
        class Settings:
            pick: int = 0

        def __init__(self, settings: Settings, run: Any, question: Any):
            made.append(settings.pick)
            self.pick = settings.pick

        def budget(self, question: Any, default: int) -> int:
            return default

        def read(self, run: Any, reading: Any) -> Parsed:
            run.show(reading.shown)
            q = reading.question
            return Parsed(q.letters[self.pick], q.options[self.pick], None, False, how="nth option")

    answers = _bench(library, tmp_path, "hybrid[reader=nth-option(pick=2)]", ScriptedBackbone([]))
    assert [a["choice"] for a in answers] == ["C", "C"] and made == [2, 2] and all(a["calls"] == 0 for a in answers)
    default: Any = get_policy("hybrid[reader=nth-option]")
    assert default.reader(Run(ScriptedBackbone([])), Question.make("q", OPTIONS)).pick == 0
    for spec, says in [("nth-option(n=2)", r"^reader nth-option has no setting 'n'; settings: pick$"),
                       ("nth-option(pick=two)", r"^reader nth-option setting pick='two': input should be a valid integer"),
                       ("nth-option(pick=-1)", r"^reader nth-option setting pick=-1: -1 is not a finite number >= 0$"),
                       ("letters(rotation=one)", r"^reader letters has no setting 'rotation'; settings: rotations, "),
                       ("auto(rotations=one)", r"^reader auto has no setting 'rotations'; it takes each reader's own as "
                                               r"READER.SETTING, READER one of letters, claims, json$"),
                       ("json(cite=none)", r"^reader json has no setting 'cite'; settings: max_tokens, temperature$")]:
        with pytest.raises(MovieMemError, match=says):
            get_policy(f"hybrid[reader={spec}]")  # refused when the policy is built, before any question


@pytest.mark.parametrize("flat, spelled", [
    ({}, "auto"),
    ({"rotations": "one", "foil_form": "statements"}, "auto(claims.rotations=one, claims.foil_form=statements)"),
    ({"cite": "none"}, "auto(letters.cite=none, claims.cite=none)"),
    ({"letter_rotations": "one", "letter_budget_tokens": 1000, "option_words": True},
     "auto(letters.rotations=one, letters.budget_tokens=1000, letters.option_words=true)"),
    ({"claims": "calibrated", "claim_calibration": "contrast"}, "auto(claims.method=calibrated, claims.calibration=contrast)"),
    ({"reader": "json", "max_tokens": 64, "temperature": 0.5, "rotations": "one"}, "json(max_tokens=64, temperature=0.5)"),
    ({"reader": "claims", "rotations": "all", "cite": "none"}, "claims(rotations=all, cite=none)"),
    ({"reader": "letters", "letter_rotations": "one", "rotations": "all"}, "letters(rotations=one)"),
    ({"reader": "logprobs", "claims": "qa", "max_tokens": 64}, "logprobs(claims.method=qa)"),
    ({"reader": "claims(rotations=all)", "rotations": "one"}, "claims(rotations=all)"),  # the reader's own spelling wins
    ({"cite": "follow-up", "letter_budget_tokens": 750}, "auto"),  # the defaults: nothing written
])
def test_the_readers_old_flat_settings_are_written_onto_their_readers(flat: dict[str, Any], spelled: str):
    old: Any = get_policy("hybrid", **flat)
    new: Any = get_policy(f"hybrid[reader={spelled}]")
    assert parse_reader(old.settings.reader) == parse_reader(new.settings.reader)


def test_order_is_hybrids_and_as_before_the_claims_readers_too():
    read = cast(Any, get_policy("hybrid[order=read]")).settings
    assert read.order == "read" and parse_reader(read.reader)[1]["claims"].order == "read"
    split = cast(Any, get_policy("hybrid[order=read,reader=claims(order=locate)]")).settings
    assert split.order == "read" and parse_reader(split.reader)[1].order == "locate"
    with pytest.raises(MovieMemError, match=r"^unknown order reader 'guess'; use locate or read$"):
        get_policy("hybrid[order=guess]")
    with pytest.raises(MovieMemError, match=r"^unknown claim reader 'vibes'"):
        get_policy("hybrid[claims=vibes]")  # refused when built now, not when the first claim is read


def test_a_plugin_reader_that_chooses_among_others_hands_each_its_own_settings(library: Library, plugins: None,
                                                                               tmp_path: Path):
    from moviemem.agents.readers.registry import get_reader, own_settings

    @own_settings(chooses=("json", "letters"))
    def written(settings: dict[str, Any], run: Any, question: Any) -> Any:
        """The JSON reader, whatever the backbone gives."""
        return get_reader("json", settings["json"], run, question)

    moviemem.register("reader", "written", written)
    backbone = ScriptedBackbone([JSON_ANSWER], cycle=True, capabilities={"logprobs": True})
    answers = _bench(library, tmp_path, "hybrid[reader=written(json.max_tokens=48, letters.rotations=one)]", backbone)
    assert all(a["choice"] == "A" for a in answers) and [r.max_tokens for r in backbone.calls] == [48, 48]
    with pytest.raises(MovieMemError, match=r"^reader written has no setting 'claims.rotations'; .* one of json, letters$"):
        get_policy("hybrid[reader=written(claims.rotations=one)]")
    with pytest.raises(MovieMemError, match=r"^reader json setting max_tokens='many': input should be a valid integer"):
        get_policy("hybrid[reader=written(json.max_tokens=many)]")
