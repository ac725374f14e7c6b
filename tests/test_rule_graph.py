"""Scenes and the rule graph (no model) on small hand-written English, and end to end on a tiny
text-only film: scenes, the graph built by default, the graph policy answering from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moviemem.graph.rule_graph import build_graph, eventful, stem, trigger_of
from moviemem.graph.scenes import RegistryCast, Scene, TextLine, build_scenes, central_lines, names_in, split_at_gaps, summarize


def say(start: float, text: str, who: str = "", ref: int = 0, dur: float = 4.0) -> TextLine:
    return TextLine(start, start + dur, "dialogue", text, f"utterances:{ref}", who)


def see(start: float, text: str, ref: int = 0, dur: float = 4.0) -> TextLine:
    return TextLine(start, start + dur, "caption", text, f"captions:{ref}")


def card(start: float, text: str, ref: int = 0, dur: float = 3.0) -> TextLine:
    return TextLine(start, start + dur, "onscreen", text, f"onscreen:{ref}")


# ----------------------------------------------------------------------------- pieces


def test_names_are_capitalised_words_not_opening_a_sentence() -> None:
    assert names_in("Later that night, Anna meets Tom at the station.") == ["Anna", "Tom"]
    assert names_in("Peter, wait! I never said that.") == []  # "Peter" opens the sentence: not known yet
    assert names_in("Hi, Peter. Wait.", known=frozenset({"Peter"})) == ["Peter"]
    assert names_in("The car stops. We wait.") == []
    assert names_in("Thanks, Doctor Moreau. Tell Ruth I called.") == ["Doctor", "Moreau", "Ruth"]
    # a name opening a sentence counts once the film has shown it as a name elsewhere
    assert names_in("Maria hides the money.") == []
    assert names_in("Maria hides the money.", known=frozenset({"Maria"})) == ["Maria"]


def test_a_scene_lists_the_registry_characters_in_it_then_the_other_names_its_descriptions_use() -> None:
    lines = [
        say(0, "Sit down, Mr. Berg. The FBI called about Anna.", ref=0),
        say(4, "Ask the Sheriff. They call him 'Snowball' in Boston.", who="v1", ref=1),
        say(8, "It is a secret, like the service we got. Iisten to me, Berg.", ref=2),
        say(12, "Call the Secret Service and Hollis now.", ref=3),
        say(16, "Don't listen to him.", ref=4),
        say(18, 'We met Mr Major at Kessler\'s garage. He said "Ruth, come back here right now" twice.', ref=5),
        see(20, "Nils drives Anna and Ruth from Boston to the Sheriff in a car from the United States.", ref=0),
    ]
    cast = RegistryCast({"Nils": ("Nils", "Berg"), "Greta": ("Greta",)}, {"utterances:1": ("Greta",)})
    (scene,) = build_scenes(lines, [(0.0, 25.0)], cast=cast)
    # Berg is one of Nils's names; Greta speaks line 1; the registry has judged the names the dialogue
    # gives (Anna, Hollis... are no one it registered); the caption names who is on screen, but not a
    # role ("Sheriff") nor places ("from Boston", "the United States")
    assert scene.names == ["Nils", "Greta", "Anna", "Ruth"]
    assert scene.summary.startswith("With Nils, Greta, Anna, Ruth.")
    quoted = Scene(0, 0.0, 4.0, [say(0, '"Lately".')], central=[say(0, '"Lately".')])
    assert summarize(quoted, {}) == '"\'Lately\'."'  # a quote inside the quote is nested, not doubled
    # without a registry: each line's speaker and the names of every line, aliases not merged. Left
    # out: a role ("Sheriff"), a quoted nickname, an acronym ("FBI"), words written in lower case
    # elsewhere ("Secret", "Service"), "Iisten" (a misread "listen"), places (Boston, "at Kessler's
    # garage"), "Nils" opening the only sentence that says it; "Major" is a rank, but a name after a
    # title; a long quotation keeps its names
    (bare,) = build_scenes(lines, [(0.0, 25.0)])
    assert bare.names == ["Berg", "Anna", "Ruth", "v1", "Hollis", "Major"]


def test_a_longer_name_is_its_character_s_before_a_shorter_one_is_another_s() -> None:
    cast = RegistryCast({"Carter": ("Carter",), "Miss Carter": ("Miss Carter",)})
    (scene,) = build_scenes([say(0, "Howdy Miss Carter, going home?", ref=0)], [(0.0, 5.0)], cast=cast)
    assert scene.names == ["Miss Carter"]  # not her father's "Carter"


def test_stems_triggers_and_eventful_lines() -> None:
    assert stem("opens") == stem("opening") == "open" and stem("found") == "found"
    assert trigger_of("Anna opens the gate of the farm.", ["Anna"]) == "open"
    assert eventful(say(0, "We sold the house because the bank wanted its money."))
    assert eventful(say(0, "I'm going to call the doctor tonight."))
    assert not eventful(say(0, "Yes."))
    assert not eventful(say(0, "Good evening, how are you?"))


def test_split_at_gaps_cuts_long_pauses_and_overlong_stretches() -> None:
    talk = [say(t, f"line {t}", ref=i) for i, t in enumerate(range(0, 60, 5))]  # 0-64 s
    after = [say(t, f"line {t}", ref=100 + i) for i, t in enumerate(range(100, 170, 5))]  # pause of 36 s
    scenes = split_at_gaps(talk + after, min_s=30, max_s=240, pause_s=12)
    assert [(a, b) for a, b, _ in scenes] == [(0, 59), (100, 169)]
    # a short pause does not cut; a stretch longer than max_s is cut at its longest pause
    steady = [say(t, "x", ref=i) for i, t in enumerate(range(0, 300, 5))] + [say(306, "y", ref=99)]
    steady = [ln for ln in steady if ln.start != 150]  # a 6 s pause at 150
    parts = split_at_gaps(steady, min_s=30, max_s=200, pause_s=12)
    assert len(parts) == 2 and parts[1][0] == 155
    # a tail too short to be a scene joins the one before it
    assert len(split_at_gaps(talk + [say(90, "bye", ref=50)], min_s=30, pause_s=12)) == 1


def test_central_lines_are_the_ones_the_scene_repeats() -> None:
    lines = [say(0, "Hello there."), say(5, "The horse ran away from the farm last night.", ref=1),
             say(10, "Which horse? The black horse from the farm?", ref=2), say(15, "I like soup.", ref=3)]
    best = central_lines(lines, {}, k=1)
    assert best[0].ref in ("utterances:1", "utterances:2")
    scene = build_scenes(lines, [(0, 20)])[0]
    assert scene.summary and "horse" in scene.summary and scene.start == 0


# ----------------------------------------------------------------------------- the graph

LINES = [
    # scene 0
    see(0, "Maria hides the stolen money under the floor of her kitchen.", 0),
    say(10, "The police found my brother yesterday.", "Maria", 0),
    say(16, "Good night.", "Tom", 1),
    # scene 1
    say(120, "I am leaving the city because the police found my brother.", "Maria", 2),
    say(130, "So you sold the car to pay for the journey.", "Tom", 3),
    see(140, "Maria buys a train ticket in order to reach the border before dawn.", 1),
    # scene 2
    say(235, "If the guard checks her bag, he will find the money.", "Tom", 4),
    see(242, "Then Maria crosses the border at dawn.", 2),
    see(250, "The guard checks Maria's bag.", 3),
    see(260, "The guard finds the money in the bag.", 4),
    # scene 3: a remembered past
    say(300, "I remember the river where we played years ago.", "Maria", 5),
    card(306, "TEN YEARS EARLIER", 0),
    see(306, "As a girl, Maria plays by the river with her brother.", 5),
    # scene 4
    see(400, "Maria hides the stolen money under the kitchen floor again.", 6),
]
SEGMENTS = [(0, 60), (120, 180), (230, 290), (295, 350), (390, 450)]


@pytest.fixture(scope="module")
def graph():
    scenes = build_scenes(LINES, SEGMENTS)
    return build_graph(scenes, LINES)


def _find(graph, words: str):
    (e,) = [e for e in graph.events if words in e.description]
    return e


def _edges(graph, typ: str) -> set[tuple[str, str]]:
    return {(r.src, r.dst) for r in graph.relations if r.type == typ}


def test_events_come_from_captions_and_eventful_dialogue(graph) -> None:
    descs = [e.description for e in graph.events]
    assert not any("Good night" in d for d in descs)  # a greeting is no event
    assert {e.scene_idx for e in graph.events} == {0, 1, 2, 3, 4}  # every scene has one
    hide = _find(graph, "hides the stolen money under the floor")
    assert hide.trigger == "hide" and hide.args["ARG0"] == "Maria" and hide.refs == ["captions:0"]
    said = _find(graph, "leaving the city")
    assert said.description.startswith('Maria says: "') and said.args["ARG0"] == "Maria"
    assert [e.event_id for e in graph.events] == sorted(e.event_id for e in graph.events)


def test_causal_and_precondition_edges_follow_markers_and_shared_words(graph) -> None:
    found, leaving = _find(graph, "found my brother yesterday"), _find(graph, "leaving the city")
    sold, ticket = _find(graph, "sold the car"), _find(graph, "train ticket")
    crosses, checks, finds = _find(graph, "crosses the border"), _find(graph, "The guard checks"), _find(graph, "The guard finds")
    causal, pre = _edges(graph, "causal"), _edges(graph, "precondition")
    assert (found.event_id, leaving.event_id) in causal  # "because the police found my brother"
    assert (leaving.event_id, sold.event_id) in causal  # "So ..." opens the next line
    assert (ticket.event_id, crosses.event_id) in pre  # "in order to reach the border before dawn"
    assert (checks.event_id, finds.event_id) in pre  # "if the guard checks her bag, he will find the money"
    rel = next(r for r in graph.relations if (r.src, r.dst, r.type) == (found.event_id, leaving.event_id, "causal"))
    assert rel.rule == "because" and 0 < rel.confidence <= 0.9
    assert set(rel.lines) == {"utterances:0", "utterances:2"}
    # a marker never links events that share nothing
    hide = _find(graph, "under the floor of her kitchen")
    assert not any(hide.event_id in (r.src, r.dst) for r in graph.relations if r.type in ("causal", "precondition"))


def test_time_words_screen_order_coreference_and_flashback(graph) -> None:
    ticket, crosses = _find(graph, "train ticket"), _find(graph, "crosses the border")
    before = {(r.src, r.dst): r for r in graph.relations if r.type == "before"}
    # "Then" opens the line shown after the ticket line... unless the guard's line came between
    prev = graph.events[graph.events.index(crosses) - 1]
    assert before[(prev.event_id, crosses.event_id)].rule == "time-word"
    assert before[(prev.event_id, crosses.event_id)].confidence > 0.8
    assert any(r.rule == "screen-order" for r in before.values())
    hide1, hide2 = _find(graph, "floor of her kitchen"), _find(graph, "kitchen floor again")
    # shown in two present-time scenes ("again"): the action done twice, not one event told twice
    assert (hide1.event_id, hide2.event_id) not in _edges(graph, "coreference")
    river, remember = _find(graph, "As a girl"), _find(graph, "I remember the river")
    assert _edges(graph, "flashback") == {(river.event_id, remember.event_id)}
    fb = next(r for r in graph.relations if r.type == "flashback")
    assert fb.rule == "flashback-cue" and "onscreen:0" in fb.lines
    assert river.story_order == 0 and graph.flashbacks == 1  # "years earlier": the start of the story
    # no screen-order edge runs into or out of the flashback
    assert not any(river.event_id in k for k in before)
    del ticket


def test_a_scene_without_eventful_lines_still_has_an_event() -> None:
    lines = [say(0, "Good morning, Doctor Hale.", "Ruth", 0), say(4, "Morning, Ruth. Coffee?", "Hale", 1),
             say(8, "Coffee with sugar, yes please.", "Ruth", 2)]
    g = build_graph(build_scenes(lines, [(0, 20)]), lines)
    assert len(g.events) == 1 and g.events[0].rule == "scene-central" and g.relations == []


def test_an_event_s_participants_are_the_film_s_names_not_ranks_or_common_words() -> None:
    lines = [say(0, "Then the Secret Service arrested Anna at the station for the President.", ref=0),
             say(5, "It was a secret, and the service was slow.", ref=1), say(9, "Anna, wait!", ref=2)]
    g = build_graph(build_scenes(lines, [(0, 20)]), lines)
    arrest = next(e for e in g.events if "arrested" in e.description)
    assert arrest.names == ["Anna"] and arrest.args["with"] == "Anna"


# ----------------------------------------------------------------------------- end to end

SRT_LINES = [(line.start, line.end, line.text) for line in LINES if line.kind == "dialogue"] + [
    (500, 504, "Listen, Anna, the storm broke the bridge last night."),
    (508, 512, "So we cannot reach the village until the bridge is repaired."),
    (520, 524, "Then we walked along the river to the old mill."),
]


def _srt(items: list[tuple[float, float, str]]) -> str:
    def ts(t: float) -> str:
        return f"{int(t // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d},{int(round(t % 1 * 1000)):03d}"

    return "\n".join(f"{i}\n{ts(a)} --> {ts(b)}\n{text}\n" for i, (a, b, text) in enumerate(sorted(items), 1))


def test_text_film_gets_scenes_and_a_rule_graph_by_default(tmp_path: Path, cli) -> None:
    from moviemem import Library
    from moviemem.agents import ask
    from moviemem.backbones import ScriptedBackbone
    from moviemem.foundation.config import get_settings

    srt = tmp_path / "tiny.srt"
    srt.write_text(_srt(SRT_LINES))
    lib = Library(tmp_path / "lib", get_settings(library=tmp_path / "lib"))
    film = lib.ingest_text(srt, film_id="tiny", title="Tiny")
    runs = {s.stage: s for s in film.stages()}
    assert runs["scenes"].status == "done" and "pauses in the dialogue" in runs["scenes"].reason
    assert "no character registry: names from the lines" in runs["scenes"].reason  # nobody is addressed twice
    assert runs["events"].status == "done" and runs["events"].model == "rules"
    assert json.loads(runs["events"].params)["mode"] == "rules"
    scenes = film.scenes()
    assert len(scenes) >= 3 and [s.scene_idx for s in scenes] == list(range(len(scenes)))
    assert all(a.end <= b.start for a, b in zip(scenes, scenes[1:]))
    assert "Anna" in {c for s in scenes for c in s.characters}
    ov = film.overview(budget_tokens=60)
    assert ov.count("scene ") == len(scenes) and len(ov) <= 240  # every scene, shortened to fit
    events = film.events()
    assert events and all(e.source == "rules" and e.lines for e in events) and len(events[0].vector) > 0
    # a text film's events are its scenes (summary, who is in them), not its quoted lines, linked in
    # screen order, which the graph says is all that links them
    assert [(e.trigger, e.description, e.seg_idx) for e in events] == [("scene", s.summary, s.scene_idx) for s in scenes]
    assert json.loads(events[-1].args) == {"with": "Anna"}
    said = {f"utterances:{u.idx}": np.asarray(u.vector) * len(u.text.split()) for u in film.utterances()}  # pooled
    mean = np.sum([said[ref] for ref in events[0].lines], axis=0)
    assert np.allclose(np.asarray(events[0].vector), mean / np.linalg.norm(mean), atol=2e-3)
    g = film.graph()
    assert g.made_by() == "rules"
    assert {(e["type"], e["rule"]) for e in g.edges()} == {("before", "screen-order")}
    assert all(e["lines"] for e in g.edges()) and len(g.edges()) == len(events) - 1
    shown = " ".join(cli("graph", "tiny", "--library", str(lib.path), library=False).out.split())
    assert f"{len(events)} events, {len(events) - 1} relations ({len(events) - 1} only screen order" in shown

    res = cli("scenes", "tiny", "--json", "--library", str(lib.path), library=False)
    assert res.code == 0, res.err
    assert [s["scene"] for s in res.json()["scenes"]] == [s.scene_idx + 1 for s in scenes]
    res = cli("graph", "tiny", "--json", "--library", str(lib.path), library=False)
    assert res.code == 0 and res.json()["made_by"] == "rules"

    b = ScriptedBackbone(['{"answer": "A", "confidence": 3}'])
    ans = ask(film, "Why can they not reach the village?", ["The bridge broke", "A fire", "A strike", "Snow"],
              policy="graph", backbone=b)
    assert ans.choice == "A"
    notes = " ".join(str(s.data) for s in ans.trace)
    assert "graph made by rules" in notes
    sent = "\n".join(m.text for r in b.calls for m in r.messages)
    assert "storm broke the bridge" in sent

    # hybrid leaves a rules-only graph out unless asked (its events repeat the dialogue it searches)
    hb = ScriptedBackbone(['{"answer": "A", "confidence": 3}'] * 2)
    q = ("Why can they not reach the village?", ["The bridge broke", "A fire", "A strike", "Snow"])
    skipped = ask(film, *q, policy="hybrid", backbone=hb)
    assert any("made by rules alone" in str(s.data) for s in skipped.trace)
    assert not any(e.kind == "event" for e in skipped.evidence)
    read = ask(film, *q, policy="hybrid", backbone=hb, rule_events=True)
    assert any("event channel reads the graph made by rules" in str(s.data) for s in read.trace)

    # a rerun is cached; the stages are not run again
    again = lib.ingest_text(srt, film_id="tiny")
    assert {s.stage: s.run_id for s in again.stages()}["events"] == runs["events"].run_id


def test_dialogue_joins_the_shot_it_is_said_over_and_shared_people_chain_events() -> None:
    lines = [see(0, "Anna finds a key in the garden.", 0, dur=8), say(2, "Look, the key to the cellar!", "Anna", 0),
             see(20, "Anna opens the cellar door with the key.", 1, dur=8),
             see(40, "A dog sleeps in the sun.", 2, dur=8)]
    g = build_graph(build_scenes(lines, [(0, 60)]), lines)
    assert [e.refs for e in g.events] == [["captions:0", "utterances:0"], ["captions:1"], ["captions:2"]]
    assert g.events[0].description == 'Anna finds a key in the garden. Anna: "Look, the key to the cellar!"'
    weak = [r for r in g.relations if r.rule == "shared-participants"]
    assert [(r.src, r.dst, r.type, r.confidence) for r in weak] == [("e001", "e002", "causal", 0.3)]


def test_a_card_marking_time_is_a_cue_not_an_event() -> None:
    from moviemem.graph.rule_graph import is_card

    assert is_card("A card reads 'TWO YEARS EARLIER'.") and is_card("Flashback in sepia.")
    assert not is_card("As a boy, Tom climbs the old oak tree behind the school.")
    assert not is_card("Tom climbs the tree.")


def test_a_table_made_before_the_new_columns_takes_them_and_old_rows_read_as_defaults(tmp_path: Path) -> None:
    import pyarrow as pa

    from moviemem.memory.schema import RelationRow
    from moviemem.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "lib")
    old = pa.schema([pa.field("film_id", pa.string()), pa.field("run_id", pa.string()), pa.field("src", pa.string()),
                     pa.field("dst", pa.string()), pa.field("type", pa.string()), pa.field("confidence", pa.float64()),
                     pa.field("rationale", pa.string())])
    store.db.create_table("relations", pa.Table.from_pylist(
        [{"film_id": "f", "run_id": "r0", "src": "e1", "dst": "e2", "type": "causal", "confidence": 0.9,
          "rationale": "old"}], schema=old))
    store.append([RelationRow(film_id="f", run_id="r1", src="e2", dst="e3", type="before", source="rules",
                              rule="screen-order", lines=["utterances:3"])])
    rows = sorted(store.rows("relations"), key=lambda r: r.run_id)
    assert [(r.run_id, r.source, r.rule, r.lines) for r in rows] == [
        ("r0", "", "", []), ("r1", "rules", "screen-order", ["utterances:3"])]


def test_a_repeated_cue_is_one_event_and_short_lines_sharing_a_name_are_not_coreferent() -> None:
    lines = [say(0, "We sold the farm because the doctor wanted money.", ref=0),
             say(4, "We sold the farm because the doctor wanted money.", ref=1),
             say(100, "Please, Eddie, hurry up.", ref=2), say(200, "Oh Eddie, hurry, they wanted it.", ref=3)]
    g = build_graph(build_scenes(lines, [(0, 60), (90, 150), (190, 250)]), lines)
    assert g.events[0].refs == ["utterances:0", "utterances:1"]
    assert not [r for r in g.relations if r.type == "coreference"]


def test_an_explanation_causes_the_line_before_and_so_that_is_purpose_not_result() -> None:
    lines = [say(0, "Mom won't let me have the rifle in the house.", ref=0),
             say(5, "It's because my father was killed in the war.", ref=1),
             say(12, "Anna fixed the radio in the kitchen,", ref=2),
             say(16, "so that the children could listen to the game.", ref=3)]
    g = build_graph(build_scenes(lines, [(0, 30)]), lines)
    causal = {(r.src, r.dst, r.rule) for r in g.relations if r.type == "causal"}
    assert ("e002", "e001", "explanation") in causal
    assert not any(r.rule == "result-marker" for r in g.relations)


def test_so_marks_a_result_only_before_a_clause_and_contractions_are_no_trigger() -> None:
    lines = [say(0, "The guards caught the officer at the station.", ref=0),
             say(5, "So long, officer.", ref=1),
             say(9, "So much for the station.", ref=2)]
    g = build_graph(build_scenes(lines, [(0, 30)]), lines)
    assert not any(r.rule == "result-marker" for r in g.relations)  # farewell and intensifier, not results
    lines = [say(0, "The guards caught the officer at the station.", ref=0),
             say(5, "So the officer lost his station job.", ref=1)]
    g = build_graph(build_scenes(lines, [(0, 30)]), lines)
    assert any(r.rule == "result-marker" for r in g.relations)
    assert trigger_of("You couldn't possibly be surprised.", []) == stem("possibly")
    assert trigger_of("They won't hurt us.", []) == stem("hurt")
    assert trigger_of("They'll never give up.", []) == stem("give")


def test_an_event_told_twice_nearby_is_one_event_not_a_cause() -> None:
    lines = [say(0, "Yes, Pruitt took the sheriff up the ranch road.", ref=0),
             say(10, "Robin is asleep upstairs, Martha.", ref=1),
             say(20, "I saw Pruitt take the sheriff up the ranch road.", ref=2)]
    g = build_graph(build_scenes(lines, [(0, 60)]), lines)
    linked = [(r.type, r.rule) for r in g.relations if r.type != "before"]
    assert linked == [("coreference", "repeated")]


def test_a_duration_in_the_past_is_no_flashback_mark() -> None:
    from moviemem.graph.flashbacks import MARK

    assert not MARK.search("Smoked a pack of cigarettes in the past two hours.")
    assert not MARK.search("He has been here twice in the past few days.")
    assert MARK.search("In the past, the village was quiet.") and MARK.search("Two years earlier.")


def test_an_event_quotes_every_line_of_its_shot_that_fits_in_screen_order() -> None:
    from moviemem.graph.rule_graph import DESCRIPTION_CHARS, _describe

    shot = [see(0, "Close-up of Tom looking down.", 0, dur=9), say(1, "Years ago, I worked with your grandmother.", "Tom", 0),
            say(5, "She showed me where she put the gold ring.", "Tom", 1)]
    assert _describe(shot) == ('Close-up of Tom looking down. Tom: "Years ago, I worked with your grandmother." '
                               'Tom: "She showed me where she put the gold ring."')
    chatter = [say(7 + i, f"Line {i} where we talked about the lighthouse stairs and the ring.", "", 2 + i) for i in range(6)]
    long = _describe([shot[0], say(6, "I took the gold ring from the lighthouse last night.", "Tom", 9), *chatter])
    assert len(long) <= DESCRIPTION_CHARS and '"I took the gold ring from the lighthouse last night."' in long


def test_film_grammar_tells_inserts_and_close_ups_of_speakers_from_actions() -> None:
    from moviemem.graph.rule_graph import shot_kind

    known = frozenset({"Elizabeth", "Tom"})
    for text in ("Close-up of the ring in the palm of a hand.", "Day. A street sign reads 'MARKET SQUARE'.",
                 "Night. The dark outside of the lighthouse under the moon."):
        assert shot_kind(text, known) == "insert", text
    assert shot_kind("Close-up of Elizabeth speaking.", known) == "coverage"
    assert shot_kind("A woman listening, then nodding.", known) == "coverage"
    # an apostrophe inside a word quotes nothing: the possessives here leave the verb in place
    assert shot_kind("The dog's bowl lies next to the cat's toy.", known) == "action"
    assert shot_kind("A sign on the door reads 'DON'T ENTER'.", known) == "insert"
    for text in ("Close-up of Tom looking down, remembering.", "The guard finds the money in the bag.",
                 "A dog sleeps in the sun.", "a man sitting at a table"):
        assert shot_kind(text, known) == "action", text


def test_shots_that_go_on_with_an_event_join_it_and_signs_and_cards_are_no_events() -> None:
    lines = [see(0, "Title card: the words 'THE RING' on cream paper.", 0, dur=3),
             see(3, "Morning. The front of the bakery, with a sign that reads 'ROSE BAKERY'.", 1, dur=3),
             see(6, "Inside, Peter stands at the counter. Anna holds out a white envelope.", 2, dur=8),
             say(8, "A letter came for you today, Peter.", "Anna", 0),
             see(14, "Close-up of a handwritten letter on cream paper.", 3, dur=6),
             see(20, "Close-up of Anna speaking.", 4, dur=4),
             see(24, "Peter runs out of the bakery into the rain.", 5, dur=6),
             see(30, "Evening. A small sign on the door reads 'CLOSED'.", 6, dur=3)]
    g = build_graph(build_scenes(lines, [(0, 40)]), lines)
    # the card and the bakery's front are no events; the letter and Anna's close-up go on with the
    # envelope handed over (both sentences of that shot are one event); the closed sign shares nothing
    assert [e.refs for e in g.events] == [["captions:2", "captions:3", "captions:4", "utterances:0"], ["captions:5"]]
    assert g.events[0].description.startswith("Inside, Peter stands at the counter. Anna holds out a white envelope.")


def test_two_alike_shots_in_two_scenes_are_an_action_done_twice_not_one_event() -> None:
    lines = [see(0, "Anna walks alone along the river path past the old mill.", 0, dur=6),
             see(300, "Anna walks alone along the river path past the old mill.", 1, dur=6),
             say(600, "Anna walked alone along the river path past the old mill.", "Tom", 0)]
    g = build_graph(build_scenes(lines, [(0, 60), (290, 350), (590, 650)]), lines)
    shown1, shown2, told = g.events
    coref = {(r.src, r.dst) for r in g.relations if r.type == "coreference"}
    assert (shown1.event_id, shown2.event_id) not in coref  # shown twice: done twice
    assert (shown2.event_id, told.event_id) in coref  # told afterwards: the same event recounted


def test_a_text_film_s_scenes_read_its_character_registry(tmp_path: Path) -> None:
    from moviemem import Library
    from moviemem.foundation.config import get_settings

    srt = tmp_path / "named.srt"
    srt.write_text(_srt([(0, 3, "Marta, the train to Turin leaves at noon."), (4, 7, "I know."),
                         (9, 12, "Then hurry, Marta."), (14, 17, "They call the conductor 'Grumpy' in Turin."),
                         (20, 23, "Good evening, Mr. Hollis."), (24, 27, "Thank you, Mr Hollis."),
                         (30, 33, "They say Hollis sold the cinema.")]))
    lib = Library(tmp_path / "lib", get_settings(library=tmp_path / "lib"))
    film = lib.ingest_text(srt, film_id="named", title="Named")
    assert sorted(c.names for c in film.characters()) == [["Marta"], ["Mr. Hollis"]]
    note = next(s.reason for s in film.stages() if s.stage == "scenes")
    assert "characters from the registry (2 named)" in note
    # "Hollis" alone is Mr. Hollis's (no other character is a Hollis); Turin ("to Turin", "in Turin") is a place
    assert [s.characters for s in film.scenes()] == [["Mr. Hollis", "Marta"]]
