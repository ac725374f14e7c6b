"""Issue 61, item 5: every reader marks the evidence its answer rests on, and the JSON fallback says so.

The letter and claim readers score one token, so after the answer is read one short follow-up in the same
conversation asks for the supporting block's number (agents/readers/cite.py). Scripted backbones only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from text_film import text_film_library

from moviemem.agents import ask
from moviemem.agents.base import Run
from moviemem.agents.readers.base import Reading
from moviemem.agents.readers.cite import block_number, cite
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.eval import evidence as ev
from moviemem.eval.formats import load_benchmark
from moviemem.eval.log import log_grid
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError
from moviemem.retrievers.packing import Lines
from moviemem.retrievers.types import Evidence

OPTIONS = ["a lighthouse", "a bakery", "a cinema", "a bank"]
FILLER = ["The weather has been strange this week.", "Did you bring the papers from the office?",
          "I never liked the long road to town.", "We should eat before the others come back."]
CUES = [(10.0 * i, 10.0 * i + 4, FILLER[i % len(FILLER)]) for i in range(20)]
CUES += [(205.0, 208.0, "Sara, tell me where your uncle works."),
         (208.5, 212.0, "He keeps the old lighthouse on the northern cliffs.")]
CUES += [(220.0 + 10 * i, 224.0 + 10 * i, FILLER[(i + 1) % len(FILLER)]) for i in range(20)]
QUESTION = "Where does Sara's uncle work?"


@pytest.fixture(scope="module")
def film(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("citations")
    lib = text_film_library(root, CUES, "cliffs", "Cliffs")
    return lib, lib.film("cliffs"), root


def _lp(**alts: float) -> Reply:
    return Reply(text=max(alts, key=alts.get), logprobs=[{k.removeprefix("_"): v for k, v in alts.items()}])


def _block(eid: str, ans) -> Evidence:
    step = next(s for s in ans.trace if s.kind == "cite")
    return next(e for e in ans.evidence if e.id == step.data["ids"][eid])


def test_letter_reader_cites_the_block_the_follow_up_names(film) -> None:
    """The letters are read first (two orders), then the last order's conversation goes on: the model's letter
    as its turn and the question for a block number, whose log-probabilities pick the cited block."""
    _, f, _ = film
    letters = [_lp(B=-0.2, A=-1.5, C=-3.0, D=-4.0), _lp(C=-0.3, D=-1.4, A=-3.0, B=-4.0)]  # B, then B as C reversed
    b = ScriptedBackbone([*letters, _lp(_2=-0.1, _1=-2.5, E=-3.0)], capabilities={"logprobs": True})
    ans = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=b)
    assert (ans.choice, ans.invalid) == ("B", False) and len(b.calls) == 3
    last, follow = b.calls[1], b.calls[2]
    assert [m.role for m in follow.messages] == ["system", "user", "assistant", "user"]
    assert follow.messages[:2] == last.messages  # the prompt just read: a local model reads only the new turns
    assert follow.messages[2].text == "C"  # option B shown third in the reversed order
    assert follow.messages[3].text.startswith("Which evidence block supports that answer best?")
    assert (follow.max_tokens, follow.logprobs) == (1, 20)
    cited = [e for e in ans.evidence if e.cited]
    assert cited == [_block("E2", ans)] and len(ans.evidence) > 1
    step = next(s for s in ans.trace if s.kind == "cite")
    assert step.data["cited"] == ["E2"] and step.data["p_first_token"]["E2"] > 0.9
    assert {"input_tokens", "read_tokens", "latency_s"} <= set(step.data)
    # the letter is read before the follow-up: without it, the same answer from the same two calls
    plain = ScriptedBackbone(letters, capabilities={"logprobs": True})
    none = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=plain, cite="none")
    assert (none.choice, none.confidence, len(plain.calls)) == (ans.choice, ans.confidence, 2)
    assert not any(e.cited for e in none.evidence) and not any(s.kind == "cite" for s in none.trace)
    with pytest.raises(MovieMemError, match="unknown cite"):
        ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=plain, cite="always")


def test_a_follow_up_without_a_block_number_cites_nothing_and_keeps_the_answer(film) -> None:
    _, f, _ = film
    b = ScriptedBackbone([_lp(A=-0.1, B=-2.0), _lp(Hmm=-0.1, The=-0.5)], capabilities={"logprobs": True})
    ans = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=b, letter_rotations="one")
    assert (ans.choice, ans.invalid) == ("A", False) and not any(e.cited for e in ans.evidence)
    step = next(s for s in ans.trace if s.kind == "cite")
    assert step.data["cited"] == [] and "no block number" in step.data["error"]
    assert any(s.kind == "note" and s.data["text"].startswith("no citation:") for s in ans.trace)
    # a follow-up longer than the backbone's context: no citation, and the answer read before it stays valid
    from moviemem.backbones.types import CONTEXT

    b = ScriptedBackbone([_lp(A=-0.1, B=-2.0), Reply.failed("too long", finish_reason=CONTEXT)],
                         capabilities={"logprobs": True})
    ans = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=b, letter_rotations="one")
    assert (ans.choice, ans.invalid, ans.reason) == ("A", False, None) and not any(e.cited for e in ans.evidence)


def test_claim_reader_cites_after_its_verdict(film) -> None:
    """A claim's verdict is the model's yes or no in the follow-up conversation, which asks for the block."""
    _, f, _ = film
    b = ScriptedBackbone([_lp(yes=math.log(0.9), no=math.log(0.1)), _lp(yes=math.log(0.5), no=math.log(0.5)),
                          _lp(_1=-0.05, _2=-3.0)], capabilities={"logprobs": True})
    ans = ask(f, "Sara's uncle keeps the lighthouse.", policy="hybrid", backbone=b, kind="claim", claims="calibrated")
    assert ans.choice == "TRUE" and len(b.calls) == 3
    follow = b.calls[2]
    assert follow.messages[1].text.split("Statement:")[0] == b.calls[0].messages[-1].text.split("Statement:")[0]
    assert "Statement: Sara's uncle keeps the lighthouse." in follow.messages[1].text
    assert follow.messages[2].text == "yes"
    assert [e for e in ans.evidence if e.cited] == [_block("E1", ans)]


def _reading(f, n: int) -> Reading:
    ids = {f"E{i}": Evidence("utterance", "cliffs", float(i), i + 0.5, f"line {i}", id=f"utterance:{i}")
           for i in range(1, n + 1)}
    return Reading(f, Question.make(QUESTION, OPTIONS), ids, "\n".join(f"[{k}] {e.text}" for k, e in ids.items()),
                   Lines(f))


def test_two_digit_block_numbers_are_written_out_where_the_first_digit_opens_several(film) -> None:
    """A tokenizer that writes 12 as '1', '2' gives the first digit only: where it opens several numbers, one
    short greedy reply says which; a digit that opens one number needs no second call."""
    _, f, _ = film
    b = ScriptedBackbone([_lp(_1=-0.2, _3=-1.8), "12"], capabilities={"logprobs": True})
    run = Run(b)
    reading = _reading(f, 12)
    run.show(reading.shown)
    assert cite(run, reading, _prompt(), "text", "A") == ["E12"]
    assert len(b.calls) == 2 and b.calls[1].logprobs == 0 and b.calls[1].max_tokens == 4
    assert [e.id for e in run.evidence.values() if e.cited] == ["utterance:12"]
    b = ScriptedBackbone([_lp(_3=-0.2, _1=-1.8)], capabilities={"logprobs": True})
    assert cite(Run(b), _reading(f, 12), _prompt(), "text", "A") == ["E3"] and len(b.calls) == 1
    b = ScriptedBackbone([_lp(_1=-0.2), "1"], capabilities={"logprobs": True})
    assert cite(Run(b), _reading(f, 12), _prompt(), "text", "A") == ["E1"]
    assert [block_number(t) for t in ("3", " 3", "[E3]", "E12.", "E", "three")] == ["3", "3", "3", "12", None, None]


def _prompt():
    from moviemem.agents.prompts import READ_LETTER

    return READ_LETTER


def test_json_fallback_is_said_in_the_trace_and_counted_in_the_report(film, tmp_path: Path) -> None:
    """A backbone without log-probabilities: hybrid's auto reader writes JSON instead, and says so (a note and
    the parse step's `reader_fallback`); asked for JSON, it is no fallback. The report counts the fallbacks."""
    lib, f, root = film
    reply = '{"answer": "A", "confidence": 3, "evidence": ["E1"]}'
    ans = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=ScriptedBackbone([reply]))
    notes = [s.data["text"] for s in ans.trace if s.kind == "note"]
    assert any("JSON fallback (scripted gives no log-probabilities)" in n for n in notes)
    parse = [s for s in ans.trace if s.kind == "parse"][-1]
    assert parse.data["how"] == "json" and parse.data["reader_fallback"] == "json"
    assert any(e.cited for e in ans.evidence)  # the JSON reader cites in its reply
    asked = ask(f, QUESTION, OPTIONS, policy="hybrid", backbone=ScriptedBackbone([reply]), reader="json")
    assert not any("JSON fallback" in s.data.get("text", "") for s in asked.trace)
    assert "reader_fallback" not in [s for s in asked.trace if s.kind == "parse"][-1].data
    items = root / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "film_id": "cliffs", "question": QUESTION, "options": OPTIONS,
                                 "answer": "A", "category": "setting", "evidence": [[205.0, 212.0]]}) + "\n")
    run_bench(load_benchmark(items), ["hybrid", "hybrid[reader=json]"], [ScriptedBackbone([reply], cycle=True)],
              tmp_path / "run", answerer=None, library=lib)
    _, grid = log_grid(tmp_path / "run", slim=True)  # as the report reads it: lean records keep parse steps
    lines = ev.json_fallbacks(grid)
    assert "## Answers read by the JSON fallback" in lines
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in "\n".join(lines).splitlines()
            if line.startswith("| hybrid")]
    assert rows == [["hybrid", "scripted", "1", "1"]]  # hybrid[reader=json] asked for JSON: no fallback
    assert ev.json_fallbacks({k: v for k, v in grid.items() if k[0] != "hybrid"}) == []


