"""The characters stage: the registry linking voice clusters, face clusters and names.

It reads the transcript (with any subtitle speaker tags), the speakers stage's voice clusters,
the faces stage's identities and the captions' [Name] tags, builds the registry with
ingest/names.py, and writes who speaks each line (`speaker_lines`) and one row per character.
Film views overlay `speaker_lines` on the transcript, so every reader sees `speaker` and
`speaker_name` without the transcript being rewritten.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ..memory.schema import CharacterRow, SpeakerRow
from .names import Character, Line, build_registry, link_faces
from .stage import Ctx, Outcome, Stage

STRIP_STEP_S = 2.0  # one strip frame stands for this much screen time (0.5 fps)


class CharactersStage(Stage):
    name = "characters"
    needs = ("probe", "transcript", "captions", "speakers", "faces")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"strip_step_s": STRIP_STEP_S}

    def run(self, ctx: Ctx) -> Outcome:
        utts = sorted(ctx.rows("utterances"), key=lambda u: u.idx)
        voice = {v.utt_idx: v.cluster for v in ctx.rows("voices")}
        lines = [Line(u.idx, u.start, u.end, u.text, u.speaker, voice.get(u.idx, -1)) for u in utts if u.text.strip()]
        captions = ctx.rows("captions")
        chars, line_char = build_registry(lines, [c.text for c in captions])

        faces = ctx.rows("faces")
        face_times: dict[int, list[float]] = defaultdict(list)
        thumbs: dict[int, str] = {}
        for f in faces:
            if f.cluster >= 0:
                face_times[f.cluster].append(f.t)
                if f.thumbnail:
                    thumbs[f.cluster] = f.thumbnail
        by_idx = {u.idx: u for u in utts}
        speaking = {c.char_id: [(by_idx[i].start, by_idx[i].end) for i in c.lines] for c in chars if c.voice >= 0}
        if face_times:
            link_faces(chars, speaking, face_times)
            linked = {c.face for c in chars if c.face >= 0}
            for face in sorted(set(face_times) - linked):
                ch = Character(f"f{face}", f"face {face + 1}", face=face, confidence=0.0)
                ch.links.append({"kind": "face", "value": face, "confidence": 1.0, "evidence": []})
                chars.append(ch)

        # narration tags ([Name] in captions) count as appearances of a named character
        mentions: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for c in captions:
            for name in c.characters:
                mentions[name].append((c.start, c.end))

        rows: list[CharacterRow] = []
        for ch in chars:
            spoken = [(by_idx[i].start, by_idx[i].end) for i in ch.lines]
            seen = list(face_times.get(ch.face, [])) if ch.face >= 0 else []
            told = [span for n in ch.names for span in mentions.get(n, [])]
            times = [t for span in spoken + told for t in span] + seen
            screen = len(set(seen)) * STRIP_STEP_S if seen else sum(b - a for a, b in told)
            links = ch.links + ([{"kind": "thumbnail", "value": thumbs[ch.face], "confidence": 1.0, "evidence": []}]
                                if ch.face in thumbs else [])
            rows.append(CharacterRow(film_id=ctx.film_id, char_id=ch.char_id, name=ch.name, names=ch.names,
                                     lines=len(ch.lines), screen_time_s=round(screen, 2),
                                     first_s=round(min(times), 3) if times else 0.0,
                                     last_s=round(max(times), 3) if times else 0.0,
                                     voice=ch.voice, face=ch.face, confidence=ch.confidence, links=json.dumps(links)))
        named = {ch.char_id: (ch.names[0] if ch.names else "") for ch in chars}
        ctx.write(rows)
        ctx.write([SpeakerRow(film_id=ctx.film_id, utt_idx=i, speaker=cid, speaker_name=named.get(cid, ""),
                              confidence=conf) for i, (cid, conf) in sorted(line_char.items())])
        n_named = sum(1 for ch in chars if ch.names)
        return Outcome(note=f"{len(rows)} characters ({n_named} named), {len(line_char)} of {len(utts)} lines attributed")

