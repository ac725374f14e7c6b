"""Settings as a command line writes them: `name[key=value,...]` for a policy, `name(key=value,...)` for a
part named inside one (a postprocessor step: `hybrid[steps=[fuse, widen(lines=1), mine(k=3)]]`), and the
one check of a written value against its setting's declared type, so every part refuses a bad value in
the same words ("policy hybrid setting ...", "step widen setting ...")."""

from __future__ import annotations

import json
import math
import typing
from typing import Any

from .errors import MovieMemError
from .numbers import numbers_in

OPEN, CLOSE = "[(", "])"


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside brackets, parentheses and double quotes: a list value
    (`steps=["fuse","widen"]`) or a part's own settings (`widen(lines=1,grow=true)`) stays whole."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, c in enumerate(text):
        if c == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted:
            depth += (c in OPEN) - (c in CLOSE)
            if c == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
    return [*parts, text[start:]]


def setting_value(raw: str) -> Any:
    """A setting's value as written on a command line: JSON where it parses (64, true, [1,2]), a list of
    words where it is bracketed but no JSON (`[fuse, widen(lines=1)]`: each item its text), else text."""
    try:
        return json.loads(raw)
    except ValueError:
        text = raw.strip()
        if text.startswith("[") and text.endswith("]"):
            return [_item(p) for p in split_top_level(text[1:-1]) if p.strip()]
        return text


def _item(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.strip()


def parse_call(spec: str, what: str) -> tuple[str, dict[str, Any]]:
    """`name` or `name(key=value,...)` -> (name, settings); `what` names the kind in the refusal."""
    spec = spec.strip()
    if "(" not in spec:
        return spec, {}
    name, _, rest = spec.partition("(")
    if not rest.endswith(")") or not name.strip():
        raise MovieMemError(f"bad {what} {spec!r}: use name or name(key=value,...)")
    return name.strip(), written_settings(rest[:-1], spec, what)


def written_settings(body: str, spec: str, what: str) -> dict[str, Any]:
    """`key=value,...` (the inside of `name[...]` or `name(...)`) -> settings, each value read by `setting_value`."""
    settings: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in split_top_level(body))):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip():
            raise MovieMemError(f"bad {what} setting {part!r} in {spec!r}: use key=value")
        settings[key.strip()] = setting_value(raw)
    return settings


def write_call(name: str, settings: dict[str, Any]) -> str:
    """The spelling `parse_call` reads back: `name`, or `name(key=json,...)` in the order given."""
    if not settings:
        return name
    return f"{name}(" + ",".join(f"{k}={json.dumps(v)}" for k, v in settings.items()) + ")"


def setting_types(settings: Any) -> dict[str, Any]:
    """A Settings dataclass's declared field types; none where its annotations do not resolve (a plug-in's)."""
    try:
        return typing.get_type_hints(settings) if settings is not None else {}
    except (NameError, TypeError):
        return {}


def checked(owner: str, key: str, value: Any, hint: Any) -> Any:
    """`value` as the setting's type (lax: 8 for "8", a tuple for a list), or a one-line refusal naming
    `owner` ("policy hybrid", "step widen"); every number in it finite and >= 0, since counts, budgets,
    shares and temperatures all are."""
    if hint is not None:
        from pydantic import ConfigDict, TypeAdapter, ValidationError

        try:  # arbitrary types: a setting may take an object from Python (ace's selector: a Backbone)
            value = TypeAdapter(hint, config=ConfigDict(arbitrary_types_allowed=True)).validate_python(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise MovieMemError(f"{owner} setting {key}={value!r}: {err['msg'].lower()}") from None
    bad = [x for x in numbers_in(value) if not math.isfinite(x) or x < 0]
    if bad:
        raise MovieMemError(f"{owner} setting {key}={value!r}: {bad[0]} is not a finite number >= 0")
    return value
