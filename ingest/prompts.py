"""Versioned prompts of the captions stage.

Every generated row stores the ref of the prompt that made it (`caption.frame@v1`), so a
caption set can be traced to its exact wording and two sets made with different wordings
are never mixed up. Changing a prompt's text means adding a new version, not editing an old one.
"""

from __future__ import annotations

from typing import Any

from ..backbones.prompt import Prompt

_SYSTEM_CAPTION = ("You describe films for a searchable memory. Be literal and concrete: say what is shown and "
                   "heard, never guess at what is not. Answer with JSON only.")


_CAPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"caption": {"type": "string"}, "characters": {"type": "array", "items": {"type": "string"}}},
    "required": ["caption", "characters"],
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
