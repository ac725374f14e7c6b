"""The benchmark runner: resume after a kill, caps, concurrency, the replay cache, invalid items.

Most tests use a fake answerer that calls the backbone once per query (so the runner's metering
and caps are exercised exactly) instead of a real policy; one test goes through Film.ask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from moviemem.agents.registry import parse_policy_spec
from moviemem.agents.types import Answer
from moviemem.backbones import Capabilities, Reply, ScriptedBackbone, Usage, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import read_log
from moviemem.eval.runner import bench_json, run_bench
from moviemem.foundation.errors import MovieMemError


def make_bench(n: int, films: int = 3) -> Benchmark:
    rows = [(i + 1, {"id": f"q{i:03d}", "film_id": f"film{i % films}", "question": f"Question {i}?",
                     "options": ["w", "x", "y", "z"], "answer": "ABCD"[i % 4], "category": ["plot", "setting"][i % 2]})
            for i in range(n)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "mem"), "mem.jsonl", "jsonl")


class FakeAnswerer:
    """Asks the backbone the question once and takes the first letter of the reply as the choice."""

    def __init__(self, delay: float = 0.0, fail: set[str] | None = None):
        self.delay = delay
        self.fail = fail or set()
        self.asked: list[tuple[str, str, str]] = []

    def __call__(self, film_id, query, policy, backbone):
        self.asked.append((policy, backbone.name, query.question))
        if query.question in self.fail:
            raise RuntimeError("retriever exploded")
        if self.delay:
            time.sleep(self.delay)
        reply = backbone.chat([user(f"[{policy}] {query.question}")], max_tokens=4)
        letter = reply.text.strip()[:1]
        ok = letter in "ABCD" and letter != ""
        return Answer(choice=letter if ok else None, text=reply.text, confidence=None, invalid=not ok, policy=policy,
                      backbone=backbone.name, usage=reply.usage, error=None if ok else f"unparseable reply {reply.text!r}")


def letter_for(request) -> str:
    n = int(request.messages[-1].text.split("Question ")[1].rstrip("?"))
    return "ABCD"[n % 4] if n % 3 else "B"


class PricedBackbone:
    """Costs one cent a call; answers A."""

    name = "priced"
    model_id = "priced-1"
    capabilities = Capabilities.all()

    def __init__(self):
        self.calls = 0

    def send(self, request):
        self.calls += 1
        return Reply(text="A", usage=Usage(input_tokens=100, output_tokens=1, cost_usd=0.01))


def keys(run_dir: Path) -> list[str]:
    return [json.loads(line)["key"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_every_item_answered_or_invalid_with_reason(tmp_path: Path):
    bench = make_bench(12)
    script = lambda req: "?" if "Question 5?" in req.messages[-1].text else letter_for(req)  # noqa: E731
    res = run_bench(bench, ["p1", "p2"], [ScriptedBackbone(script)], tmp_path / "run",
                    answerer=FakeAnswerer(fail={"Question 7?"}))
    assert res.total == 24 and res.answered + res.invalid == 24 and res.complete
    recs = read_log(tmp_path / "run")
    assert len(recs) == 24 and len({r.key for r in recs}) == 24
    invalid = [r for r in recs if r.status == "invalid"]
    assert {r.item_id for r in invalid} == {"q005", "q007"} and len(invalid) == 4
    assert all(r.reason for r in invalid)
    assert any("RuntimeError: retriever exploded" in r.reason for r in invalid)
    assert any("unparseable reply '?'" in r.reason for r in invalid)
    ok = [r for r in recs if r.status == "answered"]
    assert all(r.correct is not None and r.reason is None for r in ok)
    # the full Answer is stored, as plain JSON
    a = ok[0].answers["answer"]
    assert set(a.line()) >= {"choice", "text", "evidence", "trace", "usage", "invalid", "error"}
    assert a.usage.input_tokens > 0
    out = bench_json(res)
    assert set(out) >= {"run_dir", "items", "answered", "invalid", "backbone_calls", "cache_hits", "cost_usd", "results"}
    row = out["results"][0]
    assert set(row) == {"policy", "backbone", "n", "accuracy", "ci_low", "ci_high", "median_input_tokens"}
    assert out["items"] == 12 and out["answered"] == 20 and out["invalid"] == 4 and out["backbone_calls"] == 22
    # items 5 and 7 are wrong (invalid); of the rest, items with n % 3 == 0 get "B"
    right = sum(1 for i in range(12) if i not in (5, 7) and (i % 3 or "ABCD"[i % 4] == "B"))
    assert row["n"] == 12 and row["accuracy"] == pytest.approx(right / 12)


KILL_SCRIPT = r"""
import sys, time
sys.path.insert(0, {tests!r})
from test_runner import FakeAnswerer, make_bench, letter_for
from moviemem.backbones import ScriptedBackbone
from moviemem.eval.runner import run_bench
run_bench(make_bench(120), ["p1"], [ScriptedBackbone(letter_for)], {run!r}, answerer=FakeAnswerer(delay=0.05),
          concurrency=3)
