"""The characters stage: the registry linking voice clusters, face clusters and names.

It reads the transcript (with any subtitle speaker tags), the speakers stage's voice clusters,
the faces stage's identities and the captions (who they name on screen, their [Name] tags), builds the registry with
characters/names.py, and writes who speaks each line (`speaker_lines`) and one row per character.
Film views overlay `speaker_lines` on the transcript, so every reader sees `speaker` and
`speaker_name` without the transcript being rewritten.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ...characters.name_model import NAME, name_voices
from ...characters.names import Character, build_registry, link_faces, registry_lexicon
from ...characters.overrides import Overrides, load_overrides, overrides_path
from ...characters.stage_inputs import NAME_RULES, STRIP_STEP_S, face_appearances, registry_lines, same_person
from ...memory.lines import Span
from ...memory.schema import CharacterRow, SpeakerRow
from ..stage import Ctx, Outcome, Stage, chosen_backbone, chosen_backbone_label, load_chosen_backbone


class CharactersStage(Stage):
    name = "characters"
    needs = ("probe", "transcript", "captions", "speakers", "faces")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = {"strip_step_s": STRIP_STEP_S, "turns": "one registry line per voice part (a cue's parts: its words)",
             "name_rules": NAME_RULES, "synopsis": _digest(_synopsis(ctx)),
             "overrides": _overrides(ctx).as_json()}
        spec = chosen_backbone_label(ctx)
        return {**p, "names_backbone": spec, "prompts": [NAME.ref]} if spec else p

    def run(self, ctx: Ctx) -> Outcome:
        utts = sorted(ctx.rows("utterances", vectors=False), key=lambda u: u.idx)
        turns = registry_lines(utts, ctx.rows("voices"))
        lines = [t.line for t in turns]
        by_key = {t.line.idx: t for t in turns}
        captions = ctx.rows("captions", vectors=False)
        shown = [Span(c.start, c.end, c.text, "caption") for c in captions]
        chars, line_char = build_registry(lines, shown=shown)
        chars, line_char, merged = same_person(chars, line_char, lines, _synopsis(ctx), _overrides(ctx))
        by_model, model = "", ""
        if chosen_backbone(ctx) and not any(c.voice >= 0 and not c.names for c in chars):
            by_model = "; no unnamed voice: no model asked"
        elif chosen_backbone(ctx):
            backbone = load_chosen_backbone(ctx)
            tally = name_voices(backbone, chars, lines, registry_lexicon(lines, shown), title=ctx.inputs.film.title,
                                progress=ctx.progress)
            by_model, model = "; " + tally.note(backbone.model_id), backbone.model_id

        face_times, screen_s, thumbs = face_appearances(ctx.rows("faces"))
        speaking = {c.char_id: [(by_key[i].line.start, by_key[i].line.end) for i in c.lines] for c in chars if c.voice >= 0}
        if face_times:
            link_faces(chars, speaking, face_times)
            linked = {c.face for c in chars if c.face >= 0}
            for face in sorted(set(face_times) - linked):
                ch = Character(f"f{face}", f"face {face + 1}", face=face, confidence=0.0)
                ch.links.append({"kind": "face", "value": face, "confidence": 1.0, "evidence": []})
                chars.append(ch)

        # narration tags ([Name] in captions) count as appearances of a named character, and name
        # one of their own where no voice or line did (a film told by its audio description)
        mentions: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for c in captions:
            for name in c.characters:
                mentions[name].append((c.start, c.end))
        known = {n for ch in chars for n in ch.names}
        for k, name in enumerate(sorted(set(mentions) - known, key=lambda n: (mentions[n][0][0], n)), 1):
            ch = Character(f"t{k}", name, [name], confidence=1.0)
            ch.links.append({"kind": "name", "value": name, "confidence": 1.0,
                             "evidence": [f"caption at {a:.1f}-{b:.1f} s tags [{name}]" for a, b in mentions[name][:5]]})
            chars.append(ch)

        rows: list[CharacterRow] = []
        for ch in chars:
            spoken = [(by_key[i].line.start, by_key[i].line.end) for i in ch.lines]
            seen = list(face_times.get(ch.face, [])) if ch.face >= 0 else []
            told = [span for n in ch.names for span in mentions.get(n, [])]
            times = [t for span in spoken + told for t in span] + seen
            if not times or (ch.voice < 0 and ch.face < 0):  # a text film: its mentions count too
                times += [t for i in ch.named_in for t in (by_key[i].line.start, by_key[i].line.end)]
            screen = screen_s.get(ch.face, 0.0) if seen else sum(b - a for a, b in told)
            links = ch.links + ([{"kind": "thumbnail", "value": thumbs[ch.face], "confidence": 1.0, "evidence": []}]
                                if ch.face in thumbs else [])
            rows.append(CharacterRow(film_id=ctx.film_id, char_id=ch.char_id, name=ch.name, names=ch.names,
                                     lines=len(ch.lines), screen_time_s=round(screen, 2),
                                     first_s=round(min(times), 3) if times else 0.0,
                                     last_s=round(max(times), 3) if times else 0.0,
                                     voice=ch.voice, face=ch.face, confidence=ch.confidence, links=json.dumps(links)))
        named = {ch.char_id: (ch.names[0] if ch.names else "") for ch in chars}
        ctx.write(rows)
        ctx.write([SpeakerRow(film_id=ctx.film_id, utt_idx=t.line.line, part=t.part, speaker=cid,
                              speaker_name=named.get(cid, ""), confidence=conf, start=t.line.start, end=t.line.end,
                              text=t.line.text if t.split else "")
                   for t in turns if t.line.idx in line_char for cid, conf in [line_char[t.line.idx]]])
        n_named = sum(1 for ch in chars if ch.names)
        attributed = len({by_key[k].line.line for k in line_char})
        n_split = len({t.line.line for t in turns if t.split})
        split = f"; {n_split} lines spoken by two voices or more, {len(turns)} turns" if n_split else ""
        return Outcome(model=model, note=f"{len(rows)} characters ({n_named} named), {attributed} of {len(utts)} "
                                         f"lines attributed" + split + merged + by_model)


def _synopsis(ctx: Ctx) -> str:
    """The film's synopsis where it was imported with one (MF²): a source of its people's names; none where the
    stage is asked for its parameters without a film's inputs (a plan, a test)."""
    if ctx.inputs is None:
        return ""
    try:
        meta = json.loads(ctx.inputs.film.meta or "{}")
    except ValueError:
        return ""
    return str(meta.get("synopsis") or "") if isinstance(meta, dict) else ""


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] if text else ""


def _overrides(ctx: Ctx) -> Overrides:
    """The user's merges and splits stored in the library (characters/overrides.py); none for a remote library or
    without one (a stage asked for its parameters alone)."""
    if ctx.store is None or not ctx.store.is_local:
        return Overrides()
    return load_overrides(overrides_path(ctx.store.root, ctx.film_id))
