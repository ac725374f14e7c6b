"""Issue 20: passages, evidence metrics, retrieval-eval, the log-probability reader and forced searches.

Everything here builds its own small film and items; nothing reads ../shared."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from text_film import srt_text

from moviemem import Library
from moviemem.agents import ask
from moviemem.agents.base import Run
from moviemem.agents.policies.hybrid import Hybrid
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.eval import evidence as ev
from moviemem.eval.formats import load_benchmark
from moviemem.eval.records import AnswerRecord
from moviemem.eval.retrieval_eval import retrieval_eval
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError
from moviemem.foundation.words import estimate_tokens
from moviemem.ingest.passages import Line, PassageParams, build_passages
from moviemem.retrievers.gather import Routed
from moviemem.retrievers.packing import Lines, content_words, fit_budget, fuse, informative_first
from moviemem.retrievers.routing import queries_for
from moviemem.retrievers.settings import GatherSettings
from moviemem.retrievers.types import Evidence

OPTIONS = ["a lighthouse", "a bakery", "a cinema", "a bank"]




# A 10-minute "film": filler talk, one stretch that answers the question (at 300-312 s), bare lines
FILLER = ["The weather has been strange this week.", "Did you bring the papers from the office?",
          "I never liked the long road to town.", "Father always said the harbour was dangerous.",
          "We should eat before the others come back.", "The train was late again this morning."]
CUES = [(10.0 * i, 10.0 * i + 4, FILLER[i % len(FILLER)]) for i in range(29)]
CUES += [(300.0, 304.0, "Sara..."), (305.0, 308.0, "Sara, tell me where your uncle works."),
         (308.5, 312.0, "He keeps the old lighthouse on the northern cliffs.")]
CUES += [(320.0 + 10 * i, 324.0 + 10 * i, FILLER[(i + 3) % len(FILLER)]) for i in range(28)]
CUES += [(600.0, 601.0, "Yes.")]
GOLD = [[305.0, 312.0]]


@pytest.fixture(scope="module")
def textfilm(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("answering")
    srt = root / "film.srt"
    srt.write_text(srt_text(CUES))
    lib = Library(root / "lib")
    film = lib.ingest_text(srt, film_id="cliffs", title="Cliffs")
    items = root / "items.jsonl"
    items.write_text("\n".join(json.dumps(x) for x in [
        {"id": "q1", "film_id": "cliffs", "question": "Where does Sara's uncle work?", "options": OPTIONS,
         "answer": "A", "category": "setting", "evidence": GOLD},
        {"id": "q2", "film_id": "cliffs", "question": "What did Father say about the harbour?",
         "options": ["It was dangerous", "It was closed", "It was beautiful", "It was sold"], "answer": "A",
         "category": "character", "evidence": [[30.0, 34.0]]},
    ]) + "\n")
    return lib, film, items


# ----------------------------------------------------------------------------- passages


def test_passages_overlap_respect_bounds_and_gaps() -> None:
    lines = [Line(i, 5.0 * i, 5.0 * i + 4, f"line {i} words here") for i in range(20)]  # 0-99 s
    out = build_passages(lines, PassageParams(window_s=20, stride_s=10, max_words=1000, max_gap_s=15))
    assert [(p.first_row, p.last_row) for p in out][:3] == [(0, 3), (2, 5), (4, 7)]
    assert out[-1].last_row == 19 and all(p.start == lines[p.first_row].start for p in out)
    assert out[0].text.splitlines() == [f"line {i} words here" for i in range(4)]
    cut = build_passages(lines, PassageParams(window_s=40, stride_s=20, max_words=1000), bounds=[50.0])
    assert all(p.end <= 50.0 or p.start >= 50.0 for p in cut)  # no passage crosses a segment boundary
    gap = build_passages([Line(0, 0, 2, "a b"), Line(1, 100, 102, "c d")], PassageParams())
    assert [(p.first_row, p.last_row) for p in gap] == [(0, 0), (1, 1)]  # a long silence splits
    few = build_passages(lines, PassageParams(window_s=100, stride_s=50, max_words=8))
    assert all(len(p.text.split()) <= 8 for p in few)
    spk = build_passages([Line(0, 0, 1, "Hello there", speaker="Ann")], PassageParams())
    assert spk[0].text == "Ann: Hello there"


def test_text_film_gets_passages_by_default(textfilm) -> None:
    _, film, _ = textfilm
    ps = film.passages()
    assert ps and all(p.source == "utterance" and p.vector and len(p.vector) == 384 for p in ps)
    assert any("lighthouse" in p.text and "uncle" in p.text for p in ps)  # question and answer lines together
    stage = {s.stage: s for s in film.stages()}["passages"]
    assert stage.status == "done" and json.loads(stage.params)["embedder"] == "minilm"
    assert film.summary()["counts"]["passages"] == len(ps)
    assert all(p.end <= 200 for p in film.until(200).passages())  # no future leak
    # a passage's vector is its lines' vectors pooled (the transcript stage embedded them), not a second encoding
    utts = {u.idx: np.asarray(u.vector) for u in film.utterances() if u.text.strip()}
    p = ps[1]
    words = {u.idx: len(u.text.split()) for u in film.utterances()}
    mean = np.sum([utts[i] * words[i] for i in range(p.first_row, p.last_row + 1) if i in utts], axis=0)
    assert np.allclose(np.asarray(p.vector), mean / np.linalg.norm(mean), atol=2e-3)  # vectors are stored as float16
    assert json.loads(stage.params)["vectors"] == "its rows' vectors, each weighed by its words"


# ----------------------------------------------------------------------------- metrics and packing


def test_evidence_metrics() -> None:
    gold = [[10, 20], [50, 60]]
    assert ev.recall(gold, [(15, 16)]) == 0.5 and ev.recall(gold, [(0, 5)]) == 0.0
    assert ev.recall(gold, [(19, 51)]) == 1.0 and ev.recall([], [(0, 1)]) is None
    assert ev.coverage(gold, [(10, 15), (12, 20)]) == pytest.approx(0.5)
    assert ev.coverage(gold, [(0, 100)]) == 1.0
    assert ev.precision(gold, [(15, 16), (30, 31)]) == 0.5 and ev.precision(gold, []) is None
    assert [ev.outcome(1.0, True), ev.outcome(0.0, True), ev.outcome(0.5, False), ev.outcome(0.0, False)] == \
        ["found", "lucky", "misread", "not found"]
    rec = ev.record_evidence(gold, {"q": AnswerRecord.model_validate({"evidence": [{"start": 15, "end": 16, "cited": True}]})}, False)
    assert rec is not None and rec.line() == {"recall": 0.5, "coverage": 0.05, "cited_precision": 1.0, "outcome": "misread"}


def test_bare_lines_go_last_and_fusion_rewards_agreement() -> None:
    assert content_words("Yes.") == 0 and content_words("Sara...") == 0 and content_words("Oh!") == 0
    assert content_words("He keeps the old lighthouse on the cliffs.") >= 3
    bare = Evidence("utterance", "f", 1, 2, "Sara...", id="utterance:1")
    good = Evidence("utterance", "f", 3, 4, "Sara, your uncle keeps the lighthouse.", id="utterance:2")
    assert informative_first([bare, good]) == [good, bare]
    a, b, c = (Evidence("utterance", "f", t, t + 1, f"line {t} has words", id=f"utterance:{t}") for t in (1, 2, 3))
    assert fuse([[a, b], [b, c], [b, a]])[0] is b


def test_overlapping_passages_are_charged_once_and_merged(textfilm) -> None:
    _, film, _ = textfilm
    ps = film.passages()
    first, second = ps[0], ps[1]
    assert first.last_row >= second.first_row  # they overlap
    hits = [Evidence("passage", "cliffs", p.start, p.end, p.text, id=f"passage:{p.idx}", rows=(p.source, p.first_row, p.last_row))
            for p in (first, second)]
    shown = fit_budget(hits, 10_000, Lines(film))
    assert len(shown) == 1 and shown[0].id == "passage:0+passage:1"
    rows = {u.idx: u for u in film.utterances()}
    assert shown[0].text.splitlines() == [rows[i].text for i in range(first.first_row, second.last_row + 1)]
    alone = fit_budget(hits[:1], 10_000, Lines(film))[0]
    tight = fit_budget(hits, len(alone.text) // 4 + 20, Lines(film))  # room for the first only
    assert [e.id for e in tight] == ["passage:0"]


def test_a_span_inside_a_longer_one_does_not_split_the_block_it_touches(textfilm) -> None:
    _, film, _ = textfilm
    text = Lines(film).of("utterance")
    spans = [(2, 4), (0, 6), (7, 9)]  # the best hit lies inside the next; sorted by first row, it ends first
    hits = [Evidence("utterance", "cliffs", text[a][0], text[b][1], text[a][2], id=f"utterance:{a}-{b}", rows=("utterance", a, b))
            for a, b in spans]
    shown = fit_budget(hits, 10_000, Lines(film))
    assert len(shown) == 1 and shown[0].rows == ("utterance", 0, 9)
    assert shown[0].text.splitlines() == [text[i][2] for i in range(10)]


def test_small_to_big_shows_more_hits_first_and_widens_the_best_ranked_with_what_is_left(textfilm) -> None:
    _, film, _ = textfilm
    lines = Lines(film)
    text = lines.of("utterance")
    picks = [5, 20, 40, 50]  # ranked hits, far apart: widening never makes two of them touch
    hits = [Evidence("utterance", "cliffs", text[i][0], text[i][1], text[i][2], id=f"utterance:{i}", rows=("utterance", i, i))
            for i in picks]

    def charge(i: int) -> int:
        return estimate_tokens(text[i][2]) + 1

    budget = sum(charge(i) + 8 for i in picks) + charge(4) + charge(6)  # every hit alone, then the best one's neighbours
    fixed = fit_budget([replace(h, rows=("utterance", i - 2, i + 2)) for h, i in zip(hits, picks)], budget, lines)
    grown = fit_budget(hits, budget, lines, core_share=1.0, rings=2)
    assert len(fixed) < len(picks)  # two neighbours up front: fewer hits fit
    assert sorted(e.id for e in grown) == sorted(f"utterance:{i}" for i in picks)  # every hit shown ...
    best = next(e for e in grown if e.id == "utterance:5")
    assert best.rows == ("utterance", 4, 6) and best.text.splitlines() == [text[i][2] for i in (4, 5, 6)]  # ... the best widened
    assert all(e.rows[1] == e.rows[2] for e in grown if e is not best)  # type: ignore[index]  # nothing left for the rest
    roomy = fit_budget(hits, 10_000, lines, core_share=0.6, rings=2)
    assert sorted(e.rows for e in roomy) == sorted(("utterance", i - 2, i + 2) for i in picks)  # type: ignore[type-var]
    routed = Routed(GatherSettings(units="lines", context="budget"))
    ranked = routed.retrieve(film, Question.make("Where does Sara's uncle work?", OPTIONS))
    assert ranked and all(e.rows[1] == e.rows[2] for e in ranked)  # type: ignore[index]  # hits alone ...
    assert all(e.rows[2] > e.rows[1] for e in routed.pack(ranked, 10_000, lines))  # type: ignore[index]  # ... widened by pack
    with pytest.raises(MovieMemError, match="unknown context"):
        Routed(GatherSettings(context="wide")).retrieve(film, Question.make("Where?", OPTIONS))
    with pytest.raises(MovieMemError, match="core_share"):
        Routed(GatherSettings(context="budget", core_share=2.0)).retrieve(film, Question.make("Where?", OPTIONS))


# ----------------------------------------------------------------------------- retrieval-eval


def test_retrieval_eval_finds_the_gold_span(textfilm, cli) -> None:
    lib, _, items = textfilm
    result = retrieval_eval(lib, load_benchmark(items), ["hybrid", "hybrid-lines", "passages"], [100, 1000])
    assert result["items"] == 2 and result["budgets"] == [100, 1000]
    hybrid = next(r for r in result["retrievers"] if r["name"] == "hybrid")
    assert hybrid["default"] is True and not any(r["default"] for r in result["retrievers"] if r["name"] != "hybrid")
    assert hybrid["recall_at_budget"]["1000"] == 1.0 and hybrid["coverage_at_budget"]["1000"] == 1.0
    assert hybrid["mrr"] > 0.5 and set(hybrid["by_category"]) == {"setting", "character"}
    res = cli("retrieval-eval", str(items), "--retrievers", "passages,lines", "--budgets", "500", "--json",
              "--library", str(lib.path), library=False)
    assert res.code == 0, res.err
    out = res.json()
    assert [r["name"] for r in out["retrievers"]] == ["passages", "lines"]
    assert set(out["retrievers"][0]) >= {"name", "default", "recall_at_budget", "coverage_at_budget", "mrr", "by_category"}
    bad = cli("retrieval-eval", str(items), "--retrievers", "telepathy", "--library", str(lib.path), library=False)
    assert bad.code == 2 and "unknown retriever" in bad.err
    bad = cli("retrieval-eval", str(items), "--retrievers", "hybrid-rerank", "--library", str(lib.path), library=False)
    assert bad.code == 2 and "--backbone" in bad.err and len(bad.err.strip().splitlines()) == 1


def test_each_option_is_searched_joined_to_the_question_and_alone(textfilm) -> None:
    _, film, _ = textfilm
    q = Question.make("Where does Sara's uncle work?", OPTIONS)
    queries = queries_for(q, 1, option_alone=True)
    assert queries == [q.text] + [f"{q.text} {o}" for o in OPTIONS] + OPTIONS
    assert queries_for(q, 1, option_alone=False) == queries[:5] and queries_for(q, 0, option_alone=True) == [q.text]
    assert Hybrid.Settings().option_alone is True
    run = Run(ScriptedBackbone([]))
    Routed(GatherSettings(option_alone=True)).retrieve(film, q, trace=run)
    asked = {s.data["query"] for s in run.trace if s.kind == "retrieve"}
    assert set(OPTIONS) <= asked


def test_option_lines_put_each_options_own_best_line_first(textfilm) -> None:
    """option_lines=1: each option's best line of its own leads, in option order; the rest is the fused ranking."""
    from moviemem.retrievers.text import TextRetriever

    _, film, _ = textfilm
    q = Question.make("Where does Sara's uncle work?", OPTIONS)
    plain = Routed(GatherSettings(units="lines", context_lines=0)).retrieve(film, q)
    led = Routed(GatherSettings(units="lines", context_lines=0, option_lines=1)).retrieve(film, q)
    own = list(dict.fromkeys(TextRetriever("hybrid", ["utterance"]).retrieve(film, o, k=1)[0].id for o in OPTIONS))
    lighthouse = next(u for u in film.utterances() if "lighthouse" in u.text)
    assert own[0] == f"utterance:{lighthouse.idx}"  # "a lighthouse" alone finds its line
    informative = [i for i in own if content_words(next(e.text for e in led if e.id == i)) >= 2]
    assert [e.id for e in led[: len(informative)]] == informative
    assert [e.id for e in led if e.id not in own] == [e.id for e in plain if e.id not in own]
    assert Hybrid.Settings().option_lines == 0  # off by default: see GatherSettings


