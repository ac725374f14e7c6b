"""The synthetic film: its script and benchmark files without rendering, and one small real render."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import av
import numpy as np
import pytest

from moviemem.characters.names import Line, build_registry
from moviemem.foundation.errors import MovieMemError
from moviemem.synth import documents, plan, render
from moviemem.synth.render import Voicer
from moviemem.synth.script import FEMALE_VOICES, MALE_VOICES, VoiceOptions, build_script, voice_options
from moviemem.synth.timeline import min_minutes

LABELS = {"before", "after", "overlap", "causal", "precondition", "hierarchical", "coreference", "flashback"}


def _docs(minutes: float, seed: int, film_id: str = "synth") -> dict[str, str]:
    return documents(plan(minutes, seed), film_id)


def _jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_same_seed_same_bytes_other_seed_differs() -> None:
    a, b = _docs(3, 7), _docs(3, 7)
    assert a == b
    c = _docs(3, 8)
    assert set(c) == set(a)
    assert c["truth.json"] != a["truth.json"] and c["mcq.jsonl"] != a["mcq.jsonl"]
    casts = {tuple(ch["name"] for ch in json.loads(_docs(3, s)["truth.json"])["characters"]) for s in range(6)}
    places = {json.loads(_docs(3, s)["truth.json"])["title"] for s in range(6)}
    assert len(casts) > 3 and len(places) > 1


def _longest_causal_chain(events: list[dict], relations: list[dict]) -> int:
    succ: dict[str, list[str]] = {}
    for r in relations:
        if r["type"] == "causal":
            succ.setdefault(r["src"], []).append(r["dst"])

    def depth(node: str) -> int:
        return 1 + max((depth(n) for n in succ.get(node, [])), default=0)

    return max(depth(e["id"]) for e in events)


@pytest.mark.parametrize("seed", [7, 11])
def test_truth_holds_the_plot(seed: int) -> None:
    truth = json.loads(_docs(3, seed)["truth.json"])
    assert {"duration_s", "shots", "utterances", "onscreen", "events", "relations"} <= set(truth)
    assert truth["duration_s"] == pytest.approx(180, rel=0.05)
    shots = truth["shots"]
    assert shots[0][0] == 0 and shots[-1][1] == truth["duration_s"]
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(shots, shots[1:], strict=False))
    assert len(truth["scenes"]) >= 8
    # speech: three or more speakers, lines inside shots and never overlapping
    utt = truth["utterances"]
    assert len({u["speaker"] for u in utt}) >= 3
    assert all(a["end"] <= b["start"] for a, b in zip(utt, utt[1:], strict=False))
    assert all(any(s <= u["start"] and u["end"] <= e for s, e in shots) for u in utt)
    assert len({c["voice"] for c in truth["characters"]}) == len(truth["characters"])
    # on-screen text: a letter, a headline and signs
    kinds = Counter(o["kind"] for o in truth["onscreen"])
    assert kinds["letter"] == 1 and kinds["news"] == 1 and kinds["sign"] >= 2
    assert any("TORN DOWN" in o["text"] for o in truth["onscreen"])
    # flashback: shown after events that happen later in the story, announced by a card and a line
    events = {e["id"]: e for e in truth["events"]}
    first = min(truth["events"], key=lambda e: e["story_order"])
    assert any(e["start"] < first["start"] and e["story_order"] > first["story_order"] for e in events.values())
    fb_scene = next(s for s in truth["scenes"] if s["flashback"])
    assert fb_scene["start"] <= first["start"] < fb_scene["end"]
    assert any(o["text"] == "YEARS EARLIER" and o["start"] == fb_scene["start"] for o in truth["onscreen"])
    assert any("years ago" in u["text"].lower() and u["end"] <= fb_scene["start"] for u in utt)
    # relations: a causal chain of at least four events, a flashback edge, known ids only
    rel = truth["relations"]
    assert all(r["src"] in events and r["dst"] in events and r["type"] in LABELS for r in rel)
    assert _longest_causal_chain(truth["events"], rel) >= 4
    assert any(r["type"] == "flashback" and r["src"] == first["id"] for r in rel)
    assert sorted(e["story_order"] for e in events.values()) == list(range(len(events)))


def test_benchmark_files() -> None:
    docs = _docs(3, 7, film_id="demo-film")
    duration = json.loads(docs["truth.json"])["duration_s"]
    mcq = _jsonl(docs["mcq.jsonl"])
    assert len(mcq) >= 24
    assert {q["category"] for q in mcq} >= {"temporality", "plot", "character", "setting",
                                             "object identification", "perspective"}
    answers = Counter(q["answer"] for q in mcq)
    assert set(answers) == set("ABCD") and max(answers.values()) - min(answers.values()) <= 1
    for n, q in enumerate(mcq, 1):
        assert q["id"] == f"demo-film-mcq-{n:03d}" and q["film_id"] == "demo-film"
        assert len(q["options"]) == 4 and len(set(q["options"])) == 4
        assert q["evidence"] and all(0 <= a < b <= duration for a, b in q["evidence"])
    # the correct answer of a character question is a character of the film, and so are its distractors
    names = {c["name"] for c in json.loads(docs["truth.json"])["characters"]}
    who = [q for q in mcq if q["question"].startswith("Who brings")][0]
    assert set(who["options"]) <= names
    claims = _jsonl(docs["claims.jsonl"])
    assert len(claims) >= 12
    assert all(c["true_claim"] != c["false_claim"] and c["film_id"] == "demo-film" for c in claims)
    rels = _jsonl(docs["relations.jsonl"])
    assert {r["label"] for r in rels} == LABELS
    assert all(r["event_a"] and r["event_b"] and r["event_a_id"] != r["event_b_id"] for r in rels)


def test_long_films_keep_the_plot_and_the_length() -> None:
    core = [s.key for s in build_script(7).scenes]
    for minutes in (10, 90):
        tl = plan(minutes, 7)
        assert tl.duration == pytest.approx(minutes * 60, rel=0.05)
        assert [s.key for s in tl.scenes if s.core] == core
        assert len(tl.scenes) > len(core)
    assert len(plan(90, 7).shots) > 10 * len(plan(3, 7).shots)


def test_bad_arguments(tmp_path: Path) -> None:
    for minutes in (0, -1, math.nan, 10_000):
        with pytest.raises(MovieMemError):
            plan(minutes, 7)
    shortest = min_minutes(build_script(7))
    with pytest.raises(MovieMemError, match="too short"):
        plan(shortest * 0.8, 7)
    with pytest.raises(MovieMemError, match="film id"):
        render(tmp_path / "out", 3, 7, film_id="Bad Id!")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MovieMemError, match="cannot write"):
        render(blocker / "out", 3, 7)
    with pytest.raises(MovieMemError, match="too short"):
        render(tmp_path / "short", 1.0, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no temp folder, no empty out folder left behind


def test_voice_options_parse_pitch_and_speed() -> None:
    assert voice_options("en-us+f2 p70 s150") == VoiceOptions("en-us+f2", 70, 150)
    assert voice_options(" en-gb-x-rp+m7  s160 ") == VoiceOptions("en-gb-x-rp+m7", None, 160)
    assert voice_options("en-us") == VoiceOptions("en-us")
    assert voice_options("en-us+f2 p0").args(145) == ["-v", "en-us+f2", "-s", "145", "-p", "0"]
    assert voice_options("en-us s170").args(145) == ["-v", "en-us", "-s", "170"]
    for spec in FEMALE_VOICES + MALE_VOICES:
        voice_options(spec)


@pytest.mark.parametrize("spec, why", [
    ("", "expected 'VOICE"), ("p70", "expected 'VOICE"), ("en us", "is not pPITCH"), ("en-us+f2 p", "is not pPITCH"),
    ("en-us x5", "is not pPITCH"), ("en-us p-5", "is not pPITCH"), ("en-us p100", "pitch 100 is outside 0-99"),
    ("en-us s20", "speed 20 is outside 80-450"), ("en-us p50 p60", "pitch is given twice"),
    ("en-us; rm -rf /", "expected 'VOICE"),
])
def test_bad_voice_spec_is_a_clear_error(spec: str, why: str, tmp_path: Path) -> None:
    with pytest.raises(MovieMemError, match="bad voice spec") as err:
        voice_options(spec)
    assert why in str(err.value)
    with pytest.raises(MovieMemError, match="bad voice spec"):
        Voicer(tmp_path).measure(spec, "Hello.")  # refused before espeak-ng runs


def _espeak_pcm(args: list[str], text: str = "Good morning. A letter came for you today.") -> bytes:
    return subprocess.run(["espeak-ng", *args, "--stdout"], input=text.encode(), capture_output=True, check=True).stdout


@pytest.mark.skipif(not shutil.which("espeak-ng"), reason="needs espeak-ng")
def test_every_cast_voice_is_a_distinct_espeak_voice() -> None:
    """espeak-ng exits 0 for any voice name: an unknown variant, or one it drops (it did for
    en-gb+f3, which spoke as the male en-gb), silently gives another voice. So each voice
    and variant must be listed, the variant must change the sound, and no two specs may sound alike."""
    listed = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True, check=True).stdout.split("\n")[1:]
    languages = {row.split()[1] for row in listed if row.split()}
    variants = {row.split()[4].rsplit("/", 1)[-1] for row in subprocess.run(
        ["espeak-ng", "--voices=variant"], capture_output=True, text=True, check=True).stdout.split("\n")[1:] if row.split()}
    sounds: dict[bytes, str] = {}
    for spec in FEMALE_VOICES + MALE_VOICES:
        opts = voice_options(spec)
        voice, _, variant = opts.voice.partition("+")
        assert voice in languages, f"{spec}: espeak-ng has no voice {voice}"
        assert not variant or variant in variants, f"{spec}: espeak-ng has no variant {variant}"
        pcm = _espeak_pcm(opts.args())
        if variant:
            plain = _espeak_pcm(VoiceOptions(voice, opts.pitch, opts.speed).args())
            assert pcm != plain, f"{spec}: espeak-ng ignores the variant {variant}"
        assert pcm not in sounds, f"{spec} sounds exactly like {sounds.get(pcm)}"
        sounds[pcm] = spec


@pytest.mark.skipif(not shutil.which("espeak-ng"), reason="needs espeak-ng")
def test_voicer_passes_pitch_and_speed(tmp_path: Path) -> None:
    voicer = Voicer(tmp_path)
    text = "Then we must find the silver watch before Friday."
    clips = {spec: voicer.clip(spec, text) for spec in ("en-us+m7", "en-us+m7 p20", "en-us+m7 s120", "en-us+m7 s180")}
    assert not np.array_equal(clips["en-us+m7"], clips["en-us+m7 p20"])  # pitch reaches espeak-ng
    assert voicer.measure("en-us+m7 s120", text) > voicer.measure("en-us+m7", text) > voicer.measure("en-us+m7 s180", text)
    assert len({voicer.path(spec, text) for spec in clips}) == 4  # the cache key is the whole spec


@pytest.mark.parametrize("minutes", [2.5, 3, 10])
def test_every_character_is_named_by_the_dialogue(minutes: float) -> None:
    """The characters stage names a voice from address terms and self-introductions; given the
    true voices, each character's lines must carry those cues (whatever lines a short film drops)."""
    for seed in (3, 7, 11, 12, 13):
        tl = plan(minutes, seed)
        roles = list(tl.script.cast)
        spoken = [ln for ts in tl.shots for ln in ts.lines]
        lines = [Line(i, ln.start, ln.end, ln.text, voice=roles.index(ln.speaker)) for i, ln in enumerate(spoken)]
        chars, _ = build_registry(lines)
        named = {roles[c.voice]: c.name for c in chars if c.voice >= 0}
        assert named == {r: c.name for r, c in tl.script.cast.items()}, (minutes, seed)


