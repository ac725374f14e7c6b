"""The speakers stage: who speaks each transcript line (characters/voices.py clusters the lines' voices,
characters/voice_turns.py fits their spans and splits them into speaker turns); one VoiceRow per voice part."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ...characters.voice_turns import Span, Word, voice_parts
from ...characters.voices import MODEL, SHORT_CONFIDENCE, SpeakerParams, load_audio, resemblyzer_missing
from ...foundation.words import counted
from ...memory.schema import VoiceRow
from ..stage import Ctx, Outcome, Stage


class SpeakersStage(Stage):
    name = "speakers"
    needs = ("probe", "transcript")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = SpeakerParams()
        return {"model": MODEL, **asdict(p), "short_confidence": SHORT_CONFIDENCE,
                "clustering": "agglomerative-average-cosine, centred",
                "turns": "VAD pauses, then widest word gaps; nearest centroid of the line's encoder windows in each piece",
                "cue_turns": "VAD pauses inside the cue, else even cuts; text cut at the sentence boundary (else comma) "
                             "within 1 s of the change, words spread over the cue's speech by characters; "
                             "a pause between turns is neither's",
                "spans": "ASR lines fitted to Silero VAD speech (threshold 0.5, 200 ms pauses); cues keep their times"}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not ctx.inputs.film.has_audio or ctx.inputs.video is None:
            return "no audio track"
        return resemblyzer_missing()

    def run(self, ctx: Ctx) -> Outcome:
        lines = sorted(ctx.rows("utterances", vectors=False), key=lambda u: u.idx)
        if not lines:
            return Outcome(model=MODEL, note="no transcript lines to attribute")
        assert ctx.inputs.video is not None  # skip_reason() ran first: no video or audio, no speakers stage
        wav = load_audio(ctx.inputs.video)
        spans = [Span(u.idx, u.start, u.end, tuple(Word(float(w["start"]), float(w["end"]), str(w.get("word", "")))
                                                    for w in json.loads(u.words or "[]")),
                      "" if u.speaker else u.text)  # a cue tagged with its speaker is one turn: not split by voice
                 for u in lines]
        parts, info = voice_parts(wav, spans, progress=ctx.progress)
        ctx.write([VoiceRow(film_id=ctx.film_id, utt_idx=p.utt_idx, part=p.part, start=p.start, end=p.end,
                            cluster=p.cluster, confidence=p.confidence, first_word=p.first_word, last_word=p.last_word)
                   for p in parts])
        worded = sum(1 for s in spans if s.words)
        turns = (f"; {info['examined']} of {worded} lines with word times examined for a change of voice, "
                 f"{info['split']} split into turns" if worded else "")
        if len(spans) > worded:
            turns += (f"; {info['cues_examined']} of {len(spans) - worded} subtitle cues examined for a change of voice, "
                      f"{info['cues_split']} split into turns, {info['cues_no_boundary']} left whole for want of a "
                      f"sentence boundary near the change; {info['mixed']} clustered by their pieces (two voices)")
        short = f", {info['short']} short lines given their nearest voice" if info.get("short") else ""
        return Outcome(model=MODEL, note=f"{counted(info['speakers'], 'voice')} over {info['embedded']} of {counted(info['lines'], 'line')} "
                                         f"(silhouette {info['silhouette']}){short}{turns}")
