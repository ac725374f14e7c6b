"""The whole video pipeline on the synthetic film, checked against its truth.json."""

from __future__ import annotations

import re

import numpy as np
import pytest

from moviemem.eval.ingest_quality import boundaries, boundary_f1, word_error_rate


def test_shot_boundaries_match_the_truth(synth_film) -> None:
    shots = [(s.start, s.end) for s in synth_film.film.shots()]
    score = boundary_f1(shots, synth_film.truth["shots"], tolerance_s=0.5)
    assert score["f1"] >= 0.95, score
    assert shots[0][0] == 0.0 and all(a[1] == b[0] for a, b in zip(shots, shots[1:]))


def test_segments_group_whole_shots(synth_film) -> None:
    film = synth_film.film
    segs, cuts = film.segments(), set(boundaries([(s.start, s.end) for s in film.shots()]))
    assert segs[0].start == 0.0 and abs(segs[-1].end - film.info.duration_s) < 0.1
    for a, b in zip(segs, segs[1:]):
        assert a.end == b.start and b.start in cuts  # a segment never splits a shot
    assert all(s.end - s.start >= 10.0 for s in segs[:-1])


def test_frame_pools_strip_and_clip(synth_film) -> None:
    film = synth_film.film
    info = film.info
    for n in (64, 128, 256):
        idx = [f.frame_idx for f in film.frames(pool=n)]
        assert idx == [i * info.n_frames // n for i in range(n)]
    strip = film.frames(strip=True)
    assert len(strip) == pytest.approx(info.duration_s * 0.5, abs=1)
    idx, mat = film.clip_vectors()
    assert idx == [f.frame_idx for f in film.frames(pool=256)] and mat.shape == (256, 512)
    assert np.allclose(np.linalg.norm(mat, axis=1), 1.0, atol=1e-3)
    clip = next(s for s in film.stages() if s.stage == "clip")
    assert "random" in clip.model and "RANDOM weights" in clip.reason  # said, not hidden


def test_text_tracks_and_onscreen_text(synth_film) -> None:
    film, truth = synth_film.film, synth_film.truth
    assert [u.text for u in film.utterances()] == [u["text"] for u in truth["utterances"]]
    assert word_error_rate([u["text"] for u in truth["utterances"]], [u.text for u in film.utterances()]) == 0.0
    cues = (synth_film.dir / "captions.srt").read_text().count(" --> ")
    assert len(film.captions()) == cues
    found = 0
    for want in truth["onscreen"]:
        words = set(re.findall(r"[a-z]{4,}", want["text"].lower()))
        for row in film.onscreen():
            if row.start < want["end"] and row.end > want["start"]:
                got = set(re.findall(r"[a-z]{4,}", row.text.lower()))
                if words and len(words & got) / len(words) >= 0.5:
                    found += 1
                    break
    assert found >= len(truth["onscreen"]) - 1, (truth["onscreen"], [r.text for r in film.onscreen()])


def test_show_json_contract_and_cached_rerun(synth_film, cli) -> None:
    res = cli("show", "synth", "--json", "--library", synth_film.lib.path, library=False)
    assert res.code == 0, res.err
    obj = res.json()
    assert set(obj) >= {"film_id", "duration_s", "counts", "pools", "stages"}
    assert set(obj["counts"]) == {"frames", "shots", "segments", "scenes", "utterances", "passages", "captions", "onscreen",
                                  "events", "relations", "characters", "faces"}
    assert obj["pools"] == {"64": 64, "128": 128, "256": 256}
    assert {s["stage"]: s["status"] for s in obj["stages"]}.items() >= {
        "probe": "done", "frames": "done", "shots": "done", "segments": "done", "transcript": "done", "clip": "done",
        "ocr": "done", "captions": "done", "scenes": "done", "events": "done"}.items()
    assert obj["counts"]["scenes"] > 0 and obj["counts"]["events"] >= obj["counts"]["scenes"]
    before = {s.stage: s.run_id for s in synth_film.film.stages()}
    again = synth_film.lib.ingest(synth_film.dir / "film.mp4", film_id="synth")
    assert {s.stage: s.run_id for s in again.stages()} == before
