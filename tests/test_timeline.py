"""The inspector's film timeline bar: evidence shown, cited and gold spans placed on the film."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from moviemem import Library
from moviemem.agents.base import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.inspector import write_inspector
from moviemem.eval.records import EvidenceRecord
from moviemem.eval.runner import run_bench
from moviemem.eval.timeline import FilmFacts, timeline
from moviemem.retrievers.types import Evidence


def test_marks_are_placed_on_the_film() -> None:
    ev = [EvidenceRecord.model_validate(e) for e in
          ({"kind": "utterance", "id": "utterance:3", "start": 10, "end": 20, "cited": True},
           {"kind": "frame", "id": "frame:9", "start": 50, "end": 50},
           {"kind": "caption", "end": 3})]  # no start: no mark (a start that is no number fails reading the log)
    t = timeline(100.0, ev, [(40.0, 60.0)])
    assert t["known"] and t["duration"] == 100.0
    assert [(m["x"], m["w"], m["cited"]) for m in t["marks"]] == [(500.0, 2.0, False), (100.0, 100.0, True)]
    assert t["marks"][1]["label"] == "utterance utterance:3 10.0-20.0 s (cited)"
    assert [(g["x"], g["w"]) for g in t["gold"]] == [(400.0, 200.0)]
    unknown = timeline(None, ev, [(40.0, 80.0)])  # no film length: the bar ends at the last span
    assert not unknown["known"] and unknown["duration"] == 80.0 and unknown["gold"][0]["x"] == 500.0
    late = timeline(30.0, [EvidenceRecord(kind="event", start=29.5, end=45)], [])
    assert late["marks"][0]["x"] + late["marks"][0]["w"] <= 1000.0


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    srt = tmp_path / "f.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nHello <b>there</b>.\n")
    lib = Library(tmp_path / "lib")
    lib.ingest_text(srt, film_id="f0", duration_s=200.0)
    rows = [(1, {"id": "q0", "film_id": "f0", "question": "Where is the key?", "options": ["Attic", "Cellar"],
                 "answer": "A", "evidence": [[100.0, 120.0]]})]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        ev = [Evidence("utterance", film_id, 50.0, 70.0, "<i>the key</i>", id="utterance:1", cited=True),
              Evidence("caption", film_id, 150.0, 160.0, "an attic", id="caption:4")]
        return Answer(choice="A", text="Attic", confidence=0.9, invalid=False, policy=policy, backbone=backbone.name,
                      evidence=ev, usage=reply.usage)

    run = tmp_path / "run"
    run_bench(bench, ["good", "weak"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer, library=lib)
    return run


def test_inspector_item_page_draws_the_timeline(run_dir: Path, tmp_path: Path) -> None:
    page = (write_inspector(run_dir).parent / "items" / "1.html").read_text()
    side = page.split("<h2>Side by side</h2>", 1)[1].split("</table>", 1)[0]  # one lane per policy / backbone
    assert side.count('<svg class="timeline"') == 2 and "good / scripted" in side and "weak / scripted" in side
    assert "input / 1 output tokens" in side
    svg = page.split("</table>", 1)[1].split('<svg class="timeline"', 1)[1].split("</svg>", 1)[0]
    rects = re.findall(r'<rect class="(\w+)" x="([\d.]+)" y="\d+" width="([\d.]+)"', svg)
    # film of 200 s: gold 100-120 s, shown caption 150-160 s, cited utterance 50-70 s (drawn last)
    assert rects == [("gold", "500.0", "100.0"), ("shown", "750.0", "50.0"), ("cited", "250.0", "100.0")]
    assert "0:03:20.0" in page and "film length unknown" not in page
    assert "<i>" not in page  # evidence text stays text
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    shot = tmp_path / "item.png"
    url = (run_dir / "inspector" / "items" / "1.html").resolve().as_uri()
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--screenshot={shot}", "--window-size=1000,700", url], capture_output=True, timeout=90)
    from PIL import Image

    with Image.open(shot) as im:
        px = im.convert("RGB")
        reds = sum(1 for x in range(im.width) for y in range(0, im.height, 4) if px.getpixel((x, y)) == (204, 34, 34))
    assert reds > 20  # the cited mark is drawn


def test_nearest_strip_frame() -> None:
    f = FilmFacts(10.0, [0.0, 2.0, 4.0], ["a.jpg", "b.jpg", "c.jpg"])
    assert f.nearest_frame(3.2) == ("c.jpg", 4.0) and f.nearest_frame(-5) == ("a.jpg", 0.0)
    assert f.nearest_frame(99) == ("c.jpg", 4.0) and FilmFacts(10.0).nearest_frame(1.0) is None


def test_text_evidence_gets_the_nearest_stored_still(tmp_path: Path) -> None:
    from conftest import make_video

    lib = Library(tmp_path / "lib")
    lib.ingest(make_video(tmp_path / "clip.mp4"), film_id="clip", stages=["frames"])
    rows = [(1, {"id": "q0", "film_id": "clip", "question": "What is shown?", "options": ["A test card", "A cat"],
                 "answer": "A"})]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        return Answer(choice="A", text="A test card", confidence=0.9, invalid=False, policy=policy,
                      backbone=backbone.name, usage=reply.usage,
                      evidence=[Evidence("utterance", film_id, 3.0, 3.4, "Look at this.", id="utterance:0")])

    run_bench(bench, ["p"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run", answerer=answer, library=lib)
    index = write_inspector(tmp_path / "run")
    page = (index.parent / "items" / "1.html").read_text()
    assert "nearest still, 0:00:04.0" in page  # strip frames every 2 s: 4.0 s is nearest to 3.2 s
    thumbs = list((index.parent / "thumbs").glob("*.jpg"))
    assert len(thumbs) == 1 and f'src="../thumbs/{thumbs[0].name}"' in page


def test_film_page_shows_the_memory_on_a_timeline(run_dir: Path) -> None:
    from events_rows import add_truth_events

    lib = Library(run_dir.parent / "lib")
    add_truth_events(lib, "f0", {"events": [
        {"id": "e1", "key": "hello", "description": "Someone says <b>hello</b>.", "start": 5.0, "end": 7.0, "story_order": 0},
        {"id": "e2", "key": "bye", "description": "They leave.", "start": 150.0, "end": 160.0, "story_order": 1}],
        "relations": [{"src": "e1", "dst": "e2", "type": "causal"}]})
    index = write_inspector(run_dir)
    item = (index.parent / "items" / "1.html").read_text()
    assert '<a href="../films/f0.html"><code>f0</code></a>' in item
    page = (index.parent / "films" / "f0.html").read_text()
    lanes = dict(re.findall(r"<tr><td>([\w -]+)</td><td>(\d+)</td>", page))
    assert lanes == {"segments": "4", "scenes": "1", "shots": "0", "transcript": "1", "captions": "0",
                     "on-screen text": "0", "events": "2"}  # a text film gets its scenes lane (issue 48)
    assert "<rect x=\"25.0\" y=\"2\" width=\"10.0\"" in page  # the line at 5-7 s of a 200 s film
    assert "5.0-7.0 s: Hello there." in page and "<b>" not in page  # (the SRT reader drops the tags)
    assert '<td>causal <a href="#e2">e2</a></td>' in page and "Someone says &lt;b&gt;hello&lt;/b&gt;." in page
    # no title given (ingest took the file's name, "f"): titled by its id, with its length once
    assert "<h1>Film f0</h1>" in page and "0:03:20.0 long, a film without video" in page


def test_film_page_groups_an_events_links_by_type(run_dir: Path) -> None:
    """"before e2, e3" once, not a wall of "before eNNN" (issue 48); a title that is the id is not repeated."""
    from events_rows import add_truth_events

    lib = Library(run_dir.parent / "lib")
    lib.ingest_text(run_dir.parent / "f.srt", film_id="f", duration_s=200.0)
    events = [{"id": f"e{i}", "key": f"k{i}", "description": f"Event {i}.", "start": 10.0 * i, "end": 10.0 * i + 5,
               "story_order": i} for i in range(1, 5)]
    add_truth_events(lib, "f", {"events": events, "relations": [
        {"src": "e1", "dst": "e2", "type": "before"}, {"src": "e1", "dst": "e3", "type": "before"},
        {"src": "e1", "dst": "e4", "type": "causal"}]})
    index = write_inspector(_one_item_run(run_dir.parent / "g", lib, "f"))
    page = (index.parent / "films" / "f.html").read_text()
    links = page.split('<td id="e1">', 1)[1].split("</tr>", 1)[0].rsplit("<td>", 1)[1]
    assert links == 'before <a href="#e2">e2</a>, <a href="#e3">e3</a><br>causal <a href="#e4">e4</a></td>'
    assert "<h1>Film f</h1>" in page and "<code>f</code>" not in page
    lib.ingest_text(run_dir.parent / "f.srt", film_id="titled", title="The Man from Utah", year=1934, duration_s=200.0)
    index = write_inspector(_one_item_run(run_dir.parent / "h", lib, "titled"))
    page = (index.parent / "films" / "titled.html").read_text()
    assert "<h1>The Man from Utah (1934)</h1>" in page and "Film <code>titled</code>, 0:03:20.0 long" in page


TAGGED = ("1\n00:00:01,000 --> 00:00:04,000\n- Who are you?\n- I'm Sara.\n\n"
          "2\n00:00:05,000 --> 00:00:07,000\nCEDRIC: I call Mother 'Dearest' because Father did.\n\n"
          "3\n00:00:11,000 --> 00:00:13,000\nCEDRIC: You're welcome, <b>Sara</b>.\n")


def _one_item_run(tmp_path: Path, lib: Library, film_id: str) -> Path:
    rows = [(1, {"id": "q0", "film_id": film_id, "question": "Who?", "options": ["Sara", "Cedric"], "answer": "B"})]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        return Answer(choice="B", text="Cedric", confidence=0.9, invalid=False, policy=policy,
                      backbone=backbone.name, usage=reply.usage)

    run_bench(bench, ["p"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "run", answerer=answer, library=lib)
    return tmp_path / "run"


def test_film_page_shows_each_character_with_its_lines_and_face(tmp_path: Path, monkeypatch) -> None:
    from PIL import Image

    import moviemem.eval.timeline as tl
    from moviemem.memory.schema import FaceRow

    srt = tmp_path / "t.srt"
    srt.write_text(TAGGED)
    lib = Library(tmp_path / "lib")
    lib.ingest_text(srt, film_id="t1", duration_s=60.0)
    cards = tl.character_cards(lib.film("t1"))
    assert [(c["name"], c["lines"]) for c in cards] == [("Cedric", 3), ("Sara", 1)]  # with his turn-alternated line (issue 64)
    assert cards[0]["said"] == [(1.0, "Who are you?"), (5.0, "I call Mother 'Dearest' because Father did."),
                                (11.0, "You're welcome, Sara.")]
    assert cards[0]["voice"] is None and cards[0]["face"] is None and cards[0]["thumbnail"] == ""
    assert [c["name"] for c in tl.character_cards(lib.film("t1").until(4.5))] == ["Sara"]  # Cedric is named later
    # a face identity's crop: the cluster's row that carries it; unclustered faces have none
    faces = [FaceRow(film_id="t1", frame_idx=i, t=float(i), cluster=c, thumbnail=p)
             for i, (c, p) in enumerate([(-1, "x.jpg"), (0, ""), (0, "media/t1/faces/a/face_1.jpg"), (1, "b.jpg")])]
    assert tl.face_thumbnails(faces) == {0: "media/t1/faces/a/face_1.jpg", 1: "b.jpg"}

    crop = tmp_path / "lib" / "media" / "t1" / "faces" / "a" / "face_1.jpg"
    crop.parent.mkdir(parents=True)
    Image.new("RGB", (40, 40), (200, 150, 120)).save(crop)
    with_face = [{**cards[0], "face": 0, "thumbnail": "media/t1/faces/a/face_1.jpg"}, cards[1]]
    monkeypatch.setattr(tl, "character_cards", lambda film: with_face)
    page = (write_inspector(_one_item_run(tmp_path, lib, "t1")).parent / "films" / "t1.html").read_text()
    table = page.split("<h2>Characters</h2>", 1)[1].split("</table>", 1)[0]
    assert table.index("<b>Cedric</b>") < table.index("<b>Sara</b>")
    assert "[0:00:05.0] I call Mother &#39;Dearest&#39; because Father did." in table
    thumbs = list((tmp_path / "run" / "inspector" / "thumbs").glob("*.jpg"))
    assert len(thumbs) == 1 and f'<img src="../thumbs/{thumbs[0].name}" alt="face 1"' in table
    assert table.count("<img") == 1  # Sara has no face identity
