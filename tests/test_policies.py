"""Policies on the synthetic film: what each sends to the backbone (scripted), answer parsing,
no-future-leak views, and short smoke runs with the real local-small backbone."""

from __future__ import annotations

import json
import re

import pytest

from moviemem.agents import Question, ask, get_policy, list_policies
from moviemem.agents.parsing import parse_answer
from moviemem.backbones import Image, ScriptedBackbone
from moviemem.foundation.errors import MovieMemError

OPTIONS = ["Alpha", "Bravo", "Charlie", "Delta"]
OK = '{"answer": "B", "confidence": 3}'
TEXT_POLICIES = ["closed-book", "subtitles", "socratic-frame", "socratic-clip", "archival", "hybrid"]


@pytest.fixture(scope="module")
def film(synth_film, tmp_path_factory):
    """A writable copy (retrieval builds its indexes on first use)."""
    _, f = synth_film.copy_to(tmp_path_factory.mktemp("policies") / "lib")
    return f


def sent_text(b: ScriptedBackbone) -> str:
    return "\n".join(m.text for r in b.calls for m in r.messages)


def images_sent(req) -> int:
    return sum(isinstance(p, Image) for m in req.messages for p in m.parts)


def scripted(replies=None, **caps) -> ScriptedBackbone:
    return ScriptedBackbone(replies if replies is not None else [OK], capabilities=caps or None)


# ----------------------------------------------------------------------------- registry


def test_registry_lists_every_policy_with_defaults():
    names = {p.name for p in list_policies()}
    assert {"closed-book", "subtitles", "end-to-end", "socratic-frame", "socratic-clip", "videoagent", "archival",
            "hybrid"} <= names
    va = get_policy("videoagent").settings
    assert (va.pool, va.initial_frames, va.extra_frames, va.max_rounds, va.threshold) == (64, 8, 4, 3, 3)
    assert get_policy("end-to-end", frames=256).settings.frames == 256
    with pytest.raises(MovieMemError, match="no setting 'nope'"):
        get_policy("hybrid", nope=1)
    with pytest.raises(MovieMemError, match="unknown policy"):
        get_policy("telepathy")


# ----------------------------------------------------------------------------- what each policy sends


def test_closed_book_sends_no_film_content(film):
    b = scripted()
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="closed-book", backbone=b)
    assert (ans.choice, ans.text, ans.invalid, ans.confidence) == ("B", "Bravo", False, 1.0)
    text = sent_text(b)
    assert len(b.calls) == 1 and ans.evidence == []
    for row in film.utterances()[:20] + film.captions()[:20]:
        assert row.text not in text
    assert film.info.title not in text
    b2 = scripted()
    ask(film, "Who brings the letter?", OPTIONS, policy="closed-book", backbone=b2, with_title=True)
    assert f"{film.info.title} ({film.info.year})" in sent_text(b2)
    assert ans.trace[0].kind == "prompt" and ans.trace[0].data["prompt"] == "closed-book" and ans.trace[0].data["version"] == 1


def test_subtitles_sends_the_whole_transcript(film):
    b = scripted()
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="subtitles", backbone=b)
    text = sent_text(b)
    utts = film.utterances()
    assert utts and all(u.text in text for u in utts)
    assert len(ans.evidence) == len(utts) and {e.kind for e in ans.evidence} == {"utterance"}


