"""Scene summaries written by a text backbone (graph/scene_summaries.py): asked only with a backbone
chosen, each scene from its own lines; an unusable reply keeps the extractive summary and is
counted; a plain re-ingest keeps the model's summaries; `--replace` goes back to extractive ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

from moviemem import Library, register
from moviemem.backbones import Request, ScriptedBackbone
from moviemem.foundation.config import get_settings
from moviemem.graph.scene_summaries import MAX_LINES, SUMMARY, summary_asks
from moviemem.graph.scenes import Scene, TextLine

# three stretches of talk, a minute apart: three scenes cut at the pauses
CUES = [(0, 4, "Marta, the train to Turin leaves at noon."), (6, 10, "Then pack the blue case, Marta."),
        (50, 54, "The case is packed and the tickets are in my coat."),
        (120, 124, "Marta missed the train because the taxi broke down."), (126, 130, "So we wait for the evening one."),
        (170, 174, "The evening train is late too."),
        (240, 244, "The station master hands Marta a letter."), (246, 250, "It says her brother is waiting in Turin."),
        (290, 294, "She reads it twice.")]
MADE: list[ScriptedBackbone] = []


def _script(request: Request) -> str:
    asked = re.search(r"Scene (\d+) \(", request.messages[1].text)
    if asked is None:  # the events stage checks the rule graph's links with the same backbone
        return '{"rationale": "not this test", "relation": "none", "score": 0.5}'
    scene = int(asked.group(1))
    if scene == 2:
        return '{"summary": ""}'  # never usable: the scene keeps its extractive summary
    return json.dumps({"summary": f"Scene {scene}: Marta gets ready to travel to Turin."})


@register("backbone", "test-scenes")
def _scripted(arg: str | None, **options) -> ScriptedBackbone:
    """Test-only: scripted scene summaries."""
    b = ScriptedBackbone(_script, name="test-scenes", model_id="test-scenes", **options)
    MADE.append(b)
    return b


def _srt(path: Path) -> Path:
    def ts(t: float) -> str:
        return f"00:{int(t // 60):02d}:{int(t % 60):02d},000"

    path.write_text("\n".join(f"{i}\n{ts(a)} --> {ts(b)}\n{text}\n" for i, (a, b, text) in enumerate(CUES, 1)))
    return path


def _ingest(root: Path, **kw) -> tuple[Library, object]:
    settings = {k: kw.pop(k) for k in list(kw) if k == "backbone"}
    lib = Library(root / "lib", get_settings(library=root / "lib", **settings))
    return lib, lib.ingest_text(_srt(root / "trip.srt"), film_id="trip", title="The Trip", **kw)


def test_a_backbone_writes_each_scene_s_summary_from_its_lines(tmp_path: Path, cli) -> None:
    MADE.clear()
    _, film = _ingest(tmp_path, backbone="test-scenes")
    run = next(s for s in film.stages() if s.stage == "scenes")
    params = json.loads(run.params)
    assert params["summaries"] == "model" and params["prompts"] == [SUMMARY.ref] and params["backbone"] == "test-scenes"
    assert run.model == "test-scenes"
    # the calls' cost is in the note `moviemem show` prints
    assert re.search(r"summaries by model test-scenes \(3 calls, \d+ tokens in, \d+ out, \d+ s, \$0\.0000\), "
                     r"1 kept extractive \(no usable reply in 3 attempts\)", run.reason), run.reason
    scenes = film.scenes()
    assert len(scenes) == 3 and [s.how for s in scenes] == ["test-scenes", "extractive", "test-scenes"]
    assert scenes[0].summary == "Scene 1: Marta gets ready to travel to Turin."
    assert "taxi broke down" in scenes[1].summary  # the extractive summary quotes its central lines
    # each scene was asked about its own lines only, with the film's title; scene 2 three times
    asked = [c.messages[1].text for b in MADE for c in b.calls if "Sum up this scene" in c.messages[1].text]
    first = next(t for t in asked if "Scene 1 (" in t)
    assert "The Trip" in first and "[00:00:00] Marta, the train to Turin leaves at noon." in first
    assert "taxi" not in first and sum("Scene 2 (" in t for t in asked) == 3
    # the table of contents says how each summary was made
    data = cli("scenes", "trip", "--json", "--library", str(tmp_path / "lib"), library=False).json()
    assert [s["how"] for s in data["scenes"]] == ["test-scenes", "extractive", "test-scenes"]
    assert [s["story"] for s in data["scenes"]] == [1, 2, 3]  # no flashback: story order is screen order

    # a plain ingest keeps the model's summaries and asks nothing; --replace of the stage goes back to extractive
    calls = sum(len(b.calls) for b in MADE)
    _, again = _ingest(tmp_path)
    assert [s.how for s in again.scenes()] == ["test-scenes", "extractive", "test-scenes"]
    assert sum(len(b.calls) for b in MADE) == calls
    _, plain = _ingest(tmp_path, stages=["scenes"], replace=True)
    assert {s.how for s in plain.scenes()} == {"extractive"}
    assert json.loads(next(s for s in plain.stages() if s.stage == "scenes").params)["summaries"] == "extractive"


def test_a_long_scene_is_shown_to_the_model_evenly_not_only_its_beginning() -> None:
    lines = [TextLine(float(i), i + 0.5, "dialogue", f"line {i}", f"utterances:{i}") for i in range(3 * MAX_LINES)]
    (ask,) = summary_asks([Scene(0, 0.0, 200.0, lines)], "Long")
    text = ask.messages[1].text
    assert "line 0" in text and f"line {3 * (MAX_LINES - 1)}" in text and "line 1\n" not in text
    assert f"({2 * MAX_LINES} more lines not shown)" in text


def test_a_flashback_s_scene_comes_first_in_the_story() -> None:
    from moviemem.memory.overview import story_places
    from moviemem.memory.schema import EventRow, SceneRow

    scenes = [SceneRow(film_id="f", scene_idx=i, start=60.0 * i, end=60.0 * (i + 1)) for i in range(4)]
    events = [EventRow(film_id="f", event_id="e1", start=10, end=20, story_order=1),
              EventRow(film_id="f", event_id="e2", start=70, end=80, story_order=0),  # told second, happened first
              EventRow(film_id="f", event_id="e3", start=130, end=140, story_order=2)]  # scene 3 has no event: after 2
    assert story_places(scenes, events) == {1: 1, 0: 2, 2: 3, 3: 4}
    assert story_places(scenes, []) == {0: 1, 1: 2, 2: 3, 3: 4}
