"""What the characters stage (ingest/stages/characters.py) reads from the memory's rows: each face
identity's screen time and thumbnail, and the transcript as speaker turns with their voice
clusters, the inputs of the registry that characters/names.py builds."""


from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..memory.schema import FaceRow, UtteranceRow, VoiceRow
from .aliases import dialogue_ties, merge, synopsis_people, synopsis_ties
from .attribution import attribute
from .names import Character, Line, mentions
from .overrides import Overrides, apply_overrides

STRIP_STEP_S = 2.0  # one strip frame stands for this much screen time (0.5 fps)


NAME_RULES = 7  # version of characters/names.py's rules: a change re-runs the stage on the next ingest


def face_appearances(faces: list[FaceRow]) -> tuple[dict[int, list[float]], dict[int, float], dict[int, str]]:
    """Per face identity: the times it is seen (strip and key frames), its screen time (strip frames
    only, each standing for one strip step of film) and its thumbnail."""
    times: dict[int, list[float]] = defaultdict(list)
    strip: dict[int, set[float]] = defaultdict(set)
    thumbs: dict[int, str] = {}
    for f in faces:
        if f.cluster >= 0:
            times[f.cluster].append(f.t)
            if f.strip:
                strip[f.cluster].add(f.t)
            if f.thumbnail:
                thumbs[f.cluster] = f.thumbnail
    return dict(times), {c: len(ts) * STRIP_STEP_S for c, ts in strip.items()}, thumbs


@dataclass(frozen=True)
class Turn:
    """One speaker turn for the registry: `line.idx` is its registry key, `line.utt` its transcript line."""

    line: Line
    part: int = 0
    split: bool = False  # the transcript line holds more than one turn


def registry_lines(utts: Sequence[UtteranceRow], voices: Sequence[VoiceRow]) -> list[Turn]:
    """The transcript as the registry reads it: one Line per speaker turn. A line the speakers
    stage split by voice gives one Line per voice part, with the part's span and words; every
    other line is one Line with its own times, its voice and its subtitle tag."""
    parts: dict[int, list[VoiceRow]] = defaultdict(list)
    for v in voices:
        parts[v.utt_idx].append(v)
    out: list[Turn] = []
    for u in utts:
        if not u.text.strip():
            continue
        mine = sorted(parts.get(u.idx, []), key=lambda v: v.part)
        if len(mine) < 2:
            voice = mine[0].cluster if mine else -1
            out.append(Turn(Line(len(out), u.start, u.end, u.text, u.speaker, voice, utt=u.idx)))
            continue
        words = json.loads(u.words or "[]") or [{"word": w} for w in u.text.split()]  # a cue: its parts index its words
        for v in mine:
            text = " ".join(str(w.get("word", "")).strip() for w in words[v.first_word: v.last_word + 1]).strip()
            out.append(Turn(Line(len(out), v.start, v.end, text or u.text, "", v.cluster, utt=u.idx), v.part, True))
    return out


def same_person(chars: list[Character], line_char: dict[int, tuple[str, float]], lines: Sequence[Line], synopsis: str,
                overrides: Overrides) -> tuple[list[Character], dict[int, tuple[str, float]], str]:
    """The registry with one character per person (aliases.py: the synopsis's and the dialogue's ties, then
    the user's overrides), its text-film lines attributed where the words say who speaks (attribution.py),
    each character's mentions however spelled; each line's (char_id, confidence); and a note for the stage."""
    texts = [ln.text for ln in lines]
    ties = synopsis_ties(synopsis_people(synopsis, texts)) if synopsis else []
    ties += dialogue_ties(lines, {n for c in chars for n in c.names})
    owner: dict[str, str] = {}
    chars = merge(chars, ties, texts, moved=owner)
    chars, missing = apply_overrides(chars, overrides, moved=owner)
    by_id = {c.char_id: c for c in chars}
    line_char = {i: (owner.get(cid, cid), conf) for i, (cid, conf) in line_char.items() if owner.get(cid, cid) in by_id}
    attributed = 0
    if lines and all(ln.voice < 0 for ln in lines):
        said = attribute(lines, chars)
        reasons: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
        text = {ln.idx: ln for ln in lines}
        for idx, s in said.items():
            if idx not in line_char:
                line_char[idx] = (s.char_id, s.confidence)
                attributed += 1
            reasons[line_char[idx][0]].append((idx, s.reason, s.confidence))
        for c in chars:
            c.lines = sorted(i for i, (cid, _) in line_char.items() if cid == c.char_id)
            mine = reasons.get(c.char_id, [])
            if mine:
                counts = {r: sum(1 for _, x, _ in mine if x == r) for r in dict.fromkeys(x for _, x, _ in mine)}
                c.links.append({"kind": "speech", "value": len(mine), "reasons": counts,
                                "confidence": round(sum(x for _, _, x in mine) / len(mine), 3),
                                "lines": [[text[i].line, r, x] for i, r, x in mine],
                                "evidence": [f"line {text[i].line} ({r} {x:.2f}): {text[i].text}" for i, r, x in mine[:5]]})
    mentions(chars, lines)
    note = f"; {len(owner)} character{'s' if len(owner) != 1 else ''} merged into another as one person" if owner else ""
    if attributed:
        note += f"; {attributed} lines attributed from the text"
    if missing:
        note += f"; overrides name no character: {', '.join(missing[:5])}"
    return chars, line_char, note
