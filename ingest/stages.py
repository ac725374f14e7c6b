"""The ingest stages. Each declares what it needs, what tables it owns and its params;
the pipeline handles hashing, skipping, commits and resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import MovieMemError
from ..memory.schema import (
    TABLE_OWNER,
    CaptionRow,
    ClipRow,
    FrameRow,
    OnscreenRow,
    SegmentRow,
    ShotRow,
    UtteranceRow,
)
from ..memory.store import sql_str
from ..words import counted
from .segments import fixed_windows, group_shots
from .stage import Ctx, Outcome, Stage
from .texttracks import TextTrack


class ProbeStage(Stage):
    name = "probe"

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"sha256": ctx.inputs.film.sha256, "has_video": ctx.inputs.film.has_video}

    def run(self, ctx: Ctx) -> Outcome:
        film = ctx.inputs.film.model_copy()
        ctx.write([film])
        return Outcome(note=f"{film.duration_s:.1f} s" + (f", {film.width}x{film.height} @ {film.fps:.2f} fps" if film.has_video else ", no video"))


class FramesStage(Stage):
    name = "frames"
    needs = ("probe",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"pools": list(s.frame_pools), "strip_fps": s.strip_fps, "max_side": s.frame_max_side, "quality": s.jpeg_quality}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from .frames import extract_frames

        film, s = ctx.inputs.film, ctx.settings
        out = ctx.run_dir("frames")
        picks = extract_frames(ctx.inputs.video, out, n_frames=film.n_frames, duration_s=film.duration_s,  # type: ignore[arg-type]  # a video stage: it runs for films with a video file
                               pools=tuple(s.frame_pools), strip_fps=s.strip_fps, max_side=s.frame_max_side,
                               quality=s.jpeg_quality, progress=ctx.progress)
        root = ctx.store.root
        ctx.write([FrameRow(film_id=ctx.film_id, frame_idx=p.frame_idx, t=round(p.t, 3), pools=list(p.pools),
                            strip=p.strip, image=str(p.image.relative_to(root))) for p in picks])
        return Outcome(note=counted(len(picks), "frame"))


class ShotsStage(Stage):
    name = "shots"
    needs = ("probe",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"detector": s.shot_detector, "threshold": s.shot_threshold, "min_len_s": s.shot_min_len_s}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from .shots import detect_shots

        s = ctx.settings
        shots = detect_shots(ctx.inputs.video, detector=s.shot_detector, threshold=s.shot_threshold,  # type: ignore[arg-type]  # a video stage: it runs for films with a video file
                             min_len_s=s.shot_min_len_s, progress=ctx.progress)
        ctx.write([ShotRow(film_id=ctx.film_id, shot_idx=i, start=round(a, 3), end=round(b, 3)) for i, (a, b) in enumerate(shots)])
        return Outcome(model=f"scenedetect:{s.shot_detector}", note=counted(len(shots), "shot"))


class SegmentsStage(Stage):
    """Shot-grouped chunks; fixed windows for a film without video."""

    name = "segments"
    needs = ("probe", "shots")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"target_s": ctx.settings.segment_target_s, "min_s": ctx.settings.segment_min_s}

    def run(self, ctx: Ctx) -> Outcome:
        s = ctx.settings
        shot_run = ctx.upstream.get("shots")
        if shot_run is not None and shot_run.status == "done":
            shots = sorted(ctx.rows("shots"), key=lambda r: r.shot_idx)
            segs = group_shots([(r.start, r.end) for r in shots], s.segment_target_s, s.segment_min_s)
            how = "shot-grouped"
        else:
            segs = fixed_windows(ctx.inputs.film.duration_s, s.segment_target_s, s.segment_min_s)
            how = "fixed windows"
        ctx.write([SegmentRow(film_id=ctx.film_id, seg_idx=i, start=round(g.start, 3), end=round(g.end, 3),
                              first_shot=g.first_shot, last_shot=g.last_shot) for i, g in enumerate(segs)])
        return Outcome(note=f"{counted(len(segs), 'segment')} ({how})")


class TranscriptStage(Stage):
    """ASR with faster-whisper, or an imported subtitle track that replaces it."""

    name = "transcript"
    needs = ("probe",)
    version = 2  # 2: subtitle cues split into speaker turns (ingest/turns.py)

    def source(self, ctx: Ctx) -> str:
        return ctx.inputs.text_source if ctx.inputs.subtitles_sha else "asr"

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        if self.source(ctx) != "asr":
            return {"source": self.source(ctx), "sha256": ctx.inputs.subtitles_sha, "embedder": s.embedder}
        return {"source": "asr", "model": s.asr_model, "language": s.asr_language, "compute_type": s.asr_compute_type,
                "beam_size": s.asr_beam_size, "gaps": s.asr_gaps, "embedder": s.embedder}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if self.source(ctx) == "asr" and not ctx.inputs.film.has_audio:
            return "no audio track" if ctx.inputs.film.has_video else "no dialogue track (text given as captions)"
        return None

    def run(self, ctx: Ctx) -> Outcome:
        if self.source(ctx) != "asr":
            track = ctx.inputs.subtitles
            if track is None:
                raise MovieMemError(f"the transcript of {ctx.film_id!r} came from an imported file; pass it again to recompute it")
            items = subtitle_items(track)
            model, note = f"{track.format}:{track.path.name}", f"{len(items)} cues from {track.path.name}"
        else:
            from ..models.offline import model_path, resolve_name
            from .asr import transcribe

            s = ctx.settings
            name = s.asr_model
            model_ref: Path | str = Path(name).expanduser()
            if not Path(model_ref).exists():
                offline = resolve_name(name) or resolve_name(f"whisper-{name}")
                model_ref = model_path(offline.name, s) if offline else name
            tr = transcribe(ctx.inputs.video, model=model_ref, language=s.asr_language, compute_type=s.asr_compute_type,  # type: ignore[arg-type]  # ASR runs on films with an audio track, so a video file
                            threads=s.asr_threads, beam_size=s.asr_beam_size, gaps=s.asr_gaps, progress=ctx.progress)
            items = [dict(u, speaker=u.get("speaker", "")) for u in tr.utterances]
            model = f"faster-whisper:{name}"
            note = "; ".join([f"{len(items)} utterances, language {tr.language} ({tr.language_probability:.2f})", *tr.notes])
        ctx.write_embedded([UtteranceRow(film_id=ctx.film_id, idx=i, start=round(u["start"], 3), end=round(u["end"], 3),
                                         text=u["text"], source=self.source(ctx), speaker=u.get("speaker", ""),
                                         words=json.dumps(u.get("words", []))) for i, u in enumerate(items)],
                           [u["text"] for u in items])
        return Outcome(model=model, note=note)


def subtitle_items(track: TextTrack) -> list[dict[str, Any]]:
    """A subtitle track as transcript items, one per speaker turn of each cue (ingest/turns.py): the
    texts the transcript stage embeds, which a collection import embeds ahead for many films at once."""
    from .turns import split_turns

    return split_turns([{"start": c.start, "end": c.end, "text": c.text, "speaker": ", ".join(c.characters), "words": []}
                        for c in track.cues])


class ClipStage(Stage):
    name = "clip"
    needs = ("frames",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"model": ctx.settings.clip_model, "pretrained": ctx.settings.clip_pretrained,
                "pool": max(ctx.settings.frame_pools)}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not ctx.inputs.film.has_video:
            return "no video"
        from ..models.clip import clip_weights_available

        ok, reason = clip_weights_available(ctx.settings.clip_pretrained, ctx.settings.clip_model)
        return None if ok else reason

    def run(self, ctx: Ctx) -> Outcome:
        from ..models.clip import ClipEncoder

        pool = max(ctx.settings.frame_pools)
        frames = sorted((f for f in ctx.rows("frames") if pool in f.pools), key=lambda f: f.frame_idx)
        enc = ClipEncoder(ctx.settings.clip_model, ctx.settings.clip_pretrained)
        vecs = enc.encode_images([ctx.store.root / f.image for f in frames], progress=ctx.progress)
        model = f"open_clip:{ctx.settings.clip_model}/{ctx.settings.clip_pretrained}"
        ctx.write([ClipRow(film_id=ctx.film_id, frame_idx=f.frame_idx, t=f.t, model=model, vector=v.tolist())
                   for f, v in zip(frames, vecs)], enc.dim)
        note = f"{len(frames)} frames of the {pool} pool"
        if ctx.settings.clip_pretrained == "random":
            note += "; RANDOM weights: vectors carry no meaning"
        return Outcome(model=model, note=note)


class OcrStage(Stage):
    name = "ocr"
    needs = ("frames",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"lang": s.ocr_lang, "min_confidence": s.ocr_min_confidence, "embedder": s.embedder}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from .ocr import read_onscreen

        strip = sorted((f for f in ctx.rows("frames") if f.strip), key=lambda f: f.t)
        found = read_onscreen([(f.t, ctx.store.root / f.image) for f in strip], lang=ctx.settings.ocr_lang,
                              min_confidence=ctx.settings.ocr_min_confidence, progress=ctx.progress)
        end_cap = ctx.inputs.film.duration_s
        ctx.write_embedded([OnscreenRow(film_id=ctx.film_id, idx=i, start=round(o["start"], 3), end=round(min(o["end"], end_cap), 3),
                                        text=o["text"], confidence=float(o.get("confidence", 0.0)))
                            for i, o in enumerate(found)], [o["text"] for o in found])
        return Outcome(model=f"tesseract:{ctx.settings.ocr_lang}", note=f"{counted(len(found), 'on-screen text')} from {counted(len(strip), 'strip frame')}")


class CaptionsStage(Stage):
    """Captions: imported (SRT, WebVTT, JSON, Movie101 narration), or generated by a captioner
    backbone (ingest/captioner.py); with neither the stage is skipped with the reason.

    A file given now wins over a captioner; a captioner given now replaces earlier captions;
    with neither, what was imported or generated before is kept."""

    name = "captions"
    needs = ("probe",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        imported = {"source": "import", "sha256": ctx.inputs.captions_sha, "embedder": ctx.settings.embedder}
        if ctx.inputs.captions is not None:
            return imported
        if ctx.settings.captioner:
            from .captioner import FRAME_WINDOW_S, MAX_IMAGES
            from .prompts import CLIP_FRAMES, CLIP_VIDEO, FRAME

            runs = ctx.store.finished_runs(ctx.film_id)
            return {"source": "captioner", "captioner": ctx.settings.captioner, "embedder": ctx.settings.embedder,
                    "prompts": [FRAME.ref, CLIP_VIDEO.ref, CLIP_FRAMES.ref], "window_s": FRAME_WINDOW_S,
                    "max_images": MAX_IMAGES,
                    "upstream": {n: runs[n].run_id for n in ("frames", "segments", "transcript") if n in runs}}
        if ctx.inputs.captions_sha:
            return imported
        previous = self.finished_params(ctx) or {}
        return previous if previous.get("source") == "captioner" else {"source": None}

    def skip_reason(self, ctx: Ctx) -> str | None:
        source = self.params(ctx).get("source")
        if source is None:
            return "no captioner configured and no captions imported (pass --captioner SPEC or --captions FILE)"
        if source == "captioner" and not ctx.inputs.film.has_video:
            return "no video to caption"
        return None

    def run(self, ctx: Ctx) -> Outcome:
        if self.params(ctx).get("source") == "captioner":
            return self._generate(ctx)
        track = ctx.inputs.captions
        if track is None:
            raise MovieMemError(f"the captions of {ctx.film_id!r} came from an imported file; pass it again to recompute them")
        ctx.write_embedded([CaptionRow(film_id=ctx.film_id, idx=i, kind="imported", start=round(c.start, 3), end=round(c.end, 3),
                                       text=c.text, characters=c.characters, model=f"{track.format}:{track.path.name}")
                            for i, c in enumerate(track.cues)], [c.text for c in track.cues])
        return Outcome(model=f"import:{track.format}", note=f"{counted(len(track.cues), 'caption')} from {track.path.name}")

    def _generate(self, ctx: Ctx) -> Outcome:
        from ..memory.lines import Line
        from .captioner import Still, check_captioner, generate_captions, open_backbone

        spec = ctx.settings.captioner
        if not spec:
            raise MovieMemError(f"the captions of {ctx.film_id!r} were generated by a captioner; pass --captioner again to recompute them")
        backbone = open_backbone(spec, ctx.store.root, ctx.settings.cache_mode)
        check_captioner(backbone)  # before any request: a text-only model cannot caption
        runs = ctx.store.finished_runs(ctx.film_id)
        missing = [n for n in ("frames", "segments") if runs.get(n) is None or runs[n].status != "done"]
        if missing:
            raise MovieMemError(f"captioning {ctx.film_id!r} needs the {' and '.join(missing)} stage(s); "
                                f"run ingest with --stages {','.join(missing)},captions")

        def rows(table: str) -> list[Any]:
            run = runs.get(TABLE_OWNER[table])
            if run is None or run.status != "done":
                return []
            return ctx.store.rows(table, f"film_id = {sql_str(ctx.film_id)} AND run_id = {sql_str(run.run_id)}")

        root = ctx.store.root
        stills = [Still(f.t, root / f.image) for f in sorted(rows("frames"), key=lambda f: f.t) if f.strip]
        segments = [(g.start, g.end) for g in sorted(rows("segments"), key=lambda g: g.seg_idx)]
        lines = [Line(u.start, u.end, u.text, u.speaker) for u in sorted(rows("utterances"), key=lambda u: u.idx)]
        result = generate_captions(backbone, video=ctx.inputs.video, stills=stills, segments=segments, lines=lines,
                                   duration=ctx.inputs.film.duration_s, reporter=ctx.reporter)
        for window, why in result.invalid + result.failed:
            ctx.reporter.warn(f"captions {window}: {why}")
        report = {"captioner": spec, "model": result.model, "clip_input": result.clip_input,
                  "captions": len(result.captions), "invalid": [list(x) for x in result.invalid],
                  "failed": [list(x) for x in result.failed], "usage": vars(result.tally)}
        out = ctx.run_dir(self.name)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=1))
        if result.failed:
            raise MovieMemError(f"{len(result.failed)} caption request(s) failed ({result.failed[0][1]}); rerun to retry "
                                "them: finished windows replay from the cache")
        caps = result.captions
        ctx.write_embedded([CaptionRow(film_id=ctx.film_id, idx=i, kind=c.kind, start=c.start, end=c.end, text=c.text,
                                       characters=c.characters, model=result.model, prompt_id=c.prompt_id)
                            for i, c in enumerate(caps)], [c.text for c in caps])
        n_frame = sum(c.kind == "frame" for c in caps)
        note = (f"{n_frame} frame and {len(caps) - n_frame} clip captions by {spec} (clips as {result.clip_input}); "
                f"{result.tally.postfix()}")
        if result.invalid:
            note += f"; {len(result.invalid)} window(s) got an invalid reply and have no caption"
        return Outcome(model=result.model, note=note)
