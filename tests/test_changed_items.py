"""A rerun into a run directory whose benchmark reuses ids for other questions (issue 54 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runner import FakeAnswerer, letter_for

from moviemem.backbones import ScriptedBackbone
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import read_header, read_log
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError


def _bench(questions: list[int]) -> Benchmark:
    """Items q0, q1, ... asking 'Question N?' for the N given, in order: the same ids, other questions."""
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Question {n}?", "options": ["w", "x", "y", "z"],
                     "answer": "ABCD"[n % 4]}) for i, n in enumerate(questions)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "mem"), "mem.jsonl", "jsonl")


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.name.startswith(".")}


def test_changed_items_under_old_ids_are_refused_then_asked_again_with_reask_changed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = ScriptedBackbone(letter_for, name="s")
    run_bench(_bench([0, 1, 2, 3]), ["p"], [first], run, answerer=FakeAnswerer())
    assert len(first.calls) == 4 and all(r.item_digest for r in read_log(run))
    before = _files(run)

    changed = _bench([0, 1, 12, 13])  # q2 and q3 now ask other questions
    again = ScriptedBackbone(letter_for, name="s")
    with pytest.raises(MovieMemError, match=r"^2 item\(s\) changed since .* \(first: 'q2'\); pass --reask-changed"):
        run_bench(changed, ["p"], [again], run, answerer=FakeAnswerer())
    assert again.calls == [] and _files(run) == before  # refused before anything was written

    spent = sum(r.spend.calls for r in read_log(run))
    res = run_bench(changed, ["p"], [again], run, answerer=FakeAnswerer(), reask_changed=True)
    assert len(again.calls) == 2 and res.complete
    assert any("asking 2 changed item(s) again" in w for w in res.warnings)
    recs = {r.item_id: r for r in read_log(run)}
    assert len(recs) == len(read_log(run)) == 4
    asked = {it.id: it for it in changed.items}
    assert [recs[i].answers["answer"].text for i in ("q2", "q3")] == [letter_for_n(12), letter_for_n(13)]
    assert recs["q2"].item_digest != json.loads(before["results.jsonl"].splitlines()[2])["item_digest"]
    assert read_header(run).retired_spend.calls == 2 and spent == 4  # the superseded answers' calls stay counted
    items = {json.loads(line)["id"]: json.loads(line) for line in (run / "items.jsonl").read_text().splitlines()}
    assert items["q2"]["question"] == asked["q2"].question == "Question 12?"
    assert RunLog(run).rows[0]["n"] == 4

    third = ScriptedBackbone(letter_for, name="s")  # the same benchmark again: nothing to ask, nothing refused
    res = run_bench(changed, ["p"], [third], run, answerer=FakeAnswerer())
    assert third.calls == [] and res.complete and not res.warnings


def letter_for_n(n: int) -> str:
    return "ABCD"[n % 4] if n % 3 else "B"


def test_records_without_a_digest_are_matched_by_id_and_the_run_says_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(_bench([0, 1, 2]), ["p"], [ScriptedBackbone(letter_for, name="s")], run, answerer=FakeAnswerer())
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for line in lines:
        del line["item_digest"]  # as a moviemem before the digest wrote them
    (run / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    again = ScriptedBackbone(letter_for, name="s")
    res = run_bench(_bench([0, 1, 22]), ["p"], [again], run, answerer=FakeAnswerer())
    assert again.calls == [] and res.complete
    assert any("3 earlier answer(s)" in w and "matched to this benchmark's items by id alone" in w for w in res.warnings)


def test_bench_command_refuses_changed_items_in_one_line(tmp_path: Path, cli) -> None:
    srt = tmp_path / "f.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n")
    assert cli("ingest", "--text", str(srt), "--film-id", "f", "--json").code == 0
    row = {"id": "s1", "film_id": "f", "question": "Who is missing?", "options": ["Williams", "Hildy"], "answer": "A"}
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(row) + "\n")
    b.write_text(json.dumps({**row, "question": "Who speaks?", "answer": "B"}) + "\n")
    run = tmp_path / "run"
    common = ("--policies", "closed-book", "--backbones", "scripted:A", "--out", str(run))
    assert cli("bench", str(a), *common).code == 0
    r = cli("bench", str(b), *common)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "1 item(s) changed" in r.err and "--reask-changed" in r.err
    r = cli("bench", str(b), *common, "--reask-changed", "--json")
    assert r.code == 0, r.err
    [rec] = read_log(run)
    assert rec.correct is False and rec.answers["answer"].choice == "A"  # scored against the new item (B)
