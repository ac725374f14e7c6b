"""Speaker turns carried by subtitle conventions.

A subtitle cue often holds two speakers: "- Who are you? - I'm Sara." (dialogue dashes), and some
tracks prefix the speaker: "CLAUDE: But no, no". Splitting such cues gives each turn its own
transcript line, so a line has one speaker, and a "NAME:" prefix becomes that line's speaker tag.
Times of a split cue are shared out by the length of each turn's text.
"""

from __future__ import annotations

import re
from typing import Any

# a dash that opens a turn: at the start, or after the previous turn's closing punctuation
_DASH_START = re.compile(r"^\s*[-\u2013\u2014]\s*")
_DASH_SPLIT = re.compile(r"(?:(?<=^)|(?<=[.?!\u2026\"')\]])|(?<=--))\s+[-\u2013\u2014]\s*(?=\S)")
# "CLAUDE: text" or "Mr. Smith: text": 1-3 capitalised words before a colon, not a time "10:30"
_PREFIX = re.compile(r"^\s*((?:(?:Mr|Mrs|Ms|Dr|Miss)\.?\s)?[A-Z][A-Za-z'\-]*(?:\s[A-Z][A-Za-z'\-]*){0,2}):\s+(?=\S)")
_NOT_SPEAKERS = {"Note", "Warning", "Subtitles", "Translation", "Translated", "Sync", "Movie", "Info", "Re", "PS",
                 "Chapter", "Part", "Scene", "Episode", "Act", "Caption", "Narrator's"}


def split_dialogue(text: str) -> list[str]:
    """'- Who are you? - I'm Sara.' -> ['Who are you?', "I'm Sara."]; a cue without turn dashes
    is one turn. A dash after sentence-final punctuation opens a turn even when the first turn has
    none ('Hello. - Hi.'); a hyphen inside a sentence ('well - maybe') does not."""
    if not text.strip():
        return []
    lead = bool(_DASH_START.match(text))
    body = _DASH_START.sub("", text, count=1) if lead else text
    parts = [p.strip() for p in _DASH_SPLIT.split(body)]
    parts = [p for p in parts if p]
    if len(parts) > 1 or lead:
        return parts
    return [text.strip()]


def split_prefix(text: str) -> tuple[str, str]:
    """'CLAUDE: But no' -> ('Claude', 'But no'); text without a speaker prefix -> ('', text)."""
    m = _PREFIX.match(text)
    if not m:
        return "", text
    name = m.group(1).strip()
    if name.split()[0].rstrip(".") in _NOT_SPEAKERS or len(name) < 2:
        return "", text
    if name.isupper():
        name = " ".join(w.capitalize() for w in name.split())
    return name, text[m.end():].strip()


def split_turns(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Transcript items ({start, end, text, speaker, ...}) with each multi-speaker cue split into
    one item per turn, and a 'NAME:' prefix moved into `speaker` (a tag already there wins)."""
    out: list[dict[str, Any]] = []
    for item in items:
        turns = split_dialogue(item["text"]) or [item["text"]]
        weights = [max(len(t), 1) for t in turns]
        t0, span, acc = item["start"], item["end"] - item["start"], 0
        for turn, w in zip(turns, weights):
            name, body = split_prefix(turn)
            a = t0 + span * acc / sum(weights)
            acc += w
            b = t0 + span * acc / sum(weights)
            speaker = item.get("speaker", "") if len(turns) == 1 else ""
            out.append(dict(item, start=a, end=b, text=body or turn, speaker=speaker or name,
                            words=item.get("words", []) if len(turns) == 1 else []))
    return out
