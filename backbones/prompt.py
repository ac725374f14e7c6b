"""The one Prompt: an id, a version, a system message, a template and (optionally) the JSON
schema its reply must match.

Everything that records which prompt was sent (traces, stage params, caption rows) uses
`ref`, "caption.frame@v1": change the wording, bump the version. `render` fills `{name}` and
`{name:spec}` placeholders in one pass; `{{` and `}}` are literal braces; a placeholder with
no value is left as written (a later step fills it), and braces in the values are never
read as placeholders, so film text can hold any character."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_FIELD = re.compile(r"\{\{|\}\}|\{(\w+)(?::([^{}]*))?\}")


@dataclass(frozen=True)
class Prompt:
    id: str
    version: int
    system: str
    template: str
    schema: dict[str, Any] | None = None  # the JSON reply asked for, where there is one

    @property
    def ref(self) -> str:
        return f"{self.id}@v{self.version}"

    def render(self, **values: Any) -> str:
        def fill(m: re.Match[str]) -> str:
            token = m.group(0)
            if token in ("{{", "}}"):
                return token[0]
            name, spec = m.group(1), m.group(2)
            return format(values[name], spec or "") if name in values else token

        return _FIELD.sub(fill, self.template)


def names_clause(names: list[str]) -> str:
    return f" Characters known in this film: {', '.join(names)}." if names else ""