# ----------------------------------------------------------------------------- reader


def _lp(**alts: float) -> Reply:
    return Reply(text=max(alts, key=alts.get), logprobs=[{k.replace("_", " "): v for k, v in alts.items()}])


def test_letter_logprob_reader_and_claim_calibration(textfilm) -> None:
    _, film, _ = textfilm
    b = ScriptedBackbone([_lp(_B=-0.2, A=-0.9, C=-3.0, D=-4.0, The=-1.0)], capabilities={"logprobs": True})
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b, letter_rotations="one", cite="none")
    assert (ans.choice, ans.invalid) == ("B", False) and 0.4 < ans.confidence < 0.7
    req = b.calls[0]
    assert req.logprobs == 20 and req.max_tokens == 1 and "lighthouse" in req.messages[-1].text
    assert req.messages[-1].text.rstrip().endswith("answer with the letter of the correct option only.")
    assert next(s for s in ans.trace if s.kind == "parse").data["how"] == "logprobs"
    # raw p(yes) 0.6 looks TRUE, but the content-free statement gets p(yes) 0.8: calibrated, it is FALSE
    import math

    b = ScriptedBackbone([_lp(yes=math.log(0.6), no=math.log(0.4)), _lp(Yes=math.log(0.8), No=math.log(0.2))],
                         capabilities={"logprobs": True})
    ans = ask(film, "Sara's uncle keeps the lighthouse.", policy="hybrid", backbone=b, kind="claim", claims="calibrated", cite="none")
    assert ans.choice == "FALSE" and "N/A" in b.calls[1].messages[-1].text
    assert b.calls[0].messages[-1].text.split("Statement:")[0] == b.calls[1].messages[-1].text.split("Statement:")[0]
    b = ScriptedBackbone([_lp(Hmm=-0.1, Well=-0.5)], capabilities={"logprobs": True})
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b, letter_rotations="one")
    assert ans.invalid and "none of A, B, C, D" in ans.error
    b = ScriptedBackbone(['{"answer": "A", "confidence": 3, "evidence": []}'])  # no log-probabilities: JSON reader
    assert ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b).choice == "A"
    assert b.calls[0].logprobs == 0 and b.calls[0].json_schema is not None


