"""Events stage (extraction, relations, flashbacks, story order) and the NarrativeGraph.

Exact behaviour is checked with a scripted backbone on a small text-only film; one smoke test
runs the real `local-small` model on a copy of the synthetic film.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import networkx as nx
import pytest
from conftest import make_video

from moviemem import Library, MovieMemError, register
from moviemem.backbones import Reply, Request, ScriptedBackbone, user
from moviemem.backbones.structured import Ask, ask_json
from moviemem.foundation.config import get_settings
from moviemem.graph import NarrativeGraph, NarrativeGraphWarning
from moviemem.graph.events import Line, parse_events, split_by_segment
from moviemem.graph.flashbacks import TimedEvent, story_time
from moviemem.graph.relations import PairParams
from moviemem.ingest.stages.events import EventsStage
from moviemem.memory.lines import Span
from moviemem.memory.schema import EventRow, RelationRow, SegmentRow

# ----------------------------------------------------------------------------- graph logic


def _ev(eid: str, start: float, story: int = -1, desc: str = "") -> EventRow:
    return EventRow(film_id="f", event_id=eid, trigger="do", args=json.dumps({"ARG0": "Anna"}),
                    description=desc or f"event {eid}", start=start, end=start + 5, story_order=story)


def _rel(src: str, dst: str, typ: str, conf: float = 0.8) -> RelationRow:
    return RelationRow(film_id="f", src=src, dst=dst, type=typ, confidence=conf, rationale=f"{src} {typ} {dst}")


def _graph(**kw) -> NarrativeGraph:
    events = [_ev("a", 0, 1), _ev("b", 10, 2), _ev("c", 20, 3), _ev("d", 30, 4), _ev("f", 40, 0), _ev("z", 50, 5)]
    rels = [_rel("a", "b", "causal", 0.9), _rel("b", "c", "causal", 0.8), _rel("c", "d", "precondition", 0.7),
            _rel("a", "d", "causal", 0.6), _rel("f", "d", "flashback", 0.9), _rel("d", "z", "overlap", 0.5),
            _rel("f", "a", "coreference", 0.4)]
    return NarrativeGraph.from_rows(events, rels, film_id="f", **kw)


def test_chain_causes_effects_and_orders() -> None:
    g = _graph()
    assert g.problems == []
    assert g.chain("a", "d") == ["a", "b", "c", "d"]  # three confident steps beat the 0.6 shortcut
    assert g.chain("a", "d", types={"causal"}) == ["a", "d"]
    assert g.chain("d", "a") == [] and g.chain("b", "b") == ["b"]
    assert g.causes_of("d") == ["c", "a"] and g.effects_of("a") == ["b", "d"]
    assert g.causes_of("d", types={"flashback"}) == ["f"]
    assert g.screen_order() == ["a", "b", "c", "d", "f", "z"] == list(g)
    assert g.story_order() == ["f", "a", "b", "c", "d", "z"]
    assert g.flashbacks() == ["f"]
    assert g.event("f")["args"] == {"ARG0": "Anna"} and g.event("f")["story_order"] == 0
    with pytest.raises(MovieMemError, match="no event 'nope'"):
        g.chain("a", "nope")
    with pytest.raises(MovieMemError, match="unknown relation type"):
        g.effects_of("a", types={"causes"})


def test_flashbacks_from_story_order_alone() -> None:
    g = NarrativeGraph.from_rows([_ev("a", 0, 0), _ev("b", 10, 2), _ev("c", 20, 1), _ev("d", 30, -1)], [])
    assert g.flashbacks() == ["c"]  # shown after b, happens before it
    assert g.story_order() == ["a", "c", "b", "d"]  # unranked events last, in screen order


def test_neighborhood_by_hops_and_types() -> None:
    g = _graph()
    causal = g.neighborhood("a", hops=1, types={"causal", "precondition"})
    assert sorted(causal) == ["a", "b", "d"]
    assert {(e["source"], e["target"]) for e in causal.edges()} == {("a", "b"), ("a", "d")}
    assert sorted(g.neighborhood(["a"], hops=2, types={"causal", "precondition"})) == ["a", "b", "c", "d"]
    # edges are followed in both directions; other types are not followed
    assert sorted(g.neighborhood("z", hops=1, types={"overlap"})) == ["d", "z"]
    assert sorted(g.neighborhood("z", hops=2)) == ["a", "c", "d", "f", "z"]  # b is 3 hops away
    assert list(g.neighborhood("b", hops=0)) == ["b"]
    sub = g.neighborhood("d", hops=1, types={"flashback", "causal"})
    assert sorted(sub) == ["a", "d", "f"] and sub.flashbacks() == ["f"]


def test_before_after_cycles_are_reported_and_broken() -> None:
    events = [_ev("a", 0), _ev("b", 10), _ev("c", 20)]
    rels = [_rel("a", "b", "before", 0.9), _rel("b", "c", "before", 0.8), _rel("a", "c", "after", 0.3),
            _rel("a", "c", "causal", 0.5)]
    with pytest.warns(NarrativeGraphWarning, match="temporal cycle"):
        g = NarrativeGraph.from_rows(events, rels, film_id="f")
    assert len(g.problems) == 1 and "dropped a after c (confidence 0.3)" in g.problems[0]
    assert {(e["source"], e["target"], e["type"]) for e in g.edges()} == {
        ("a", "b", "before"), ("b", "c", "before"), ("a", "c", "causal")}
    with pytest.warns(NarrativeGraphWarning):
        kept = NarrativeGraph.from_rows(events, rels, break_cycles=False)
    assert kept.problems[0].startswith("temporal cycle") and len(kept.edges(types={"after"})) == 1
    with pytest.warns(NarrativeGraphWarning, match="causal cycle"):
        g2 = NarrativeGraph.from_rows(events, [_rel("a", "b", "causal", 0.9), _rel("b", "a", "precondition", 0.2)])
    assert g2.chain("a", "b") == ["a", "b"] and g2.edges(types={"precondition"}) == []


def test_json_and_graphml_export(tmp_path: Path) -> None:
    g = _graph()
    data = json.loads(json.dumps(g.to_json()))
    assert [n["id"] for n in data["nodes"]] == g.screen_order()
    assert set(data["nodes"][0]) >= {"id", "trigger", "description", "start", "end", "story_order", "args"}
    edge = next(e for e in data["edges"] if e["type"] == "flashback")
    assert edge["source"] == "f" and edge["target"] == "d" and edge["confidence"] == 0.9 and edge["rationale"]
    assert nx.node_link_graph(data, edges="edges").number_of_edges() == 7
    path = g.to_graphml(tmp_path / "out" / "g.graphml")
    back = nx.read_graphml(path)
    assert back.number_of_nodes() == 6 and back.number_of_edges() == 7
    assert json.loads(back.nodes["a"]["args"]) == {"ARG0": "Anna"} and back.nodes["f"]["story_order"] == 0


# ----------------------------------------------------------------------------- flashbacks and parsing


def test_story_time_from_cues() -> None:
    events = [TimedEvent("e1", 0, 10, "Anna reads a letter"), TimedEvent("e2", 40, 50, "Ben looks down"),
              TimedEvent("e3", 55, 70, "Ben hides a box"), TimedEvent("e4", 70, 80, "Ben gives the box to Anna")]
    spans = [Span(40, 50, "Years ago I hid it here.", "dialogue"), Span(50, 55, "YEARS EARLIER", "onscreen"),
             Span(55, 70, "Flashback in sepia: Ben in the barn.", "caption")]
    st = story_time(events, spans)
    (b,) = st.blocks
    assert (b.start, b.end, b.events, b.anchor, b.distant) == (50, 70, ["e3"], "e2", True)
    assert [(e.src, e.dst, e.confidence) for e in st.edges] == [("e3", "e2", 0.9)]
    assert "YEARS EARLIER" in st.edges[0].rationale and "Years ago" in st.edges[0].rationale
    assert sorted(st.story_order, key=st.story_order.get) == ["e3", "e1", "e2", "e4"]
    # a recent memory goes right before the event that recalls it, not to the start
    recent = [Span(40, 50, "I remember last night.", "dialogue"), Span(55, 70, "Flashback: Ben at the barn.", "caption")]
    st2 = story_time(events, recent)
    assert not st2.blocks[0].distant
    assert sorted(st2.story_order, key=st2.story_order.get) == ["e1", "e3", "e2", "e4"]
    # marked without any dialogue cue: anchored to the last event shown before it, lower confidence
    st3 = story_time(events, [Span(55, 70, "In sepia, Ben hides a box.", "caption")])
    assert [(e.src, e.dst, e.confidence) for e in st3.edges] == [("e3", "e2", 0.7)]
    # "years ago" said in dialogue does not make the telling itself a flashback; a film that opens marked has none
    assert story_time(events, [Span(40, 50, "Years ago I hid it.", "dialogue")]).blocks == []
    assert story_time(events, [Span(0, 10, "Flashback: Anna as a child.", "caption")]).blocks == []


def test_lines_segments_and_event_parsing() -> None:
    lines = [Line(1, 3, "dialogue", "Hello.", "Anna"), Line(2, 4, "caption", "Anna waves."),
             Line(59, 63, "onscreen", "EXIT"), Line(70, 75, "caption", "Ben leaves.")]
    segs = [SegmentRow(film_id="f", seg_idx=0, start=0, end=60), SegmentRow(film_id="f", seg_idx=1, start=60, end=80)]
    parts = split_by_segment(lines, segs)
    assert [[ln.text for ln in ls] for _, ls in parts] == [["Hello.", "Anna waves."], ["EXIT", "Ben leaves."]]
    assert lines[0].render() == '[1.0-3.0] Anna says: "Hello."' and lines[2].render().startswith("[59.0-63.0] on-screen")
    data = {"events": [
        {"predicate": "Wave", "roles": {"ARG0": "Anna", "ARGX": "junk", "ARG1": " "}, "description": "Anna  waves\nhello",
         "seconds": [3.5, 1]},  # reversed, and snapped to the lines it covers
        {"predicate": "wave", "roles": {}, "description": "anna waves hello", "seconds": [2, 3]},  # duplicate
        {"predicate": "leave", "roles": {}, "description": "Ben leaves", "seconds": [70, 75]},  # not in this part
        {"predicate": "stand", "roles": {}, "description": "Anna stands", "seconds": [5]},  # not a [first, last] pair
    ]}
    got, rejects = parse_events(data, segs[0], parts[0][1])
    assert [(e.trigger, e.args, e.description, e.start, e.end) for e in got] == [
        ("wave", {"ARG0": "Anna"}, "Anna waves hello", 1, 4)]
    assert [r["why"] for r in rejects] == ["its seconds cover no line of this segment"] * 2


def test_ask_json_retries_then_records() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    b = ScriptedBackbone(["not json", '{"n": 3}', '{"m": 1}', "{", "nope"])
    answers = ask_json(b, [Ask("one", [user("q1")]), Ask("two", [user("q2")])], schema, max_tokens=20, attempts=2)
    # round 1: one -> "not json", two -> {"n": 3}; round 2: one -> {"m": 1} (no n): failed after 2 attempts
    assert answers[1].ok and answers[1].data == {"n": 3} and answers[1].attempts == 1
    assert not answers[0].ok and answers[0].attempts == 2 and answers[0].raw == '{"m": 1}'
    assert answers[0].errors == ["reply is not JSON", "reply does not match the schema: $ is missing 'n'"]
    retry = b.calls[2]
    assert [m.role for m in retry.messages] == ["user", "assistant", "user"]
    assert "could not be used (reply is not JSON)" in retry.messages[-1].text
    flaky = ScriptedBackbone([Reply.failed("connection reset", transient=True)])
    with pytest.raises(MovieMemError, match="rerun to resume"):
        ask_json(flaky, [Ask("x", [user("q")])], schema, max_tokens=20)


# ----------------------------------------------------------------------------- the stage, scripted

CAPTIONS = [
    (0, 10, "Anna finds a letter on the doormat."),
    (10, 20, "Anna reads the letter from her grandfather."),
    (20, 40, "Anna drives to the old barn."),
    (40, 50, "Ben looks down, remembering."),
    (50, 55, "A card reads 'YEARS EARLIER'."),
    (55, 70, "Flashback in sepia: young Ben hides a box in the barn."),
    (70, 80, "Ben gives the box to Anna."),
]
TRIGGERS = {"finds": "find", "reads": "read", "drives": "drive", "looks": "look", "hides": "hide", "gives": "give"}
RELATIONS = {("e001", "e002"): ("causal", 0.9), ("e002", "e003"): ("causal", 0.8), ("e005", "e006"): ("precondition", 0.7),
             ("e003", "e004"): ("before", 0.6)}
BROKEN = ("e001", "e003")  # always answered with junk: recorded, not fatal
LINE = re.compile(r"^\[([\d.]+)-([\d.]+)\] we see: (.*)$", re.M)
PAIR = re.compile(r"Event A: (e\d+) .*\nEvent B: (e\d+) ")


def film_script(request: Request) -> str:
    text = request.messages[-1].text if request.messages[-1].role == "user" else ""
    prompt = request.messages[1].text
    if "Sum up this scene" in prompt:  # the scenes stage writes its summaries with the chosen backbone too
        return '{"summary": "Anna finds a letter, drives to the barn and hides the box."}'
    if "List at most" in prompt:
        if "Anna finds" in prompt and "could not be used" not in text:
            return "Sure! Here are the events: Anna finds"  # first attempt at segment 0 is not JSON
        events = []
        for t0, t1, line in LINE.findall(prompt):
            if "card" in line:
                continue
            verb = next(w for w in line.split() if w.strip(",") in TRIGGERS).strip(",")
            events.append({"predicate": TRIGGERS[verb], "roles": {"ARG0": line.split()[0] if line[0] != "F" else "Ben"},
                           "description": line.rstrip("."), "seconds": [float(t0) + 0.5, float(t1) - 0.5]})
        return json.dumps({"events": events})
    a, b = PAIR.search(prompt).groups()
    if (a, b) == BROKEN:
        return '{"rationale": "x", "relation": "causal", "score": 7}'  # out of range on every attempt
    typ, conf = RELATIONS.get((a, b), ("none", 0.5))
    return json.dumps({"rationale": f"{a} then {b}\nsecond line", "relation": typ, "score": conf})


_SCRIPTS = {"film": film_script}
_MADE: list[ScriptedBackbone] = []


@register("backbone", "test-events")
def _scripted(arg: str | None, **options) -> ScriptedBackbone:
    """Test-only: scripted replies for the events stage."""
    b = ScriptedBackbone(_SCRIPTS[arg or "film"], name=f"test-events:{arg}", model_id=f"test-events-{arg}", **options)
    _MADE.append(b)
    return b


def _text_film(tmp_path: Path, backbone: str | None = "test-events:film"):
    cues = tmp_path / "narration.json"
    cues.write_text(json.dumps([{"start": a, "end": b, "text": t} for a, b, t in CAPTIONS]))
    lib = Library(tmp_path / "lib", get_settings(library=tmp_path / "lib", backbone=backbone, events_mode="extract"))
    film = lib.ingest_text(cues, film_id="barn", title="The Barn", as_="captions", duration_s=80)
    return lib, film


def test_events_stage_with_a_scripted_backbone(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _MADE.clear()
    lib, film = _text_film(tmp_path)
    run = {s.stage: s for s in film.stages()}["events"]
    assert run.status == "done", run
    params = json.loads(run.params)
    assert params["backbone"] == "test-events:film" and params["prompts"] == ["events.extract@v2", "relations.classify@v1"]
    assert params["embedder"] == "minilm" and run.model == "test-events-film"
    events = film.events()
    assert [(e.event_id, e.trigger, e.start, e.end, e.seg_idx) for e in events] == [
        ("e001", "find", 0, 10, 0), ("e002", "read", 10, 20, 0), ("e003", "drive", 20, 40, 0),
        ("e004", "look", 40, 50, 0), ("e005", "hide", 55, 70, 1), ("e006", "give", 70, 80, 1)]
    assert json.loads(events[0].args) == {"ARG0": "Anna"} and len(events[0].vector) == 384
    assert [e.story_order for e in events] == [1, 2, 3, 4, 0, 5]
    rels = {(r.src, r.dst): r for r in film.relations()}
    assert {k: (r.type, r.confidence) for k, r in rels.items()} == {
        ("e001", "e002"): ("causal", 0.9), ("e002", "e003"): ("causal", 0.8), ("e003", "e004"): ("before", 0.6),
        ("e005", "e006"): ("precondition", 0.7), ("e005", "e004"): ("flashback", 0.9)}
    assert rels[("e001", "e002")].rationale == "e001 then e002 second line"
    assert "YEARS EARLIER" in rels[("e005", "e004")].rationale
    # pairs are asked in story order: the flashback event comes first
    asked = {PAIR.search(c.messages[1].text).groups() for b in _MADE for c in b.calls if "Event A:" in c.messages[1].text}
    assert ("e005", "e004") in asked and ("e004", "e005") not in asked
    # a retry fixed segment 0; the broken pair was recorded after 3 attempts
    assert "1 unusable model outputs recorded" in run.reason
    (record,) = (lib.store.media_dir("barn") / "events" / run.run_id).glob("invalid.jsonl")
    bad = [json.loads(x) for x in record.read_text().splitlines()]
    assert [(b["step"], b["key"], b["attempts"]) for b in bad] == [("relate", "relation e001->e003", 3)]
    assert bad[0]["errors"] == ["score (confidence) must be a number from 0 to 1"] * 3

    g = film.graph()
    assert g.chain("e001", "e003") == ["e001", "e002", "e003"] and g.flashbacks() == ["e005"]
    assert g.story_order()[:2] == ["e005", "e001"] and g.causes_of("e006") == ["e005"]
    assert len(film.until(45).graph()) == 3  # no future events in an until() view

    res = cli("graph", "barn", "--json", "--library", str(lib.path), library=False)
    assert res.code == 0, res.err
    data = res.json()
    assert [n["id"] for n in data["nodes"]] == [e.event_id for e in events]
    assert {k for n in data["nodes"] for k in n} >= {"id", "trigger", "description", "start", "end", "story_order"}
    assert {(e["source"], e["target"], e["type"]) for e in data["edges"]} >= {("e005", "e004", "flashback")}
    assert all(set(e) >= {"source", "target", "type", "confidence", "rationale"} for e in data["edges"])
    out = tmp_path / "barn.graphml"
    res = cli("graph", "barn", "--graphml", str(out), "--library", str(lib.path), library=False)
    assert res.code == 0 and nx.read_graphml(out).number_of_nodes() == 6
    res = cli("graph", "barn", "--library", str(lib.path), library=False)
    assert res.code == 0 and "flashbacks: e005" in res.out

    # rerun: cached; changed params recompute, and the replay cache answers the repeated requests
    again = lib.ingest_text(tmp_path / "narration.json", film_id="barn", as_="captions", duration_s=80)
    # (two backbones were made by the first ingest: the scenes stage's summaries and the events stage's)
    assert {s.stage: s.run_id for s in again.stages()}["events"] == run.run_id and len(_MADE) == 2
    monkeypatch.setattr(EventsStage, "pairs", PairParams(window=1, similar=0))
    again = lib.ingest_text(tmp_path / "narration.json", film_id="barn", as_="captions", duration_s=80)
    assert {s.stage: s.run_id for s in again.stages()}["events"] != run.run_id
    assert len(_MADE) == 3 and _MADE[2].calls == [] and len(again.events()) == 6


def test_events_stage_without_backbone_builds_the_rule_graph(tmp_path: Path, cli) -> None:
    lib, film = _text_film(tmp_path, backbone=None)
    run = {s.stage: s for s in film.stages()}["events"]
    assert run.status == "done" and run.model == "rules" and run.reason.startswith("rules: ")
    assert len(film.graph()) > 0 and film.graph().made_by() == "rules"
    res = cli("graph", "barn", "--json", "--library", str(lib.path), library=False)
    assert res.code == 0 and res.json()["made_by"] == "rules"
    res = cli("graph", "nope", "--library", str(lib.path), library=False)
    assert res.code == 2
    # asking for the stage with a backbone now runs the model in place of the rules
    res = cli("ingest", "--text", str(tmp_path / "narration.json"), "--as", "captions", "--duration", "80",
              "--film-id", "barn", "--stages", "events", "--backbone", "test-events:film", "--events-mode", "extract", "--json",
              "--library", str(lib.path), library=False)
    assert res.code == 0, res.err
    assert res.json()["counts"]["events"] == 6 and res.json()["counts"]["relations"] == 5
    g = Library(lib.path, get_settings(library=lib.path)).film("barn").graph()
    assert g.made_by() == "model+rules"  # the flashback edge comes from the cue rules
    assert {e["made_by"] for e in g.edges()} == {"model", "rules"}
    # a plain ingest without a backbone keeps the model's graph
    again = Library(lib.path, get_settings(library=lib.path)).ingest_text(
        tmp_path / "narration.json", film_id="barn", as_="captions", duration_s=80)
    assert again.graph().made_by() == "model+rules" and len(again.events()) == 6
    lib2 = Library(lib.path, get_settings(library=lib.path, backbone="test-events:film"))
    # a film with nothing to read (silent, no text on screen, no captions) is skipped, no backbone loaded
    _MADE.clear()
    blank = lib2.ingest(make_video(tmp_path / "silent.mp4", seconds=3.0, audio=False), film_id="silent")
    run = {s.stage: s for s in blank.stages()}["events"]
    assert (run.status, run.reason) == ("skipped", "no captions, utterances or on-screen text to extract events from")
    assert _MADE == []


# ----------------------------------------------------------------------------- real model smoke test


@pytest.mark.slow
def test_events_stage_smoke_with_local_small(synth_film, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp")
    # keep the run short (a 135M model on a CPU): two events a part, a reply budget that holds them, 4 pairs
    monkeypatch.setattr(EventsStage, "pairs", PairParams(max_pairs=4))
    monkeypatch.setattr(EventsStage, "max_events", 2)
    monkeypatch.setattr(EventsStage, "extract_tokens", 400)
    from moviemem.models import model_path

    try:
        model_path("local-small")
    except MovieMemError as exc:
        pytest.skip(f"local-small is not prepared: {exc}")
    lib, film = synth_film.copy_to(tmp_path / "lib")
    settings = get_settings(library=tmp_path / "lib", backbone="local-small", clip_pretrained="random", events_mode="extract")
    lib = Library(tmp_path / "lib", settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrativeGraphWarning)
        film = lib.ingest(synth_film.dir / "film.mp4", film_id="synth", stages=["events"])
        run = {s.stage: s for s in film.stages()}["events"]
        assert run.status == "done" and run.model.startswith("llamacpp:"), run
        print(f"\nlocal-small events stage: {run.reason}")  # what it got, for the log
        events, g = film.events(), film.graph()
    assert events and len(g) == len(events)
    for e in events:
        assert e.trigger and e.description and 0 <= e.start <= e.end <= film.info.duration_s + 1 and e.story_order >= 0
    assert sorted(e.story_order for e in events) == list(range(len(events)))
    assert all(r.type in {"before", "after", "overlap", "causal", "precondition", "hierarchical", "coreference",
                          "flashback"} and 0 <= r.confidence <= 1 for r in film.relations())
    json.dumps(g.to_json())
