"""`moviemem bench --plan`: what a bench would take, with no model called (issue 57)."""

from __future__ import annotations

from pathlib import Path

import pytest
from text_film import text_film_bench

from moviemem.backbones import ScriptedBackbone
from moviemem.backbones.pace import PaceBook
from moviemem.eval.formats import load_benchmark
from moviemem.eval.plan import PlanningBackbone, plan_bench, plan_json, stand_in_reply
from moviemem.eval.runner import read_log, run_bench

CUES = [(float(10 * i), float(10 * i + 4), line) for i, line in enumerate(
    ["Anna hid the key in the attic.", "Tom searched the cellar all night.", "The inn burned down in winter.",
     "Anna left town on the morning train.", "Tom never found the key."])]
ROWS = [{"id": f"q{i}", "film_id": "keys", "question": q, "options": ["the attic", "the cellar", "the inn", "the shop"],
         "answer": a} for i, (q, a) in enumerate([("Where did Anna hide the key?", "A"),
                                                   ("Where did Tom search?", "B"), ("What burned down?", "C")])]
JSON_REPLY = '{"answer": "A", "confidence": 2}'


@pytest.fixture(scope="module")
def film(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    return text_film_bench(tmp_path_factory.mktemp("plan"), CUES, ROWS, "keys", "Keys")


def _scripted() -> ScriptedBackbone:
    return ScriptedBackbone([JSON_REPLY], cycle=True)


def test_a_plan_calls_no_model_and_counts_what_the_run_then_sends(film, tmp_path: Path) -> None:
    lib, path = film
    bench = load_benchmark(path, library=lib)
    never = ScriptedBackbone([])  # any call would fail: it has no reply to give
    rows = plan_bench(bench, ["closed-book", "subtitles"], [never], lib, cache=tmp_path / "cache")
    assert not never.calls
    by = {r.policy: r for r in rows}
    assert all(r.exact and r.items == 3 and r.tally.calls == 3 and r.tally.cached == 0 for r in rows)
    assert by["subtitles"].tally.input_tokens > by["closed-book"].tally.input_tokens + 3 * 30  # the transcript

    run_bench(bench, ["closed-book", "subtitles"], [_scripted()], tmp_path / "run", library=lib, cache=tmp_path / "cache")
    for rec_policy in ("closed-book", "subtitles"):
        recs = [r for r in read_log(tmp_path / "run") if r.policy == rec_policy]
        # the scripted backbone counts a prompt as the plan does (4 characters a token): the estimate is the bill
        assert sum(r.usage.input_tokens for r in recs) == by[rec_policy].tally.input_tokens
        assert sum(a.calls for r in recs for a in r.answers.values()) == by[rec_policy].tally.calls
        assert sum(r.usage.output_tokens for r in recs) <= by[rec_policy].tally.output_tokens

    # a rerun elsewhere would take every call from the cache; the same run directory would ask nothing again
    again = {r.policy: r for r in plan_bench(bench, ["closed-book", "subtitles"], [never], lib, cache=tmp_path / "cache")}
    assert all(r.tally.cached == r.tally.calls == 3 and r.tally.input_tokens == 0 for r in again.values())
    resumed = plan_bench(bench, ["closed-book"], [never], lib, run_dir=tmp_path / "run", cache=tmp_path / "cache")
    assert (resumed[0].items, resumed[0].already, resumed[0].tally.calls) == (0, 3, 0)
    assert not never.calls


def test_a_policy_whose_calls_follow_the_replies_is_a_bound(film) -> None:
    lib, path = film
    [row] = plan_bench(load_benchmark(path, library=lib), ["archival"], [ScriptedBackbone([])], lib)
    assert not row.exact and "tool loop" in (row.depends or "") and row.tally.calls >= 3
    assert plan_json([row])["rows"][0]["calls_bound"] == "at least"


def test_cost_from_the_price_table_and_wall_time_from_the_measured_pace(tmp_path: Path) -> None:
    from moviemem.backbones import Request, user

    priced = ScriptedBackbone([])
    priced.price_key = "gpt-5-mini"  # 0.25 $/M input, 2 $/M output
    book = PaceBook(tmp_path / "pace.json")
    book.record("m", read=1000, read_s=2.0, written=100, write_s=4.0)  # 500 read / 25 written tokens a second
    priced.paces, priced.pace_key = book, "m"  # type: ignore[attr-defined]
    stand_in = PlanningBackbone(priced, "priced", None)
    tally = stand_in.begin()
    stand_in.send(Request.build([user("x" * 4000)], max_tokens=50))  # 1,000 input tokens, at most 50 out
    assert (tally.input_tokens, tally.output_tokens) == (1000, 50)
    assert tally.cost_usd == pytest.approx((1000 * 0.25 + 50 * 2.0) / 1e6)
    assert tally.wall_s == pytest.approx(1000 / 500 + 50 / 25)
    assert PlanningBackbone(ScriptedBackbone([]), "s", None).pace is None  # never measured: wall time unknown


def test_stand_in_replies_keep_a_policy_on_its_path() -> None:
    from moviemem.backbones import Request, user

    r = stand_in_reply(Request.build([user("q")], json_schema={
        "type": "object", "required": ["answer", "confidence"],
        "properties": {"answer": {"type": "string", "enum": ["A", "B"]}, "confidence": {"type": "integer", "enum": [1, 2, 3]}}}))
    assert r.data == {"answer": "A", "confidence": 1} and not r.invalid
    lp = stand_in_reply(Request.build([user("q")], max_tokens=1, logprobs=20))
    assert max(lp.logprobs[0], key=lp.logprobs[0].get) in ("A", "yes")


def test_bench_plan_command_prints_the_table_and_json(film, cli, tmp_path: Path) -> None:
    lib, path = film
    r = cli("bench", str(path), "--policies", "closed-book,archival", "--backbones", "scripted", "--plan",
            "--out", str(tmp_path / "run"), "--library", str(lib.path), library=False)
    assert r.code == 0, r.err
    assert "closed-book" in r.out and "≥ " in r.out and "no model was called" in r.err and "archival" in r.err
    assert not (tmp_path / "run").exists()  # nothing written
    j = cli("bench", str(path), "--policies", "closed-book", "--backbones", "scripted", "--plan", "--json",
            "--out", str(tmp_path / "run"), "--library", str(lib.path), library=False).json()
    assert j["rows"][0]["calls"] == 3 and j["rows"][0]["calls_bound"] == "exact" and j["total"]["cost_usd"] == 0.0
    bad = cli("bench", str(path), "--policies", "nope", "--backbones", "scripted", "--plan", "--library", str(lib.path),
              library=False)
    assert bad.code == 2 and "nope" in bad.err
