"""Full context on a feature film (issue 44): the compact transcript, one shared prefix per film, prompts
longer than the context recorded as `unfit` (never scored, never paired, no evidence metrics), and the
official MF² claim pairs with their granularity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from text_film import text_film_library

from moviemem import Library
from moviemem.agents.calls import compact_text, world_state
from moviemem.agents.registry import get_policy
from moviemem.agents.types import Question
from moviemem.backbones import Reply, Request, ScriptedBackbone
from moviemem.backbones.types import CONTEXT
from moviemem.eval.formats import load_benchmark
from moviemem.eval.report import write_report
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench
from moviemem.retrievers.types import Evidence

CUES = [(float(8 * i), float(8 * i + 3), f"Line {i} about the harbour and the {['boat', 'key', 'map'][i % 3]}.")
        for i in range(40)]




@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return text_film_library(tmp_path_factory.mktemp("fullctx"), CUES, "harbour", "Harbour")


def test_compact_text_marks_each_minute_once_and_drops_repeated_rows() -> None:
    rows = [Evidence("utterance", "f", t, t + 2, text) for t, text in
            [(5, "Hello."), (9, "Hello."), (30, "Where is  the key?"), (64, "In the boat."), (70, "Good."), (3700, "Late.")]]
    text = compact_text(rows)
    assert text.splitlines() == ["[0:05] Hello.", "Where is the key?", "[1:04] In the boat.", "Good.", "[1:01:40] Late."]
    assert len(text) < len(world_state(rows)) / 2  # two times on every line cost more than the words


def test_subtitles_puts_the_transcript_first_so_a_films_questions_share_it(library: Library) -> None:
    film = library.film("harbour")
    backbone = ScriptedBackbone(['{"answer": "TRUE", "confidence": 2}'], cycle=True)
    policy = get_policy("subtitles")
    for claim in ("The key is in the boat.", "The map is in the harbour."):
        ans = policy.answer(film, Question(claim, kind="claim"), backbone)
        assert not ans.invalid and ans.reason is None and len(ans.evidence) == len(CUES)
    first, second = (r.messages[-1].text for r in backbone.calls)
    shared = len(first) - len(first.split("The key is in the boat.")[0].rstrip())
    assert first.split("The key is")[0] == second.split("The map is")[0]  # everything before the statement
    assert first.index("Line 39") < first.index("The key is in the boat.")  # the statement comes last
    assert shared > 0 and "[0:00] Line 0" in first and "00:00:00 - 00:00:03" not in first


def _short_context(limit: int):
    """A backbone whose context holds `limit` characters: longer prompts fail as llama.cpp's do."""
    def reply(req: Request) -> Reply:
        if sum(len(m.text) for m in req.messages) > limit:
            return Reply.failed("prompt has 9999 tokens; the context holds 100", finish_reason=CONTEXT)
        return Reply(text='{"answer": "TRUE", "confidence": 2}')
    return reply


def test_a_prompt_longer_than_the_context_is_unfit_not_scored_not_paired(library: Library, tmp_path: Path) -> None:
    film = library.film("harbour")
    ans = get_policy("subtitles").answer(film, Question("The key is in the boat.", kind="claim"),
                                         ScriptedBackbone(_short_context(2000)))
    assert ans.invalid and ans.reason == CONTEXT and ans.evidence == []  # nothing was shown to the model
    assert any("not read" in s.data.get("text", "") for s in ans.trace if s.kind == "note")

    items = tmp_path / "claims.jsonl"
    items.write_text("".join(json.dumps({"id": f"c{i}", "film_id": "harbour", "true_claim": f"The key is in box {i}.",
                                         "false_claim": f"The key is in crate {i}.", "evidence": [[8.0, 11.0]]}) + "\n"
                             for i in range(3)))
    run = tmp_path / "run"
    res = run_bench(load_benchmark(items), ["closed-book", "subtitles"], [ScriptedBackbone(_short_context(2000))],
                    run, library=library)
    assert res.unfit == 3 and res.complete and any("not sent" in w for w in res.warnings)
    recs = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    unfit = [r for r in recs if r["policy"] == "subtitles"]
    assert {r["status"] for r in unfit} == {"unfit"} and all(r["correct"] is None and "evidence" not in r for r in unfit)
    assert all(r["reason"].startswith("context:") for r in unfit)
    rows = {r["policy"]: r for r in RunLog(run).rows}
    assert rows["subtitles"]["n"] == 0 and rows["subtitles"]["unfit_n"] == 3 and not rows["subtitles"]["evidence_n"]
    assert rows["closed-book"]["n"] == 3 and rows["closed-book"]["unfit_n"] == 0
    md = write_report(run, baseline="closed-book")["report"].read_text()
    assert "| subtitles | scripted | 0 | 3 |" in md  # n 0, not sent 3: no accuracy for prompts never sent
    assert "## Paired comparison" not in md  # no item has both answers, so nothing is paired
    assert "Incomplete configurations" not in md
    page = (run / "inspector" / "items" / "1.html").read_text()
    assert "not sent: the prompt was longer than the backbone" in page

    # a larger context (another model id: the replay cache keeps the first one's failures) and --retry-invalid
    # ask them again
    larger = ScriptedBackbone(_short_context(10**6), model_id="scripted-long-context")
    res = run_bench(load_benchmark(items), ["closed-book", "subtitles"], [larger],
                    run, library=library, retry_invalid=True)
    assert res.unfit == 0 and {r["policy"]: r for r in RunLog(run).rows}["subtitles"]["n"] == 3


def test_official_mf2_pairs_keep_their_granularity_and_report_by_it(library: Library, tmp_path: Path) -> None:
    csv = tmp_path / "mf2_official.csv"
    csv.write_text("movie_id,video,claim_id,true_claim,false_claim,granularity,category\n"
                   '5,5.mp4,0,"The town is called ""Suddenly"".","The town is called ""Gradually"".",Single,Event/Entity\n'
                   "5,5.mp4,1,The officer buys a gun.,The officer buys a bat.,Multi,Event/Entity\n"
                   "5,5.mp4,2,The boy is brave.,The boy is afraid.,Global,Character\n", encoding="utf-8")
    bench = load_benchmark(csv)
    assert [(it.id, it.granularity, it.category) for it in bench.items] == [
        ("mf2-5-0", "Single", "Event/Entity"), ("mf2-5-1", "Multi", "Event/Entity"), ("mf2-5-2", "Global", "Character")]
    assert bench.items[0].true_claim == 'The town is called "Suddenly".'

    def answer(film_id, query, policy, backbone):  # right on every pair but the Multi one
        from moviemem.agents.types import Answer

        wrong = "buys a bat" in query.question
        verdict = "TRUE" if ("is called \"Suddenly\"" in query.question or "gun" in query.question or wrong
                             or "brave" in query.question) else "FALSE"
        return Answer(choice=verdict, text=verdict, confidence=None, invalid=False, policy=policy, backbone="scripted")

    run = tmp_path / "official"
    run_bench(bench, ["p"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer)
    row = RunLog(run).rows[0]
    assert row["per_granularity"]["Multi"]["value"] == 0 and row["per_granularity"]["Single"]["value"] == 1
    md = write_report(run, inspector=False)["report"].read_text()
    assert "## Per granularity (MF²: Single, Multi, Global)" in md and "| Multi | 0.0 [0.0, 79.3] |" in md
    assert "## Per category" in md and "| Character | 100.0 [20.7, 100.0] |" in md