"""


def test_resume_after_kill_mid_run(tmp_path: Path):
    run = tmp_path / "run"
    code = KILL_SCRIPT.format(tests=str(Path(__file__).parent), run=str(run))
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    results = run / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and results.read_text().count("\n") >= 8:
            break
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it could be killed: {proc.stderr.read().decode()}")
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = keys(run)
    assert 8 <= len(before) < 120
    # a line cut short by the kill: dropped on resume, its item answered again
    with results.open("a") as f:
        f.write('{"key": "p1\\tscripted\\tq999", "status": "answ')
    fake = FakeAnswerer()
    res = run_bench(make_bench(120), ["p1"], [ScriptedBackbone(letter_for)], run, answerer=fake, concurrency=3)
    after = keys(run)
    assert len(after) == 120 and len(set(after)) == 120  # nothing lost, nothing twice
    assert after[: len(before)] == before
    assert len(fake.asked) == 120 - len(before)  # only what was missing was asked again
    assert res.answered + res.invalid == 120 and res.spend.calls == 120 - len(before)
    assert results.read_text().endswith("\n")


def test_cost_cap_stops_cleanly_and_says_where(tmp_path: Path):
    bench = make_bench(20, films=1)  # one film: items run in file order
    priced = PricedBackbone()
    run = tmp_path / "run"
    res = run_bench(bench, ["p1"], [priced], run, answerer=FakeAnswerer(), max_cost_usd=0.05)
    assert priced.calls == 5 and res.answered == 5
    assert res.stopped and "cost cap $0.05 reached" in res.stopped
    assert "stopped after 5/20 items" in res.stopped and "item=q005" in res.stopped
    assert len(keys(run)) == 5
    assert bench_json(res)["stopped"] == res.stopped
    # the cap covers the whole run directory: the same cap stops at once, a higher one resumes
    res = run_bench(bench, ["p1"], [priced], run, answerer=FakeAnswerer(), max_cost_usd=0.05)
    assert priced.calls == 5 and res.stopped
    res = run_bench(bench, ["p1"], [priced], run, answerer=FakeAnswerer(), max_cost_usd=1.0)
    assert res.stopped is None and res.complete and priced.calls == 20
    assert len(set(keys(run))) == len(keys(run)) == 20


def test_cost_cap_with_concurrency_never_records_partial_items(tmp_path: Path):
    bench = make_bench(30)
    res = run_bench(bench, ["p1"], [PricedBackbone()], tmp_path / "run", answerer=FakeAnswerer(delay=0.01),
                    max_cost_usd=0.10, concurrency=4)
    assert res.stopped
    recs = read_log(tmp_path / "run")
    assert len(recs) == res.answered + res.invalid >= 10
    assert all(r.answers for r in recs)  # no half-answered item was written
    assert res.spend.cost_usd < 0.10 + 4 * 0.01 + 1e-9  # overshoot bounded by the calls in flight


def test_token_cap(tmp_path: Path):
    res = run_bench(make_bench(10), ["p1"], [PricedBackbone()], tmp_path / "run", answerer=FakeAnswerer(),
                    max_tokens=250)
    assert res.answered == 3 and "token cap 250 reached" in res.stopped


def test_cached_rerun_makes_no_backbone_calls(tmp_path: Path):
    bench = make_bench(9)
    first = ScriptedBackbone(letter_for)
    r1 = run_bench(bench, ["p1", "p2"], [first], tmp_path / "run1", answerer=FakeAnswerer(), cache=tmp_path / "cache")
    assert len(first.calls) == 18 and r1.spend.calls == 18 and r1.spend.cache_hits == 0
    second = ScriptedBackbone(letter_for)
    r2 = run_bench(bench, ["p1", "p2"], [second], tmp_path / "run2", answerer=FakeAnswerer(), cache=tmp_path / "cache")
    assert second.calls == [] and r2.spend.calls == 0 and r2.spend.cache_hits == 18
    j1, j2 = bench_json(r1), bench_json(r2)
    assert j2["backbone_calls"] == 0 and j2["cache_hits"] == 18
    assert [r["accuracy"] for r in j1["results"]] == [r["accuracy"] for r in j2["results"]]


def test_grid_order_concurrency_and_retry_invalid(tmp_path: Path):
    bench = make_bench(16, films=4)
    flaky = {"Question 3?"}
    res = run_bench(bench, ["a", "b"], [ScriptedBackbone(letter_for, name="s1"), ScriptedBackbone(letter_for, name="s2")],
                    tmp_path / "run", answerer=FakeAnswerer(fail=flaky), concurrency=4)
    assert res.total == 64 and res.complete and res.invalid == 4
    c = Counter(r.config for r in read_log(tmp_path / "run"))
    assert set(c.values()) == {16} and len(c) == 4
    res = run_bench(bench, ["a", "b"], [ScriptedBackbone(letter_for, name="s1"), ScriptedBackbone(letter_for, name="s2")],
                    tmp_path / "run", answerer=FakeAnswerer(), retry_invalid=True)
    assert res.invalid == 0 and res.answered == 64 and "retrying 4 invalid item(s)" in res.warnings[0]
    assert len(set(keys(tmp_path / "run"))) == len(keys(tmp_path / "run")) == 64


def test_refuses_bad_grids(tmp_path: Path):
    with pytest.raises(MovieMemError, match="no policies"):
        run_bench(make_bench(2), [], ["scripted"], tmp_path / "r", answerer=FakeAnswerer())
    with pytest.raises(MovieMemError, match="named twice"):
        run_bench(make_bench(2), ["a", "a"], ["scripted"], tmp_path / "r", answerer=FakeAnswerer())
    with pytest.raises(MovieMemError, match="needs a library or an answerer"):
        run_bench(make_bench(2), ["a"], ["scripted"], tmp_path / "r")


def test_policy_spec():
    assert parse_policy_spec("subtitles") == ("subtitles", {})
    assert parse_policy_spec("end-to-end[frames=64,audio=true,mode=x]") == ("end-to-end", {"frames": 64, "audio": True, "mode": "x"})
    with pytest.raises(MovieMemError):
        parse_policy_spec("x[frames]")