def test_claim_read_as_questions(textfilm) -> None:
    """A claim becomes questions with its own answers (no evidence shown); the questions are answered from the
    evidence; each detail agrees word for word, or else by the letter reader in both orders; TRUE when all agree."""
    import math

    from moviemem.agents.readers.claims import agreement

    _, film, _ = textfilm
    claim = "Sara's uncle keeps the old bakery on the northern cliffs."
    asked = json.dumps({"checks": [{"question": "What does Sara's uncle keep?", "answer": "the old bakery"},
                                   {"question": "Where is it?", "answer": "on the northern cliffs"}]})
    found = json.dumps({"answers": ["a lighthouse", "the northern cliffs"]})
    # one detail differs and the letter reader prefers the evidence's answer in both orders: FALSE
    b = ScriptedBackbone([asked, found, _lp(A=math.log(0.3), B=math.log(0.7)), _lp(A=math.log(0.8), B=math.log(0.2))],
                         capabilities={"logprobs": True})
    ans = ask(film, claim, policy="hybrid", backbone=b, kind="claim", claims="qa", cite="none")
    assert (ans.choice, ans.invalid) == ("FALSE", False)
    to_questions, to_answers, first, second = b.calls
    assert "Statement about a film: " + claim in to_questions.messages[-1].text
    assert "Evidence" not in to_questions.messages[-1].text and "lighthouse" not in to_questions.messages[-1].text
    assert to_questions.json_schema is not None and to_answers.json_schema is not None
    asked_text = to_answers.messages[-1].text
    assert "1. What does Sara's uncle keep?\n2. Where is it?" in asked_text and "bakery" not in asked_text
    assert "A. the old bakery" in first.messages[-1].text and "B. a lighthouse" in first.messages[-1].text
    assert "A. a lighthouse" in second.messages[-1].text and "B. the old bakery" in second.messages[-1].text
    # every call that reads the evidence starts with the same text (a local model reuses it as a cached prefix)
    head = asked_text.split("Questions:")[0]
    assert "lighthouse" in head and first.messages[-1].text.startswith(head) and second.messages[-1].text.startswith(head)
    details = next(s for s in ans.trace if s.kind == "scores").data["details"]
    assert [(d["claimed"], d["found"], d.get("p_claimed")) for d in details] == [
        ("the old bakery", "a lighthouse", 0.25), ("on the northern cliffs", "the northern cliffs", None)]
    # the claim's answer wins over both orders: TRUE
    b = ScriptedBackbone([asked, found, _lp(A=math.log(0.7), B=math.log(0.3)), _lp(A=math.log(0.4), B=math.log(0.6))],
                         capabilities={"logprobs": True})
    assert ask(film, claim, policy="hybrid", backbone=b, kind="claim", claims="qa", cite="none").choice == "TRUE"
    # every answer agrees word for word (stemmed, stop words aside): TRUE, no letter reading
    b = ScriptedBackbone([asked, json.dumps({"answers": ["The old bakeries", "northern cliffs"]})],
                         capabilities={"logprobs": True})
    ans = ask(film, claim, policy="hybrid", backbone=b, kind="claim", claims="qa", cite="none")
    assert ans.choice == "TRUE" and len(b.calls) == 2
    assert agreement("the old bakery", "old bakeries") == 1.0 and agreement("the old bakery", "a lighthouse") == 0.0
    # unusable replies: invalid with the reason, never a default verdict
    for replies in (['{"checks": []}'], [asked, '{"answers": ["a lighthouse"]}']):
        b = ScriptedBackbone(replies, capabilities={"logprobs": True})
        ans = ask(film, claim, policy="hybrid", backbone=b, kind="claim", claims="qa", cite="none")
        assert ans.invalid and ans.choice is None and "claim reader:" in (ans.error or "")
    with pytest.raises(Exception, match="unknown claim reader"):
        ask(film, claim, policy="hybrid", backbone=ScriptedBackbone(["{}"], capabilities={"logprobs": True}),
            kind="claim", claims="vibes")


