"""The one way moviemem writes a film time. Seconds are floored, as a player's timeline shows
them: a line at 12.7 s is in second 12, and the same time never reads two ways in one prompt."""

from __future__ import annotations

import math


def hms(t: float, *, short: bool = False, tenths: bool = False) -> str:
    """`HH:MM:SS` (evidence, traces); `short`: `M:SS`, or `H:MM:SS` past the hour (prompts about a
    stretch of film); `tenths`: `HH:MM:SS.d` (reports). Negative or non-finite times read as 0."""
    s = float(t) if math.isfinite(float(t)) and float(t) > 0 else 0.0
    whole = int(s)
    h, m, sec = whole // 3600, whole // 60 % 60, whole % 60
    out = (f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}") if short else f"{h:02d}:{m:02d}:{sec:02d}"
    return out + f".{int((s - whole) * 10) % 10}" if tenths else out