TIMELINE = """[E1] 00:10:00-00:10:20 (said):
    The butler hid the letter in the piano.
[E2] 00:20:00-00:20:05 (said) Rain all day.
[E3] 00:40:00-00:40:30 (said):
    Anna got off the train at the station.
    Nobody met her."""


def test_a_verdict_read_from_where_two_events_are_cites_the_blocks_that_placed_them(film) -> None:
    """No model call settles "A before B" where the evidence's lines place both events: those lines' blocks are
    cited, with no follow-up either."""
    from moviemem.agents.readers.claims import ClaimsReader, timeline_blocks
    from moviemem.agents.readers.settings import ClaimsSettings

    _, f, _ = film
    claim = "Anna gets off the train before the butler hides the letter."
    assert timeline_blocks(claim, TIMELINE) == ["E3", "E1"]
    assert timeline_blocks("The butler hides the letter.", TIMELINE) == []
    ids = {f"E{i}": Evidence("utterance", "cliffs", 600.0 * i, 600.0 * i + 20, f"block {i}", id=f"utterance:{i}")
           for i in (1, 2, 3)}
    b = ScriptedBackbone([], capabilities={"logprobs": True})
    run = Run(b)
    parsed = ClaimsReader(ClaimsSettings()).read(run, Reading(f, Question(claim, kind="claim"), ids, TIMELINE, Lines(f)))
    assert (parsed.choice, parsed.how, b.calls) == ("FALSE", "timeline", [])
    assert sorted(e.id for e in run.evidence.values() if e.cited) == ["utterance:1", "utterance:3"]
    assert next(s for s in run.trace if s.kind == "cite").data["cited"] == ["E3", "E1"]