# ----------------------------------------------------------------------------- agentic search


def test_archival_first_turn_must_search(textfilm) -> None:
    _, film, _ = textfilm
    ok = '{"answer": "A", "confidence": 3}'
    call = {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "uncle works"}}]}
    b = ScriptedBackbone([call, ok])
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b)
    assert b.calls[0].tool_choice == "required" and b.calls[1].tool_choice is None
    assert ans.choice == "A" and ans.evidence
    assert next(s for s in ans.trace if s.kind == "searches").data == {"n": 1, "protocol": "tools", "search_first": True}
    b = ScriptedBackbone([ok])
    ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b, search_first=False)
    assert b.calls[0].tool_choice is None


def test_archival_text_protocol_for_backbones_without_tools(textfilm) -> None:
    _, film, _ = textfilm
    ok = '{"answer": "A", "confidence": 3}'
    b = ScriptedBackbone(["SEARCH: uncle lighthouse", ok], capabilities={"tools": False})
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b)
    assert not b.calls[0].tools and "SEARCH:" in b.calls[0].messages[0].text
    assert "Search results for 'uncle lighthouse'" in b.calls[1].messages[-1].text and "lighthouse" in b.calls[1].messages[-1].text
    assert ans.choice == "A" and ans.evidence
    b = ScriptedBackbone([ok, ok], capabilities={"tools": False})  # answers at once: the question is searched first
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b)
    tool = next(s for s in ans.trace if s.kind == "tool")
    assert tool.data["arguments"]["query"] == "Where does Sara's uncle work?" and tool.data["forced"]
    assert len(b.calls) == 2 and ans.choice == "A"