@pytest.mark.parametrize("policy", ["socratic-frame", "socratic-clip"])
def test_socratic_sends_every_caption_as_world_state(film, policy):
    b = scripted()
    ans = ask(film, "Where does the film begin?", OPTIONS, policy=policy, backbone=b)
    text = sent_text(b)
    caps = film.captions()
    assert caps and all(c.text in text for c in caps)
    # compact: a line a caption, a time mark on the first line of each minute of film (agents/calls.compact_text)
    minutes = {int(c.start // 60) for c in caps}
    assert len(re.findall(r"^\[\d+:\d\d\] ", text, re.M)) == len(minutes) and " - 00:0" not in text
    # the synthetic film has imported captions only: the policy says it used them instead
    assert any("imported captions" in s.data.get("text", "") for s in ans.trace if s.kind == "note")
    with pytest.raises(MovieMemError, match="no clip captions"):
        ask(film, "Where?", OPTIONS, policy=policy, backbone=scripted(), caption_kinds=("clip",))


def test_end_to_end_sends_the_frame_pool(film):
    b = scripted()
    ans = ask(film, "What color is the coat?", OPTIONS, policy="end-to-end", backbone=b)
    assert images_sent(b.calls[0]) == 64 and ans.usage.images == 64
    b256 = scripted()
    ask(film, "What color is the coat?", OPTIONS, policy="end-to-end", backbone=b256, frames=256)
    assert images_sent(b256.calls[0]) == 256
    with pytest.raises(MovieMemError, match="does not take images"):
        ask(film, "What color?", OPTIONS, policy="end-to-end", backbone=scripted(images=False, video=False))
    with pytest.raises(MovieMemError, match="frames must be one of"):
        ask(film, "What color?", OPTIONS, policy="end-to-end", backbone=scripted(), frames=100)


def test_end_to_end_whole_video(synth_film):
    b = scripted()  # the ingested film itself: a copy made by import has no video (issue 46 item 8)
    ask(synth_film.film, "What color is the coat?", OPTIONS, policy="end-to-end", backbone=b, video=True)
    clips = [p for m in b.calls[0].messages for p in m.parts if type(p).__name__ == "Clip"]
    assert len(clips) == 1 and clips[0].path.name == "film.mp4"


def test_video_policies_refuse_a_text_only_film(tmp_path, synth_film):
    from moviemem import Library

    lib = Library(tmp_path / "lib", synth_film.lib.settings)
    text_film = lib.ingest_text(synth_film.dir / "subtitles.srt", film_id="textonly", title="T")
    for policy in ("end-to-end", "videoagent"):
        with pytest.raises(MovieMemError, match="text-only film") as info:
            ask(text_film, "Who?", OPTIONS, policy=policy, backbone=scripted())
        assert "\n" not in str(info.value)


def test_videoagent_stops_after_three_rounds_and_sixteen_frames(film):
    b = scripted(['{"answer": "A", "confidence": 1, "missing": "the sign on the house"}'] * 5)
    ans = ask(film, "What does the sign say?", OPTIONS, policy="videoagent", backbone=b)
    assert [images_sent(r) for r in b.calls] == [8, 12, 16]
    assert ans.choice == "A" and not ans.invalid
    retrievals = [s for s in ans.trace if s.kind == "retrieve"]
    assert [s.data["retriever"] for s in retrievals] == ["clip", "clip"]
    assert retrievals[0].data["query"] == "the sign on the house"
    first8 = {e for e in retrievals[0].data["found"]}
    assert len(first8) == 4 and not first8 & set(retrievals[1].data["found"])
    sure = scripted(['{"answer": "C", "confidence": 3}'])
    assert ask(film, "What does the sign say?", OPTIONS, policy="videoagent", backbone=sure).choice == "C"
    assert len(sure.calls) == 1 and images_sent(sure.calls[0]) == 8


def test_videoagent_text_backbone_and_no_clip(film, tmp_path, synth_film):
    b = scripted(['{"answer": "A", "confidence": 1}'] * 3, images=False, video=False)
    with pytest.raises(MovieMemError, match="does not take images; videoagent needs a vision backbone"):
        ask(film, "What does the sign say?", OPTIONS, policy="videoagent", backbone=b)  # as end-to-end refuses it
    assert not b.calls
    ask(film, "What does the sign say?", OPTIONS, policy="videoagent", backbone=b, max_rounds=2, text_frames="always")
    assert len(b.calls) == 2 and images_sent(b.calls[0]) == 0
    first = b.calls[0].messages[-1].text
    assert len(re.findall(r"^\[frame \d+ at \d\d:\d\d:\d\d\]", first, re.M)) == 8
    assert any(c.text in first for c in film.captions())
    # without CLIP vectors the trace says so and refinement is uniform
    lib, nf = synth_film.copy_to(tmp_path / "noclip")
    runs = {r.stage: r for r in nf.stages()}
    lib.store.finish_run(nf.film_id, "clip", runs["clip"].run_id, ["clip"], rows=0, status="skipped", reason="test")
    lib.store.delete("clip", f"film_id = '{nf.film_id}'")
    nf = lib.film(nf.film_id)
    b2 = scripted(['{"answer": "A", "confidence": 1}'] * 3)
    ans2 = ask(nf, "What does the sign say?", OPTIONS, policy="videoagent", backbone=b2)
    assert [images_sent(r) for r in b2.calls] == [8, 12, 16]
    assert any("no CLIP vectors" in s.data.get("text", "") for s in ans2.trace if s.kind == "note")
    assert [s.data["retriever"] for s in ans2.trace if s.kind == "retrieve"] == ["uniform", "uniform"]


def test_archival_tool_loop(film):
    word = film.captions()[3].text.split()[-1].strip(".,")
    b = scripted([
        {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": word, "top_k": 3}}]},
        {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "letter", "top_k": 2, "start": 0, "end": 60}}]},
        OK,
    ])
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="archival", backbone=b)
    assert ans.choice == "B" and len(b.calls) == 3
    tools = [s for s in ans.trace if s.kind == "tool"]
    assert len(tools) == 2 and tools[0].data["arguments"]["query"] == word
    result = json.loads(b.calls[1].messages[-1].text)
    assert 1 <= len(result) <= 3 and all({"start", "end", "text", "kind"} <= set(r) for r in result)
    assert any(word.lower() in r["text"].lower() for r in result)
    windowed = json.loads(b.calls[2].messages[-1].text)
    assert all(r["end"] > 0 and r["start"] < 60 for r in windowed)
    assert ans.evidence and all(e.retriever.startswith("text") for e in ans.evidence)


