"""Runs (issue 18, items 8-10): one writer per run directory, honest records of transport faults,
a token cap that holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_servers import FakeOpenAI, FakeResponse

from moviemem.agents.parsing import parse_answer
from moviemem.agents.types import Answer, Question
from moviemem.backbones import user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import read_log
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench


def _bench(n: int) -> Benchmark:
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Question {i}?", "options": ["red", "blue"],
                     "answer": "B"}) for i in range(n)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl")


def _parsing_answerer(film_id, query, policy, backbone):
    """One call, the reply read by the policies' own parser."""
    reply = backbone.chat([user(query.question)], max_tokens=8)
    got = parse_answer(reply, Question.make(query.question, ["red", "blue"]))
    return Answer(choice=got.choice, text=got.text, confidence=None, invalid=got.invalid, policy=policy,
                  backbone=backbone.name, usage=reply.usage, error=got.error)


# --- item 9: transport faults are no answers ------------------------------------------------------

def test_transport_faults_are_transient_never_cached_and_asked_again(tmp_path: Path) -> None:
    with FakeOpenAI() as srv:
        spec = f"openai-compatible:{srv.base_url}#m"
        srv.push(FakeResponse(body="The answer is B", headers={"content-type": "text/plain"}),  # not a completion
                 FakeResponse(body={"id": "x", "object": "chat.completion", "choices": []}))  # no choices
        kw = dict(answerer=_parsing_answerer, cache=tmp_path / "cache", cache_mode="readwrite")
        first = run_bench(_bench(2), ["p"], [spec], tmp_path / "run", **kw)
        recs = read_log(tmp_path / "run")
        assert [r.status for r in recs] == ["transient", "transient"]  # B was never scored from the body
        assert all(r.reason.startswith("transport fault") for r in recs)
        assert not first.complete and any("rerun to ask them again" in w for w in first.warnings)
        assert RunLog(tmp_path / "run").rows == []  # nothing to score yet

        srv.push(FakeOpenAI.completion("B"), FakeOpenAI.completion("B"))
        again = run_bench(_bench(2), ["p"], [spec], tmp_path / "run", **kw)  # a plain rerun, no --retry-invalid
        assert again.complete and again.answered == 2 and again.spend.calls == 2  # asked again: nothing was cached
        assert any("retrying 2 item(s) that hit transport faults" in w for w in again.warnings)
        assert [r.status for r in read_log(tmp_path / "run")] == ["answered", "answered"]
        assert RunLog(tmp_path / "run").rows[0]["accuracy"]["value"] == 1.0


def test_a_server_the_policy_could_not_reach_is_a_transport_fault_asked_again(tmp_path: Path) -> None:
    """A policy's own server (Letta) down is not the item's fault: the item is not scored, and a plain rerun asks it again."""
    from moviemem.backbones import ScriptedBackbone
    from moviemem.foundation.errors import UnreachableError

    down = [True]

    def answerer(film_id, query, policy, backbone):
        if down[0]:
            raise UnreachableError("the Letta server at http://127.0.0.1:1 did not answer")
        return _parsing_answerer(film_id, query, policy, backbone)

    first = run_bench(_bench(2), ["p"], [ScriptedBackbone(["B"], cycle=True)], tmp_path / "run", answerer=answerer)
    recs = read_log(tmp_path / "run")
    assert [r.status for r in recs] == ["transient", "transient"] and not first.complete
    assert all(r.reason.startswith("transport fault") and "did not answer" in r.reason for r in recs)
    down[0] = False
    again = run_bench(_bench(2), ["p"], [ScriptedBackbone(["B"], cycle=True)], tmp_path / "run", answerer=answerer)
    assert again.complete and [r.status for r in read_log(tmp_path / "run")] == ["answered", "answered"]


def test_parse_answer_reads_only_the_models_reply() -> None:
    from moviemem.backbones import Reply

    q = Question.make("Which?", ["red", "blue"])
    body = Reply.failed("transport fault: malformed response body", raw="The answer is B", transient=True)
    got = parse_answer(body, q)
    assert got.invalid and got.choice is None and got.error.startswith("transport fault")


# --- item 8: one writer per run directory -----------------------------------------------------------

def test_a_second_bench_on_the_same_run_directory_is_refused(tmp_path: Path) -> None:
    from filelock import FileLock

    from moviemem.backbones import ScriptedBackbone
    from moviemem.foundation.errors import MovieMemError

    run = tmp_path / "run"
    first = run_bench(_bench(2), ["p"], [ScriptedBackbone(["B"], cycle=True)], run, answerer=_parsing_answerer)
    assert first.complete
    with FileLock(str(run / ".writer.lock")):  # another process's bench holds the directory
        b = ScriptedBackbone(["B"], cycle=True)
        with pytest.raises(MovieMemError, match="another bench or judge is writing to"):
            run_bench(_bench(4), ["p"], [b], run, answerer=_parsing_answerer, retry_invalid=True)
        assert b.calls == []  # nothing asked, nothing paid, nothing rewritten
    assert len(read_log(run)) == 2
    after = run_bench(_bench(4), ["p"], [ScriptedBackbone(["B"], cycle=True)], run, answerer=_parsing_answerer)
    assert after.complete and len(read_log(run)) == 4  # the lock is free again once the holder is done


# --- item 10: the token cap holds back calls whose output could not fit -----------------------------

def test_token_cap_reserves_each_calls_output_limit_before_sending(tmp_path: Path) -> None:
    from moviemem.backbones import Capabilities, Reply, Usage

    class Verbose:  # every reply uses its whole output limit
        name = model_id = "verbose"
        capabilities = Capabilities(text=True)

        def send(self, request):
            return Reply(text="B", usage=Usage(input_tokens=5, output_tokens=request.max_tokens))

    def answerer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=40)
        return Answer(choice="B", text="blue", confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                      usage=reply.usage)

    res = run_bench(_bench(10), ["p"], [Verbose()], tmp_path / "run", answerer=answerer,
                    max_tokens=100)
    assert res.stopped and "token cap 100" in res.stopped
    # two calls (2 x 45 = 90) fit; a third could produce 40 more and is never sent (before: 135 spent)
    assert res.spend.calls == 2 and res.spend.tokens == 90 <= 100


def test_ask_with_a_backbone_that_gives_no_reply_fails_while_a_bad_reply_is_an_answer(tmp_path: Path, cli) -> None:
    """`moviemem ask` exits 2 when the backbone never replied (a script can tell it from an invalid
    answer, which exits 0), still showing what was retrieved."""
    srt = tmp_path / "a.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n")
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    with FakeOpenAI() as srv:
        spec = f"openai-compatible:{srv.base_url}#m"
        args = ("ask", "t1", "Who is asked about?", "--option", "Williams", "--option", "Nobody", "--policy", "subtitles",
                "--backbone", spec)
        srv.push(FakeResponse(body={"id": "x", "object": "chat.completion", "choices": []}))  # no reply in it
        r = cli(*args)
        assert r.code == 2 and "invalid (transport fault" in r.out and "Where is Williams?" in r.out
        assert r.err.strip().splitlines()[-1].startswith("error: openai-compatible") and "gave no reply to 1 of 1" in r.err
        srv.push(FakeResponse(body={"id": "x", "object": "chat.completion", "choices": []}))
        r = cli(*args, "--json")
        assert r.code == 2 and json.loads(r.out)["usage"]["faults"] == 1
        srv.push(FakeOpenAI.completion("I cannot tell."))  # a reply, just not an answer
        r = cli(*args, "--json")
        assert r.code == 0 and json.loads(r.out)["invalid"] and json.loads(r.out)["usage"]["faults"] == 0