def test_archival_reads_the_scene_list_first_and_browses_scenes_by_time(textfilm) -> None:
    """overview_tokens puts the film's scene list before the question; browse_scenes lists the scenes of a
    time window, is kept out of the shown evidence, and a turn that only browses is not the forced search."""
    _, film, _ = textfilm
    scenes = film.scenes()
    assert len(scenes) >= 2
    ok = '{"answer": "A", "confidence": 3}'
    late = scenes[-1]
    browse = {"tool_calls": [{"name": "browse_scenes", "arguments": {"start": late.start, "end": late.end}}]}
    search = {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "uncle works"}}]}
    b = ScriptedBackbone([browse, search, ok])
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b, overview_tokens=300,
              browse=True)
    first = b.calls[0].messages[1].text
    assert first.startswith("The film's scenes, a table of contents") and "scene 1 [0:00:" in first
    assert first.index("scene 1") < first.index("Where does Sara's uncle work?")
    assert {t.name for t in b.calls[0].tools} == {"archival_memory_search", "browse_scenes"}
    # the browse did not count as the forced search: the next turn must search, and may only search
    assert b.calls[1].tool_choice == "required" and [t.name for t in b.calls[1].tools] == ["archival_memory_search"]
    listed = b.calls[1].messages[-1].text
    assert f"scene {late.scene_idx + 1} [" in listed and "scene 1 [" not in listed
    steps = [s for s in ans.trace if s.kind == "tool"]
    assert [s.data["name"] for s in steps] == ["browse_scenes", "archival_memory_search"]
    assert steps[0].data["scenes"] == 1 and steps[0].data["found"] == [] and steps[1].data["found"]
    assert next(s for s in ans.trace if s.kind == "searches").data["n"] == 1 and ans.choice == "A"
    assert all(e.kind != "scene" for e in ans.evidence)
    # bad times are the tool's error, not a crash
    bad = {"tool_calls": [{"name": "browse_scenes", "arguments": {"start": "nan"}}]}
    b = ScriptedBackbone([bad, search, ok])
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b, browse=True)
    assert "not a finite time" in next(s for s in ans.trace if s.kind == "tool").data["error"]
    # the search reads its window the same way
    inf = {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "uncle", "end": "inf"}}]}
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=ScriptedBackbone([inf, ok]))
    assert "not a finite time" in next(s for s in ans.trace if s.kind == "tool").data["error"]
    # without tool calling there is no browsing, and the trace says so; the overview still comes first
    b = ScriptedBackbone(["SEARCH: uncle", ok], capabilities={"tools": False})
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="archival", backbone=b, browse=True,
              overview_tokens=300)
    assert any("browse_scenes needs a backbone that calls tools" in s.data.get("text", "") for s in ans.trace)
    assert b.calls[0].messages[1].text.startswith("The film's scenes")
    with pytest.raises(MovieMemError, match="letta cannot offer browse_scenes"):
        ask(film, "Where?", OPTIONS, policy="letta", backbone=ScriptedBackbone([ok]), browse=True)