def test_archival_step_limit_forces_an_answer(film):
    call = {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "letter"}}]}
    b = scripted([call, call, OK])
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="archival", backbone=b, max_steps=2)
    assert len(b.calls) == 3 and ans.choice == "B"
    assert b.calls[-1].json_schema is not None and not b.calls[-1].tools
    assert any("final answer after 2 search" in s.data.get("text", "") for s in ans.trace if s.kind == "note")


def test_hybrid_routes_cites_and_fits_budget(film):
    def reply(req):
        ids = re.findall(r"^\[(E\d+)\]", req.messages[-1].text, re.M)
        return json.dumps({"answer": "D", "confidence": 2, "evidence": ids[-1:]})

    b = scripted(reply)
    ans = ask(film, "Who brings the letter to the house?", OPTIONS, policy="hybrid", backbone=b)
    route = next(s for s in ans.trace if s.kind == "route")
    assert route.data["type"] == "character"
    cite = next(s for s in ans.trace if s.kind == "cite")
    assert len(cite.data["cited"]) == 1 and ans.evidence[0].id == cite.data["ids"][cite.data["cited"][0]]
    shown = b.calls[0].messages[-1].text
    lines = re.findall(r"^\[E\d+\] .*$", shown, re.M)
    assert lines and sum(len(x) for x in lines) / 4 <= 450 + 8 * len(lines)
    small = scripted(reply)
    ask(film, "Who brings the letter to the house?", OPTIONS, policy="hybrid", backbone=small, budget_tokens=60)
    assert len(re.findall(r"^\[E\d+\]", small.calls[0].messages[-1].text, re.M)) < len(lines)
    assert ans.choice == "D" and ans.confidence == pytest.approx(2 / 3, abs=1e-3)


# ----------------------------------------------------------------------------- until, formats, invalid


