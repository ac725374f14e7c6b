"""The one way moviemem checks a film time where it enters and writes it out. Timestamps are
floored, as a player's timeline shows them: a line at 12.7 s is in second 12. The short form names
the bounds of a stretch of film in prompt wording (caption windows, narration ranges) and rounds
them to the nearest second, as those prompts always have, so their text (and the replay cache's
keys) did not change."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import MovieMemError

MAX_FILM_S = 48 * 3600.0  # longer than any film or series episode; a bound that keeps windowing finite


def check_time(value: float, what: str) -> float:
    """The one check every time passes where it enters (cues, --duration, probes, benchmark items):
    finite, non-negative and at most MAX_FILM_S. `what` names it, e.g. 'cue at line 7: start'."""
    if not math.isfinite(value) or value < 0 or value > MAX_FILM_S:
        raise MovieMemError(f"{what} {value!r} is not a time in seconds between 0 and {MAX_FILM_S:.0f} (48 h)")
    return value


def seconds(value: Any, what: str, *, open_end: bool = False) -> float:
    """A time given through the Python API: a real number (not a bool or a string) that passes
    check_time. `open_end`: the end of a window, where a time past the bound (inf: to the end of
    the film) means the bound."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MovieMemError(f"{what} must be a number of seconds, not {type(value).__name__} {value!r}")
    t = float(value)
    return check_time(MAX_FILM_S if open_end and t > MAX_FILM_S else t, what)  # NaN is never > the bound


def optional_seconds(value: Any) -> float | None:
    """A time a model gives as a tool argument (a number or its text), None where it gives none;
    ValueError (TypeError for other types) for anything else, which the tool hands back as its error."""
    if value is None or value == "":
        return None
    t = float(value)
    if not math.isfinite(t):
        raise ValueError(f"{value!r} is not a finite time")
    return t


def hms(t: float, *, short: bool = False, tenths: bool = False) -> str:
    """`HH:MM:SS` (evidence, traces); `short`: `M:SS`, or `H:MM:SS` past the hour, to the nearest
    second (bounds of a stretch in prompts); `tenths`: `H:MM:SS.d` (reports). Negative or
    non-finite times read as 0."""
    s = float(t) if math.isfinite(float(t)) and float(t) > 0 else 0.0
    whole = int(round(s)) if short else int(s)
    h, m, sec = whole // 3600, whole // 60 % 60, whole % 60
    if tenths:
        return f"{h}:{m:02d}:{sec:02d}.{int((s - whole) * 10) % 10}"
    return (f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}") if short else f"{h:02d}:{m:02d}:{sec:02d}"
