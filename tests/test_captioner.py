"""The captioner stage: what is sent per window, what is stored, cache, resume, bad replies, refusals."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from moviemem import Library, register
from moviemem.backbones import Clip, Image, Request, ScriptedBackbone, Text
from moviemem.foundation.config import get_settings
from moviemem.foundation.errors import MovieMemError
from moviemem.foundation.progress import QuietReporter
from moviemem.ingest.captioner import MAX_IMAGES, Still, frame_windows
from moviemem.ingest.prompts import CLIP_FRAMES, CLIP_VIDEO, FRAME
from moviemem.memory.lines import spread


def scripted(**kw) -> ScriptedBackbone:
    """A captioner that answers every window with a caption naming the window."""
    def answer(req: Request) -> str:
        n = sum(isinstance(p, (Image, Clip)) for m in req.messages for p in m.parts)
        return json.dumps({"caption": f"A scene seen through {n} media part(s).", "characters": ["Ann", " ", "Ann"]})

    kw.setdefault("replies", answer)
    kw.setdefault("max_attempts", 1)
    return ScriptedBackbone(name="cap", **kw)


def use(backbone: ScriptedBackbone) -> str:
    """Register `backbone` under a fresh name so settings.captioner can name it."""
    name = f"test-captioner-{uuid.uuid4().hex[:8]}"
    register("backbone", name)(lambda arg, **options: backbone)
    return name


def library(path: Path, captioner: str | None) -> Library:
    return Library(path, get_settings(library=path, captioner=captioner, clip_pretrained="random"))


def caption(synth_film, lib: Library, reporter: QuietReporter | None = None):
    return lib.ingest(synth_film.dir / "film.mp4", film_id="synth", stages=["captions"], reporter=reporter)


def media(req: Request, kind: type) -> list:
    return [p for m in req.messages for p in m.parts if isinstance(p, kind)]


def text_of(req: Request) -> str:
    return "\n".join(p.text for m in req.messages for p in m.parts if isinstance(p, Text))


@pytest.fixture
def copy(synth_film, tmp_path):
    lib, film = synth_film.copy_to(tmp_path / "lib")
    return lib, film


def test_video_backbone_gets_minutes_of_stills_and_one_clip_per_segment(synth_film, copy):
    _, film = copy
    b = scripted()
    rep = QuietReporter()
    done = caption(synth_film, library(film.store.root, use(b)), rep)
    strip = film.frames(strip=True)
    minutes = sorted({int(f.t // 60) for f in strip})
    segments = film.segments()
    frame_reqs = [r for r in b.calls if not media(r, Clip)]
    clip_reqs = [r for r in b.calls if media(r, Clip)]
    assert len(frame_reqs) == len(minutes) and len(clip_reqs) == len(segments)
    assert len(b.calls) == len(minutes) + len(segments)
    times = {f.image: f.t for f in strip}
    seen = []
    for r in frame_reqs:
        imgs = media(r, Image)
        assert 0 < len(imgs) <= MAX_IMAGES and not media(r, Clip)
        (minute,) = {int(times[str(i.path)] // 60) for i in imgs}  # one minute of stills a request
        seen.append(minute)
    assert sorted(seen) == minutes
    for r in clip_reqs:
        (clip,) = media(r, Clip)
        assert not media(r, Image) and clip.path == synth_film.dir / "film.mp4"
    assert sorted((c.start, c.end) for r in clip_reqs for c in media(r, Clip)) == [(s.start, s.end) for s in segments]
    frame_caps, clip_caps = done.captions(kind="frame"), done.captions(kind="clip")
    assert len(frame_caps) == len(minutes) and len(clip_caps) == len(segments)
    assert {c.prompt_id for c in frame_caps} == {FRAME.ref} and {c.prompt_id for c in clip_caps} == {CLIP_VIDEO.ref}
    assert all(c.characters == ["Ann"] and c.model == "cap" and c.vector is not None for c in frame_caps + clip_caps)
    assert not done.captions(kind="imported")  # the captioner replaced the imported track
    assert "tok" in rep.postfix and "$" in rep.postfix
    (stage,) = [s for s in done.summary()["stages"] if s["stage"] == "captions"]
    assert stage["status"] == "done" and stage["model"] == "cap"


def test_stills_and_transcript_slice_for_a_backbone_without_video(synth_film, copy):
    _, film = copy
    b = scripted(capabilities={"video": False, "audio": False})
    done = caption(synth_film, library(film.store.root, use(b)))
    segments, utts = film.segments(), film.utterances()
    clip_reqs = [r for r in b.calls if "happens in this stretch" in text_of(r)]
    assert len(clip_reqs) == len(segments) and not any(media(r, Clip) for r in b.calls)
    for seg in segments:
        (req,) = [r for r in clip_reqs if _segment_of(r, film) == seg.seg_idx]
        assert 0 < len(media(req, Image)) <= MAX_IMAGES
        inside = [u for u in utts if u.end > seg.start and u.start < seg.end]
        assert all(u.text in text_of(req) for u in inside) and (inside or "Nobody speaks" in text_of(req))
        outside = [u for u in utts if u.end <= seg.start or u.start >= seg.end]
        assert not any(u.text in text_of(req) for u in outside if len(u.text) > 25)
    assert {c.prompt_id for c in done.captions(kind="clip")} == {CLIP_FRAMES.ref}


def _segment_of(req: Request, film) -> int:
    """The segment whose strip stills a request carries."""
    times = {f.image: f.t for f in film.frames(strip=True)}
    ts = [times[str(i.path)] for i in media(req, Image)]
    (seg,) = [s.seg_idx for s in film.segments() if s.start <= min(ts) and max(ts) < s.end]
    return seg


def test_at_most_30_stills_a_request_evenly_spread():
    stills = [Still(i / 1.5, Path(f"/x/{i}.jpg")) for i in range(200)]  # 1.5 fps for 133 s
    wins = frame_windows(stills, 133.0, [])
    assert len(wins) == 3
    for w in wins:
        imgs = media(w.request, Image)
        assert len(imgs) <= MAX_IMAGES
        assert all(w.start <= float(i.path.stem) / 1.5 < w.end for i in imgs)
    assert len(media(wins[0].request, Image)) == 30 and spread(list(range(90)), 30)[::29] == [0, 89]


def test_kill_then_resume_sends_only_unfinished_windows_and_cache_replays_everything(synth_film, copy, tmp_path):
    _, film = copy
    n_expected = len({int(f.t // 60) for f in film.frames(strip=True)}) + len(film.segments())
    calls = []

    def killed_at_third(req: Request) -> str:
        calls.append(req)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is killed mid-stage
        return json.dumps({"caption": "A street at night.", "characters": []})

    first = scripted(replies=killed_at_third, concurrency=1)
    lib = library(film.store.root, use(first))
    with pytest.raises(KeyboardInterrupt):
        caption(synth_film, lib)
    assert len(first.calls) == 3
    assert lib.film("synth").captions(kind="imported")  # the unfinished run is invisible
    second = scripted(concurrency=1)
    done = caption(synth_film, library(film.store.root, use(second)))
    assert len(second.calls) == n_expected - 2  # the two answered windows replay from the cache
    assert len(done.captions()) == n_expected
    # a fresh library with the same cache: the whole stage replays, no request is sent
    lib2, film2 = synth_film.copy_to(tmp_path / "lib2")
    shutil.copytree(film.store.root / "cache", film2.store.root / "cache")
    third = scripted()
    again = caption(synth_film, library(film2.store.root, use(third)))
    assert third.calls == [] and [c.text for c in again.captions()] == [c.text for c in done.captions()]


def test_invalid_reply_is_recorded_and_the_stage_finishes(synth_film, copy):
    _, film = copy

    first = film.segments()[0].start

    def bad_first_clip(req: Request) -> str:
        if media(req, Clip) and media(req, Clip)[0].start == first:
            return "I cannot help with that."
        return json.dumps({"caption": "Two people talk in a kitchen.", "characters": []})

    b = scripted(replies=bad_first_clip)
    rep = QuietReporter()
    done = caption(synth_film, library(film.store.root, use(b)), rep)
    assert len(done.captions(kind="clip")) == len(film.segments()) - 1
    assert any("captions clip 0:00" in w and "JSON" in w for w in rep.warnings)
    (note,) = [n for s, st, n in rep.finished if s == "captions" and st == "done"]
    assert "1 window(s) got an invalid reply" in note
    (run,) = [s for s in done.stages() if s.stage == "captions"]
    report = json.loads((film.store.media_dir("synth") / "captions" / run.run_id / "report.json").read_text())
    assert len(report["invalid"]) == 1 and report["usage"]["requests"] == len(b.calls)


def test_transient_failure_fails_the_stage_after_the_other_windows(synth_film, copy):
    _, film = copy

    def flaky(req: Request) -> str:
        if media(req, Clip):
            raise ConnectionError("connection reset")
        return json.dumps({"caption": "A hallway.", "characters": []})

    b = scripted(replies=flaky)
    with pytest.raises(MovieMemError, match="rerun to retry"):
        caption(synth_film, library(film.store.root, use(b)))
    assert len(b.calls) == len({int(f.t // 60) for f in film.frames(strip=True)}) + len(film.segments())


def test_text_only_captioner_is_refused(synth_film, copy):
    _, film = copy
    b = scripted(capabilities={"images": False, "video": False, "audio": False})
    with pytest.raises(MovieMemError, match="takes neither images nor video"):
        caption(synth_film, library(film.store.root, use(b)))
    assert b.calls == []
    # the real offline text model is refused the same way, before it is even loaded
    with pytest.raises(MovieMemError, match="captioner local-small takes neither images nor video"):
        caption(synth_film, library(film.store.root, "local-small"))
    assert Library(film.store.root).film("synth").captions(kind="imported")  # nothing lost


def test_generated_captions_are_kept_when_reingested_without_captioner(synth_film, copy):
    _, film = copy
    b = scripted()
    first = caption(synth_film, library(film.store.root, use(b)))
    rep = QuietReporter()
    again = caption(synth_film, library(film.store.root, None), rep)
    assert ("captions", "cached", "") in [(s, st, "") for s, st, _ in rep.finished]
    assert [c.text for c in again.captions()] == [c.text for c in first.captions()]


def test_skipped_with_reason_without_captioner_and_refused_without_frames(video, tmp_path):
    rep = QuietReporter()
    film = library(tmp_path / "lib", None).ingest(video, film_id="tiny", stages=["captions"], reporter=rep)
    (stage,) = [s for s in film.summary()["stages"] if s["stage"] == "captions"]
    assert stage["status"] == "skipped" and "no captioner configured" in stage["reason"]
    assert ("captions", "skipped") in [(s, st) for s, st, _ in rep.finished]
    b = scripted()
    with pytest.raises(MovieMemError, match="needs the frames and segments"):
        library(tmp_path / "lib", use(b)).ingest(video, film_id="tiny", stages=["captions"])
    assert b.calls == []
