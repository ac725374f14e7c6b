"""Lines of dialogue as the prompt builders see them (captioning at ingest, narration at answer
time): a value type and two helpers that both sides share, kept below both."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Line:
    start: float
    end: float
    text: str
    speaker: str = ""


@dataclass(frozen=True)
class Span:
    """A timed text from the memory: caption, on-screen text or utterance (what the naming rules
    and the flashback detector read beside dialogue)."""

    start: float
    end: float
    text: str
    kind: str  # caption | onscreen | dialogue


def spread(items: Sequence[Any], k: int) -> list[Any]:
    """At most k items, evenly spaced, first and last kept."""
    n = len(items)
    if n <= k:
        return list(items)
    if k == 1:
        return [items[n // 2]]
    return [items[round(i * (n - 1) / (k - 1))] for i in range(k)]


def known_names(lines: Iterable[Line], extra: Iterable[str] = (), limit: int = 20) -> list[str]:
    """Speaker names and other known names, most frequent first."""
    counts: Counter[str] = Counter()
    for ln in lines:
        for name in ln.speaker.split(","):
            if name.strip():
                counts[name.strip()] += 1
    for name in extra:
        if name.strip():
            counts[name.strip()] += 1
    return [n for n, _ in counts.most_common(limit)]
