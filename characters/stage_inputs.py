"""What the characters stage (ingest/stages/characters.py) reads from the memory's rows: each face
identity's screen time and thumbnail, and the transcript as speaker turns with their voice
clusters, the inputs of the registry that characters/names.py builds."""


from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..memory.schema import FaceRow, UtteranceRow, VoiceRow
from .names import Line

STRIP_STEP_S = 2.0  # one strip frame stands for this much screen time (0.5 fps)


NAME_RULES = 5  # version of characters/names.py's rules: a change re-runs the stage on the next ingest


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
