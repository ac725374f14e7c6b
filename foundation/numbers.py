"""The numbers nested in plain data: a policy's settings are checked with them, and an MCP reply before
it is sent, so that one walk decides what counts as a number in both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


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