@pytest.mark.parametrize("policy", ["subtitles", "socratic-clip", "hybrid", "archival", "videoagent", "end-to-end"])
def test_until_hides_everything_after_its_time(film, policy):
    cut = 60.0
    later = [r.text for r in film.utterances() + film.captions() if r.start > cut + 1]
    assert later

    def reply(req):
        if req.tools and not any(m.role == "tool" for m in req.messages):
            return {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": "the letter", "top_k": 20}}]}
        return '{"answer": "A", "confidence": 1}'

    b = ScriptedBackbone(reply, capabilities={"images": policy in ("videoagent", "end-to-end")})
    ans = ask(film, "Who brings the letter?", OPTIONS, policy=policy, backbone=b, until=cut)
    text = sent_text(b)
    assert not [t for t in later if t in text]
    assert all(e.end <= cut for e in ans.evidence)
    for req in b.calls:
        for m in req.messages:
            for p in m.parts:
                if isinstance(p, Image):
                    t = next(f.t for f in film.frames() if f.image == str(p.path))
                    assert t <= cut


def test_claims_and_open_answers(film):
    b = scripted(['{"answer": "FALSE", "confidence": 2}'])
    ans = film.ask("Nobody ever reads the letter.", kind="claim", policy="subtitles", backbone=b)
    assert (ans.choice, ans.text, ans.invalid) == ("FALSE", "FALSE", False)
    assert b.calls[0].json_schema["properties"]["answer"]["enum"] == ["TRUE", "FALSE"]
    b2 = scripted(['{"answer": "Because a letter told them where it was.", "confidence": 3}'])
    ans2 = film.ask("Why do they go there?", kind="open", policy="hybrid", backbone=b2)
    assert ans2.choice is None and ans2.text.startswith("Because") and not ans2.invalid


@pytest.mark.parametrize("reply", ["I am not sure.", '{"answer": "E", "confidence": 3}', "", "A or B"])
def test_invalid_replies_give_invalid_answers(film, reply):
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="closed-book", backbone=scripted([reply]))
    assert ans.invalid and ans.choice is None and ans.text == ""


def test_parsing_fallbacks():
    q = Question.make("Who?", OPTIONS)
    cases = {'{"answer": "C"}': "C", "```json\n{\"answer\": \"(d)\", \"confidence\": 2}\n```": "D",
             "The answer is B.": "B", "B": "B", "(A)": "A", "Charlie": "C", "C) Charlie because...": "C",
             "I think it is Delta.": "D", "Option A": "A"}
    for text, want in cases.items():
        got = parse_answer(text, q)
        assert not got.invalid and got.choice == want, text
    for bad in ["A letter was sent", "Alpha or Bravo", "The answer is A, or maybe B", "no idea", "E"]:
        assert parse_answer(bad, q).invalid, bad
    claim = Question.make("It rains.", kind="claim")
    assert parse_answer("True.", claim).choice == "TRUE"
    assert parse_answer("true or false?", claim).invalid
    with pytest.raises(MovieMemError):
        Question.make("Who?", ["only one"])


# ----------------------------------------------------------------------------- real model smoke


@pytest.mark.parametrize("policy", TEXT_POLICIES)
def test_text_policies_with_local_small(film, policy):
    from moviemem.backbones import load

    b = load("local-small")
    ans = ask(film, "Who brings the letter?", OPTIONS, policy=policy, backbone=b, max_tokens=24,
              **({"max_steps": 2, "step_max_tokens": 48} if policy == "archival" else {}))
    assert ans.policy == policy and ans.backbone == "local-small"
    assert ans.usage.input_tokens > 0 and ans.usage.latency_s > 0
    assert ans.invalid or ans.choice in "ABCD"
    assert any(s.kind == "prompt" for s in ans.trace)


def test_graph_policy_answers_from_the_path(synth_film, tmp_path):
    from events_rows import add_truth_events

    lib, gf = synth_film.copy_to(tmp_path / "lib")
    # every ingested film has the rule graph; the trace says which graph was read
    ruled = ask(gf, "Why?", OPTIONS, policy="graph", backbone=scripted())
    assert ruled.choice == "B" and any("graph made by rules" in str(s.data) for s in ruled.trace)
    truth = synth_film.truth
    add_truth_events(lib, gf.film_id, truth)
    gf = lib.film(gf.film_id)
    item = json.loads((synth_film.dir / "mcq.jsonl").read_text().splitlines()[0])
    b = scripted()
    ans = ask(gf, item["question"], item["options"], policy="graph", backbone=b)
    text = b.calls[0].messages[-1].text
    for opt in item["options"]:  # every option's event is matched and shown
        assert opt in text
    assert re.search(r"^e\d+: \d\d:\d\d:\d\d-\d\d:\d\d:\d\d, story step \d+", text, re.M)
    assert "[flashback]" in text or not any(e["story_order"] < i + 1 for i, e in enumerate(truth["events"]))
    kinds = {e.kind for e in ans.evidence}
    assert "event" in kinds and "relation" in kinds and ans.choice == "B"
    hb = scripted(['{"answer": "A", "confidence": 2, "evidence": []}'])
    hyb = ask(gf, "Why does Peter go to the lighthouse?", OPTIONS, policy="hybrid", backbone=hb)
    assert any(e.kind == "event" for e in hyb.evidence)


