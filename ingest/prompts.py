"""Versioned prompts for captions and narration.

Every generated row stores the id of the prompt that made it (`caption.frame/v1`), so a
caption set can be traced to its exact wording and two sets made with different wordings
are never mixed up. Changing a prompt's text means adding a new version, not editing an old one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import MovieMemError


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: str
    template: str  # str.format fields
    schema: dict[str, Any]  # the JSON reply asked for

    @property
    def id(self) -> str:
        return f"{self.name}/v{self.version}"

    def render(self, **fields: Any) -> str:
        return self.template.format(**fields)


_SYSTEM_CAPTION = ("You describe films for a searchable memory. Be literal and concrete: say what is shown and "
                   "heard, never guess at what is not. Answer with JSON only.")
_SYSTEM_NARRATE = ("You write audio description for blind and partially sighted film audiences: present tense, "
                   "concrete, characters named, nothing invented beyond what you are told or shown. "
                   "Answer with JSON only.")

_CAPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"caption": {"type": "string"}, "characters": {"type": "array", "items": {"type": "string"}}},
    "required": ["caption", "characters"],
}
_NARRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"narration": {"type": "string"}},
    "required": ["narration"],
}
_CLIP_NARRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"narration": {"type": "string"}, "characters": {"type": "array", "items": {"type": "string"}}},
    "required": ["narration", "characters"],
}

FRAME = Prompt(
    "caption.frame", 1, _SYSTEM_CAPTION,
    "These {n} stills come from {t0}-{t1} of a film, one every {step:g} s, in order (no sound). "
    "Describe this minute in 2-4 sentences: the setting, who is present, what they do, and any on-screen text "
    "(signs, letters, titles), quoted.{names} Name a character only when the name is shown or listed here. "
    'Reply as JSON: {{"caption": "...", "characters": ["names of characters present"]}}',
    _CAPTION_SCHEMA,
)
CLIP_VIDEO = Prompt(
    "caption.clip-video", 1, _SYSTEM_CAPTION,
    "This is {t0}-{t1} of a film, with its sound. Describe what happens in 3-5 sentences, in order: the setting, "
    "who is present, what they do and say that matters to the story, and any on-screen text, quoted.{names}"
    "{dialogue} Name a character only when the name is shown, spoken or listed here. "
    'Reply as JSON: {{"caption": "...", "characters": ["names of characters present"]}}',
    _CAPTION_SCHEMA,
)
CLIP_FRAMES = Prompt(
    "caption.clip-frames", 1, _SYSTEM_CAPTION,
    "These {n} stills come from {t0}-{t1} of a film, one every {step:g} s, in order.{dialogue} "
    "Describe what happens in this stretch in 3-5 sentences, in order: the setting, who is present, what they "
    "do and say that matters to the story, and any on-screen text, quoted.{names} Name a character only when the "
    "name is shown, spoken or listed here. "
    'Reply as JSON: {{"caption": "...", "characters": ["names of characters present"]}}',
    _CAPTION_SCHEMA,
)
DESCRIBE_GAP = Prompt(
    "narration.gap", 1, _SYSTEM_NARRATE,
    "Write one audio-description line to be spoken from {t0} to {t1}, while nobody talks. "
    "Use at most {words} words.{names} Describe only what the film shows in that stretch; do not repeat dialogue."
    "{frames}\nWhat the film shows then:\n{context}{before}\n"
    'Reply as JSON: {{"narration": "..."}}',
    _NARRATION_SCHEMA,
)
SHORTEN = Prompt(
    "narration.shorten", 1, _SYSTEM_NARRATE,
    "This audio-description line has {have} words but must be spoken in at most {words} words:\n{line}\n"
    "Rewrite it as one complete sentence of at most {words} words. Keep the names and the main action; "
    'drop the rest. Reply as JSON: {{"narration": "..."}}',
    _NARRATION_SCHEMA,
)
NARRATE_CLIP = Prompt(
    "narration.clip", 1, _SYSTEM_NARRATE,
    "Narrate {t0}-{t1} of a film the way a film narrator tells it to a blind audience (Movie101 style): one "
    "paragraph of 2-6 sentences that sets the scene (place, time of day, who is there) and then tells what the "
    "characters do, in order, by name. Do not quote dialogue.{names}{frames}\n"
    "What the memory of the film holds for this stretch:\n{context}\n"
    'Reply as JSON: {{"narration": "...", "characters": ["names of characters in the narration"]}}',
    _CLIP_NARRATION_SCHEMA,
)

PROMPTS: dict[str, Prompt] = {p.id: p for p in (FRAME, CLIP_VIDEO, CLIP_FRAMES, DESCRIBE_GAP, SHORTEN, NARRATE_CLIP)}


def get(prompt_id: str) -> Prompt:
    try:
        return PROMPTS[prompt_id]
    except KeyError:
        raise MovieMemError(f"unknown prompt {prompt_id!r}; known: {', '.join(sorted(PROMPTS))}") from None


def clock(t: float) -> str:
    """Seconds as h:mm:ss or m:ss, the way a viewer reads a timeline."""
    s = max(0, int(round(t)))
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def names_clause(names: list[str]) -> str:
    return f" Characters known in this film: {', '.join(names)}." if names else ""
