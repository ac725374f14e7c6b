"""The numbers nested in plain data: a policy's settings are checked with them, and an MCP reply before
it is sent, so that one walk decides what counts as a number in both."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from .errors import MovieMemError


def numbers_in(value: Any) -> Iterator[int | float]:
    """Every int and float in `value`, through dicts (their values), lists and tuples; a bool is no number,
    and any other object (a model, an image) is left to whatever serialises it."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from numbers_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from numbers_in(v)


def _not_finite() -> MovieMemError:
    return MovieMemError("the answer holds a number that is not finite (NaN or Infinity), which JSON cannot "
                         "hold; the library may hold rows no ingest wrote")


def check_finite(value: Any) -> None:
    """Raise where `value` (dicts, lists and tuples of plain values, walked) holds NaN or Infinity; other
    objects (an image, a text block) are left to their own serialiser."""
    if any(not math.isfinite(x) for x in numbers_in(value)):
        raise _not_finite()


def finite_json(value: Any) -> str:
    """`value` as JSON text, never NaN or Infinity, which are not JSON (a client reading them fails):
    such a number is an error, the same for the CLI's --json and the MCP server's replies."""
    import json

    try:
        return json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        raise _not_finite() from None