def test_cli_ask_json_shape_and_policies(cli, synth_film, lib_dir):
    synth_film.copy_to(lib_dir)
    res = cli("ask", "synth", "Who brings the letter?", *[a for o in OPTIONS for a in ("--option", o)],
              "--policy", "subtitles", "--backbone", 'scripted:{"answer": "C", "confidence": 2}', "--until", "0:01:00",
              "--json")
    assert res.code == 0, res.err
    data = res.json()
    assert set(data) == {"choice", "text", "confidence", "invalid", "policy", "backbone", "evidence", "usage", "trace",
                         "replayed", "reason", "grounded"}
    assert data["grounded"] is True and data["reason"] is None
    assert (data["choice"], data["text"], data["invalid"], data["policy"]) == ("C", "Charlie", False, "subtitles")
    assert data["evidence"] and set(data["evidence"][0]) == {"kind", "start", "end", "text", "score", "retriever", "id", "cited"}
    assert all(e["end"] <= 60 for e in data["evidence"])
    assert set(data["usage"]) == {"input_tokens", "output_tokens", "images", "latency_s", "cost_usd", "calls", "faults",
                                  "replayed_calls"}
    assert data["usage"]["calls"] == 1 and data["replayed"] is False
    assert any(s["kind"] == "prompt" and s["prompt"] == "subtitles" for s in data["trace"])
    bad = cli("ask", "synth", "Who?", "--option", "only", "--backbone", "scripted")
    assert bad.code == 2 and "needs 2 to" in bad.err and bad.err.count("\n") == 1
    unknown = cli("ask", "synth", "Who?", "--policy", "hybrid", "--set", "nope=1", "--backbone", "scripted")
    assert unknown.code == 2 and "no setting 'nope'" in unknown.err
    pols = cli("policies", "--json", library=False)
    assert pols.code == 0
    names = {p["name"]: p for p in pols.json()["policies"]}
    assert names["videoagent"]["defaults"]["max_rounds"] == 3 and "hybrid" in names


# ----------------------------------------------------------------------------- ACE: candidates and a selector


def _by_seed(request):
    """Candidate k (seed k) answers letter k; the selector (no seed) picks candidate 2."""
    if request.seed is None:
        assert "Candidate answers" in request.messages[-1].text
        return '{"best": 2}'
    return json.dumps({"answer": "ABCD"[request.seed - 1], "confidence": 2})


def test_ace_samples_candidates_and_the_selector_picks(film, tmp_path):
    from moviemem.backbones import ReplayCache

    inner = ScriptedBackbone(_by_seed)
    b = ReplayCache(inner, tmp_path / "cache.sqlite", mode="readwrite")
    ans = ask(film, "Who brings the letter?", OPTIONS, policy="ace", backbone=b,
              base="subtitles", candidates=3, temperature=0.6)
    seeds = [r.seed for r in inner.calls]
    assert seeds == [1, 2, 3, None]  # three seeded samples, then one selection call
    assert all(r.temperature == 0.6 for r in inner.calls[:3]) and inner.calls[3].temperature == 0.0
    selection = inner.calls[3].messages[-1].text
    assert "1. A. Alpha" in selection and "3. C. Charlie" in selection
    assert ans.choice == "B" and ans.text == "Bravo" and not ans.invalid and ans.policy == "ace"
    assert ans.evidence and all(e.kind == "utterance" for e in ans.evidence)  # the chosen candidate's evidence
    assert {s.data.get("candidate") for s in ans.trace if s.kind == "prompt"} == {1, 2, 3, None}  # None: selection
    assert any(s.kind == "prompt" and s.data["prompt"] == "ace-select" for s in ans.trace)
    assert ans.usage.input_tokens > 0 and ans.usage.output_tokens > 0
    again = ask(film, "Who brings the letter?", OPTIONS, policy="ace", backbone=b,
                base="subtitles", candidates=3, temperature=0.6)
    assert len(inner.calls) == 4 and again.choice == "B"  # every candidate and the selection replayed


