"""Refinement of the rule graph with a backbone (graph/refine.py): the model confirms, relabels or
rejects the rules' candidate links; screen order and flashback cues stay rule links; a stopped or
re-parameterised run asks nothing twice; unusable replies keep the rule link and are recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

from moviemem import Library, register
from moviemem.backbones import Request, ScriptedBackbone
from moviemem.foundation.config import get_settings
from moviemem.graph.refine import ASKED

CAPTIONS = [
    (0, 10, "Anna finds a letter from her grandfather on the doormat."),
    (10, 20, "Because of the letter from her grandfather, Anna drives to the old barn."),
    (20, 30, "Anna opens the old barn with a rusty key from the letter."),
    (30, 40, "So Anna finds the box her grandfather hid in the old barn."),
    (40, 50, "Anna reads the letter again in order to open the box from the barn."),
    (50, 60, "Anna opens the box and finds her grandfather's watch."),
]
PAIR = re.compile(r"Event A \([^)]*\): ([^\n]*)\n.*?Event B \([^)]*\): ([^\n]*)\n.*The rules proposed: A (\w+) B", re.S)
WANTED: dict[tuple[str, str, str], str] = {}  # (A, B) descriptions and the proposed type -> the reply, set by each test
MADE: list[ScriptedBackbone] = []


def _script(request: Request) -> str:
    if "Sum up this scene" in request.messages[1].text:  # the scenes stage's summary (test_scene_summaries_...)
        return '{"summary": "Anna follows her grandfather\'s letter to the barn and finds his watch in a box."}'
    a, b, proposed = PAIR.search(request.messages[1].text).groups()
    return WANTED.get((a.strip(), b.strip(), proposed), '{"rationale": "x", "relation": "causal", "score": 7}')  # junk: out of range


@register("backbone", "test-refine")
def _scripted(arg: str | None, **options) -> ScriptedBackbone:
    """Test-only: scripted checks of candidate links."""
    b = ScriptedBackbone(_script, name="test-refine", model_id="test-refine", **options)
    MADE.append(b)
    return b


def _film(tmp_path: Path, **settings) -> tuple[Library, object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cues = tmp_path / "barn.json"
    cues.write_text(json.dumps([{"start": a, "end": b, "text": t} for a, b, t in CAPTIONS]))
    lib = Library(tmp_path / "lib", get_settings(library=tmp_path / "lib", **settings))
    return lib, lib.ingest_text(cues, film_id="barn", title="The Barn", as_="captions", duration_s=60)


def test_a_backbone_confirms_relabels_and_rejects_the_rules_candidate_links(tmp_path: Path, monkeypatch) -> None:
    _, rules_film = _film(tmp_path / "rules")
    desc = {e.event_id: e.description for e in rules_film.events()}
    rule_links = {(r.src, r.dst, r.type): r for r in rules_film.relations()}
    candidates = sorted((r for r in rules_film.relations() if r.type in ASKED), key=lambda r: (-r.confidence, r.src, r.dst))
    assert len(candidates) >= 3, rule_links  # the markers above give causal/precondition candidates
    confirm, reject, turn, *junk = candidates
    WANTED.clear()
    WANTED[(desc[confirm.src], desc[confirm.dst], confirm.type)] = json.dumps({"rationale": "the letter sends her", "relation": confirm.type, "score": 0.9})
    WANTED[(desc[reject.src], desc[reject.dst], reject.type)] = json.dumps({"rationale": "unrelated", "relation": "none", "score": 0.8})
    WANTED[(desc[turn.src], desc[turn.dst], turn.type)] = json.dumps({"rationale": "B comes first", "relation": "after", "score": 0.7})
    MADE.clear()

    lib, film = _film(tmp_path / "model", backbone="test-refine")  # events_mode defaults to refine
    run = {s.stage: s for s in film.stages()}["events"]
    assert run.status == "done" and run.model == "test-refine"
    params = json.loads(run.params)
    assert params["mode"] == "refine" and params["prompts"] == ["relations.refine@v1"] and params["backbone"] == "test-refine"
    assert [e.description for e in film.events()] == [e.description for e in rules_film.events()]  # the rules' events
    links = {(r.src, r.dst, r.type): r for r in film.relations()}
    ok = links[(confirm.src, confirm.dst, confirm.type)]
    assert (ok.source, ok.rule, ok.confidence, ok.rationale) == ("model", f"model<-{confirm.rule}", 0.9, "the letter sends her")
    assert (reject.src, reject.dst, reject.type) not in links
    turned = links[(turn.dst, turn.src, "before")]
    assert turned.source == "model" and (turn.src, turn.dst, turn.type) not in links
    for r in junk:  # unusable replies: the rule link stays as the rules made it
        assert links[(r.src, r.dst, r.type)].source == "rules"
    kept = [k for k, r in rule_links.items() if r.type not in ASKED]
    assert kept and all(links[k].source == "rules" for k in kept)  # screen order, time words, flashback cues
    assert f"checked {len(candidates)} candidate link(s): 1 confirmed, 1 relabelled, 1 rejected" in run.reason
    if junk:
        assert f"{len(junk)} unusable" in run.reason
        (record,) = (lib.store.media_dir("barn") / "events" / run.run_id).glob("invalid.jsonl")
        assert len(record.read_text().splitlines()) == len(junk)
    assert film.graph().made_by() == "model+rules"

    # resumable: a rerun with other params replays every reply from the cache and asks the model nothing
    first_calls = sum(len(b.calls) for b in MADE)  # the scenes stage's summary, then the events stage's checks
    assert first_calls >= len(candidates) + 1
    lib2, again = _film(tmp_path / "model", backbone="test-refine", refine_max_pairs=1)
    run2 = {s.stage: s for s in again.stages()}["events"]
    assert run2.run_id != run.run_id and MADE[-1].calls == []
    assert f"{len(candidates) - 1} lower-confidence candidate(s) not asked (max_pairs 1)" in run2.reason
    assert "1 confirmed" in run2.reason and len(again.relations()) == len(rule_links)

    # a plain ingest without a backbone keeps the model-checked graph
    _, plain = _film(tmp_path / "model")
    assert plain.graph().made_by() == "model+rules"


def test_extract_mode_is_asked_for_by_name(tmp_path: Path, cli) -> None:
    """--events-mode takes refine or extract; anything else is a one-line error before any work."""
    cues = tmp_path / "barn.json"
    cues.write_text(json.dumps([{"start": a, "end": b, "text": t} for a, b, t in CAPTIONS]))
    res = cli("ingest", "--text", str(cues), "--as", "captions", "--backbone", "test-refine", "--events-mode", "guess")
    assert res.code == 2 and "--events-mode is 'refine' or 'extract'" in res.err
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").glob("*.lance"))
