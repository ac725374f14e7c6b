"""hybrid[rerank=N]: the model's yes/no relevance (agents/rerank.py), fused with the search ranking (retrievers/rerank.py).

A scripted backbone judges the candidates; the film is a small text film built here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from text_film import text_film_library

from moviemem import Library
from moviemem.agents import ask
from moviemem.agents.base import Run
from moviemem.agents.rerank import relevance_judge
from moviemem.agents.types import Question
from moviemem.backbones import Reply, Request, ScriptedBackbone
from moviemem.retrievers.gather import Routed
from moviemem.retrievers.packing import Lines
from moviemem.retrievers.rerank import RRF_K, candidates, rerank
from moviemem.retrievers.settings import GatherSettings

OPTIONS = ["a lighthouse", "a bakery", "a cinema", "a bank"]
FILLER = ["Sara, the weather has been strange this week.", "Did you bring the papers from the office?",
          "We never liked the long road to town.", "Sara, where were you all morning?", "The train was late again.",
          "Supper is at eight, do not forget.", "Who left the gate open?", "I lost my gloves at the market."]
CUES = [(12.0 * i, 12.0 * i + 4, FILLER[i % len(FILLER)]) for i in range(20)]
CUES += [(400.0, 404.0, "Your uncle keeps the old lamp burning on the northern cliffs every night.")]




@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return text_film_library(tmp_path_factory.mktemp("rerank"), CUES, "cliffs", "Cliffs")


@pytest.fixture(scope="module")
def film(library: Library):
    return library.film("cliffs")


def _judge(relevant: str):
    """yes for a passage holding `relevant`, no otherwise; the letter reader's calls answer A."""
    def reply(req: Request) -> Reply:
        text = req.messages[-1].text
        if "Passage from the film:" not in text:
            return Reply(text="A", logprobs=[{"A": -0.1, "B": -2.0, "C": -3.0, "D": -4.0}])
        passage = text.split("Passage from the film:", 1)[1]
        yes = 0.9 if relevant in passage else 0.1
        return Reply(text="yes", logprobs=[{"yes": math.log(yes), "no": math.log(1 - yes)}])
    return reply


def test_rerank_lifts_the_passage_the_model_judges_relevant_and_fuses_with_search(film) -> None:
    q = Question.make("Where does Sara's uncle work?", OPTIONS)
    lines = Lines(film)
    ranked = Routed(GatherSettings()).retrieve(film, q)
    cands, rest = candidates(ranked, lines, 8)
    assert len(cands) == 8 and len({(c.hit.start, c.hit.end) for c in cands}) == 8  # distinct stretches, in search order
    assert [ranked.index(c.hit) for c in cands] == sorted(ranked.index(c.hit) for c in cands)
    assert rest == ranked[ranked.index(cands[-1].hit) + 1:]
    cliff = next(i for i, c in enumerate(cands) if "northern cliffs" in c.text)
    assert cliff > 0  # search alone does not put it first: it shares no word with the question
    b = ScriptedBackbone(_judge("northern cliffs"), capabilities={"logprobs": True})
    run = Run(b)
    judge = relevance_judge(run, q)
    assert judge is not None
    out = rerank(ranked, lines, 8, judge, run)
    assert len(b.calls) == 8 and all(r.logprobs and r.max_tokens == 1 for r in b.calls)
    # every call opens with the question, so a local model reads that prefix once
    heads = {r.messages[-1].text.split("Passage from the film:")[0] for r in b.calls}
    assert len(heads) == 1 and "Where does Sara's uncle work?" in heads.pop()
    step = next(s for s in run.trace if s.kind == "rerank")
    assert step.data["candidates"] == 8 and step.data["unread"] == 0
    # fused by reciprocal rank: model rank 0 plus its search rank beats every candidate the model put lower
    # unless that one's search rank is better by more than the model's gain
    scores = {o["id"]: 1 / (RRF_K + o["search"]) + 1 / (RRF_K + o["model"]) for o in step.data["order"]}
    assert [o["id"] for o in step.data["order"]] == sorted(scores, key=lambda k: -scores[k])
    assert out.index(cands[cliff].hit) < cliff and out[8:] == rest
    assert run.usage.input_tokens > 0  # the judgements are input tokens of the answer


def test_rerank_is_off_by_default_said_when_unreadable_and_counted_in_the_answer(film) -> None:
    q = "Where does Sara's uncle work?"
    b = ScriptedBackbone(_judge("northern cliffs"), capabilities={"logprobs": True})
    plain = ask(film, q, OPTIONS, policy="hybrid", backbone=b, letter_rotations="one", cite="none")
    assert len(b.calls) == 1 and not any(s.kind == "rerank" for s in plain.trace)
    b = ScriptedBackbone(_judge("northern cliffs"), capabilities={"logprobs": True})
    ans = ask(film, q, OPTIONS, policy="hybrid[rerank=5]", backbone=b, letter_rotations="one", cite="none")
    assert len(b.calls) == 6 and ans.choice == "A"
    assert ans.usage.input_tokens > plain.usage.input_tokens
    assert any(e.text.find("northern cliffs") >= 0 for e in ans.evidence)
    # a judgement the model gives no yes/no for ranks last and is counted; the answer still comes
    b = ScriptedBackbone(lambda r: Reply(text="Hmm", logprobs=[{"Hmm": -0.1}]) if "Passage from" in r.messages[-1].text
                         else Reply(text="A", logprobs=[{"A": -0.1, "B": -2.0}]), capabilities={"logprobs": True})
    ans = ask(film, q, OPTIONS, policy="hybrid[rerank=3]", backbone=b, letter_rotations="one")
    assert next(s for s in ans.trace if s.kind == "rerank").data["unread"] == 3 and ans.choice == "A"
    # a backbone without log-probabilities: skipped, and the trace says so
    b = ScriptedBackbone(['{"answer": "A", "confidence": 3, "evidence": []}'])
    ans = ask(film, q, OPTIONS, policy="hybrid[rerank=5]", backbone=b)
    assert len(b.calls) == 1 and any("rerank skipped" in s.data.get("text", "") for s in ans.trace if s.kind == "note")


def test_retrieval_eval_reranks_with_a_backbone_and_counts_its_tokens(library: Library, tmp_path: Path) -> None:
    import json

    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.retrieval_eval import retrieval_eval
    from moviemem.foundation.errors import MovieMemError

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "film_id": "cliffs", "question": "Where does Sara's uncle work?",
                                 "options": OPTIONS, "answer": "A", "evidence": [[400.0, 404.0]]}) + "\n")
    bench = load_benchmark(items)
    with pytest.raises(MovieMemError, match="--backbone"):
        retrieval_eval(library, bench, ["hybrid", "hybrid-rerank"], [60])
    b = ScriptedBackbone(_judge("northern cliffs"), capabilities={"logprobs": True})
    res = retrieval_eval(library, bench, ["hybrid", "hybrid-rerank"], [60], backbone=b)
    plain, reranked = res["retrievers"]
    assert plain["median_input_tokens"] == 0 and reranked["median_input_tokens"] > 0 and b.calls
    assert reranked["mrr"] > plain["mrr"] and reranked["recall_at_budget"]["60"] >= plain["recall_at_budget"]["60"]