def test_ace_agreement_skips_the_selector_and_bad_selection_is_invalid(film):
    agree = scripted(['{"answer": "C", "confidence": 3}'] * 3)
    ans = ask(film, "Q?", OPTIONS, policy="ace", backbone=agree, base="closed-book")
    assert ans.choice == "C" and len(agree.calls) == 3
    assert any("agree" in s.data.get("text", "") for s in ans.trace if s.kind == "note")

    bad = scripted(['{"answer": "A", "confidence": 3}', '{"answer": "B", "confidence": 3}', '{"best": 7}'])
    ans = ask(film, "Q?", OPTIONS, policy="ace", backbone=bad, base="closed-book", candidates=2)
    assert ans.invalid and ans.choice is None and ans.error  # never a default pick
    assert len(bad.calls) == 3

    selector = scripted(['{"best": 1}'])
    two = scripted(['{"answer": "A", "confidence": 3}', '{"answer": "D", "confidence": 1}'])
    ans = ask(film, "Q?", OPTIONS, policy="ace", backbone=two, base="closed-book", candidates=2, selector=selector)
    assert ans.choice == "A" and len(selector.calls) == 1


def test_ace_open_answers_and_settings(film):
    b = scripted(['{"answer": "He wants the money.", "confidence": 2}', '{"answer": "Out of love.", "confidence": 2}',
                  '{"best": 2}'])
    ans = ask(film, "Why does Tom stay?", kind="open", policy="ace", backbone=b, base="closed-book", candidates=2)
    assert ans.text == "Out of love." and ans.choice is None
    assert "2. Out of love." in b.calls[-1].messages[-1].text
    for bad, msg in (({"candidates": 1}, "2 to 16 candidates"), ({"temperature": 0}, "above 0"), ({"base": "ace"}, "itself"),
                     ({"base": "telepathy"}, "unknown policy"), ({"base_settings": {"nope": 1}}, "no setting")):
        with pytest.raises(MovieMemError, match=msg):
            get_policy("ace", **bad)


# ----------------------------------------------------------------------------- films without video


@pytest.fixture(scope="module")
def text_films(synth_film, tmp_path_factory):
    """The synthetic film's dialogue as a text-only film (with its true events committed), and its
    description track as a second text-only film: what MF2- and Movie101-style releases give."""
    from events_rows import add_truth_events

    from moviemem import Library

    lib = Library(tmp_path_factory.mktemp("textfilms") / "lib", synth_film.lib.settings)
    dialogue = lib.ingest_text(synth_film.dir / "subtitles.srt", film_id="dialogue", title="Synthetic", year=2026)
    add_truth_events(lib, dialogue.film_id, synth_film.truth)
    described = lib.ingest_text(synth_film.dir / "captions.srt", film_id="described", as_="captions")
    return lib.film("dialogue"), described


TEXT_FILM_POLICIES = [("closed-book", "dialogue"), ("subtitles", "dialogue"), ("archival", "dialogue"),
                      ("graph", "dialogue"), ("hybrid", "dialogue"), ("socratic-clip", "described"),
                      ("socratic-frame", "described"), ("hybrid", "described"), ("archival", "described")]


@pytest.mark.parametrize(("policy", "which"), TEXT_FILM_POLICIES)
def test_text_policies_on_text_only_films_with_local_small(text_films, policy, which):
    from moviemem.backbones import load

    dialogue, described = text_films
    f = dialogue if which == "dialogue" else described
    assert not f.info.has_video
    extra = {"max_steps": 2, "step_max_tokens": 48} if policy == "archival" else {}
    ans = ask(f, "Who brings the letter?", OPTIONS, policy=policy, backbone=load("local-small"), max_tokens=24, **extra)
    assert ans.policy == policy and ans.usage.input_tokens > 0
    assert ans.invalid or ans.choice in "ABCD"
    if policy not in ("closed-book", "archival"):  # archival searches only if the model decides to
        assert ans.evidence and all(e.film_id == f.film_id for e in ans.evidence)
        assert not any(e.kind in ("frame", "onscreen") for e in ans.evidence)
