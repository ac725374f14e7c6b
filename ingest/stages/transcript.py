"""The transcript stage: faster-whisper ASR, or an imported subtitle track split into speaker turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...foundation.errors import MovieMemError
from ...memory.schema import UtteranceRow
from ..stage import Ctx, Outcome, Stage
from ..texttracks import TextTrack


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
            from ...models.offline import model_path, resolve_name
            from ..asr import transcribe

            s = ctx.settings
            name = s.asr_model
            model_ref: Path | str = Path(name).expanduser()
            if not Path(model_ref).exists():
                offline = resolve_name(name) or resolve_name(f"whisper-{name}")
                model_ref = model_path(offline.name, s) if offline else name
            tr = transcribe(ctx.inputs.video_file("transcript"), model=model_ref, language=s.asr_language, compute_type=s.asr_compute_type,
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
    from ..turns import split_turns

    return split_turns([{"start": c.start, "end": c.end, "text": c.text, "speaker": ", ".join(c.characters), "words": []}
                        for c in track.cues])