def test_hybrid_puts_the_scene_list_before_its_evidence(textfilm) -> None:
    _, film, _ = textfilm
    b = ScriptedBackbone(['{"answer": "A", "confidence": 3, "evidence": []}'])
    ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b, reader="json", overview_tokens=200)
    text = b.calls[0].messages[1].text
    assert "The film's scenes, a table of contents" in text and text.index("scene 1 [") < text.index("[E1]")
    b = ScriptedBackbone(['{"answer": "A", "confidence": 3, "evidence": []}'])
    ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b, reader="json")
    assert "table of contents" not in b.calls[0].messages[1].text


def test_bench_records_evidence_and_flags_policies_that_never_search(textfilm, tmp_path: Path) -> None:
    lib, _, items = textfilm
    ok = '{"answer": "A", "confidence": 3, "evidence": ["E1"]}'
    b = ScriptedBackbone([ok], cycle=True, name="scripted-ok")
    run_bench(load_benchmark(items), ["hybrid[reader=json,budget_share=0]", "archival[search_first=false]"], [b], tmp_path / "run",
              answerer=None, library=lib)
    recs = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    hyb = [r for r in recs if r["policy"].startswith("hybrid")]
    assert all(r["evidence"]["recall"] == 1.0 and r["evidence"]["outcome"] == "found" for r in hyb)
    arch = [r for r in recs if r["policy"].startswith("archival")]
    assert all(r["searches"] == 0 and r["evidence"]["outcome"] in ("lucky", "not found") for r in arch)
    rows = {r["policy"]: r for r in RunLog(tmp_path / "run").rows}
    assert rows["archival[search_first=false]"]["searched_share"] == 0.0
    assert rows["hybrid[reader=json,budget_share=0]"]["evidence_recall"] == 1.0
    from moviemem.eval.report import write_report

    paths = write_report(tmp_path / "run", inspector=True)
    md = paths["report"].read_text()
    assert "## Evidence" in md and "NEVER SEARCHED" in md
    page = (paths["inspector"].parent / "items" / "1.html").read_text()
    assert "Gold evidence" in page and "0:05:05" in page and "gold cited" in page


def test_budget_is_capped_at_a_share_of_a_short_films_text(textfilm) -> None:
    from moviemem.agents.policies.hybrid import effective_budget

    assert effective_budget(1000, 0.5, 15_000) == 1000  # a feature film: the budget stands
    assert effective_budget(1000, 0.5, 900) == 450  # a short film: at most half of its text
    assert effective_budget(1000, 0.0, 900) == 1000  # 0 turns the cap off
    assert effective_budget(1000, 0.5, 18) == 100  # a two-line film: its lines still fit
    assert effective_budget(60, 0.5, 18) == 60  # ... within the budget asked for
    _, film, _ = textfilm
    total = Lines(film).total_tokens()
    assert 0 < total < 2000
    b = ScriptedBackbone(['{"answer": "A", "confidence": 3, "evidence": []}'])
    ans = ask(film, "Where does Sara's uncle work?", OPTIONS, policy="hybrid", backbone=b, reader="json")
    note = next(s.data["text"] for s in ans.trace if s.kind == "note" and "fit the budget" in s.data["text"])
    assert note.endswith(f"fit the budget of {min(1000, total // 2)} tokens")