def _cuts(video: Path) -> list[float]:
    """Times where the picture jumps: the synthetic film's shots are stills, so any jump is a cut."""
    cuts, prev = [], None
    with av.open(str(video)) as c:
        for frame in c.decode(c.streams.video[0]):
            img = frame.reformat(width=160, height=90, format="gray").to_ndarray().astype(np.float32)
            if prev is not None and np.abs(img - prev).mean() > 8:
                cuts.append(float(frame.time))
            prev = img
    return cuts


def _audio(video: Path) -> tuple[np.ndarray, int]:
    with av.open(str(video)) as c:
        stream = c.streams.audio[0]
        pcm = np.concatenate([f.to_ndarray().mean(axis=0) for f in c.decode(stream)])
        return pcm, stream.rate


@pytest.mark.skipif(not (shutil.which("ffmpeg") and shutil.which("espeak-ng")), reason="needs ffmpeg and espeak-ng")
def test_small_render(tmp_path: Path) -> None:
    calls: list[str] = []
    out = tmp_path / "film"
    written = render(out, 2.5, 3, film_id="tiny", progress=lambda step, done, total: calls.append(step))
    assert set(written) == {"film.mp4", "truth.json", "captions.srt", "mcq.jsonl", "claims.jsonl",
                            "relations.jsonl"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film"]
    assert {"stills", "encode"} <= set(calls)
    truth = json.loads((out / "truth.json").read_text())
    assert truth["duration_s"] == pytest.approx(150, rel=0.05)
    video = out / "film.mp4"
    with av.open(str(video)) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        assert (v.codec_context.name, v.width, v.height) == ("h264", 640, 360)
        assert a.codec_context.name == "aac"
        assert c.duration / 1e6 == pytest.approx(truth["duration_s"], abs=0.1)
        assert v.frames == round(truth["duration_s"] * 24)
    cuts = _cuts(video)
    starts = [s for s, _ in truth["shots"][1:]]
    assert len(cuts) == len(starts)
    assert np.allclose(cuts, starts, atol=1 / 24 + 1e-3)
    srt = (out / "captions.srt").read_text()
    assert srt.count(" --> ") == len(truth["shots"])
    # sound: speech where the truth says, a music-only opening, and music below the speech
    pcm, rate = _audio(video)

    def rms(a: float, b: float) -> float:
        return float(np.sqrt(np.mean(pcm[int(a * rate):int(b * rate)] ** 2)))

    speech = np.median([rms(u["start"], u["end"]) for u in truth["utterances"]])
    first_line = truth["utterances"][0]["start"]
    opening = rms(0.6, min(first_line, truth["shots"][1][1]) - 0.6)
    assert speech > 0.05 and 0.005 < opening < speech
    mcq = _jsonl((out / "mcq.jsonl").read_text())
    assert len(mcq) >= 24 and all(q["film_id"] == "tiny" for q in mcq)
