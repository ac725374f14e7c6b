"""Short names for policy configurations, as every table shows them (issue 61).

Under `bench --protocol mf2:DIR` a policy becomes a 120-character spec
(`mf2-release[context=statement,style=direct_free,parser=first-occurrence,release=/long/path]`) that no table
can hold. Its display name says what the researcher asked for: the bench policy it stands for, the protocol
and its style, `closed-book@mf2:direct_free`, with the parser after a second colon where it is not the
release's default (as `--protocol mf2:DIR:STYLE:PARSER` writes it) and the settings the policy carried in
brackets. The release folder is left out: run.json keeps every full spec (its `policies` and `protocols`) and
the report lists which short name stands for which. Any other spec is its own name. Two specs that would
share a short name (two release folders, say) keep their full specs, so a name always means one configuration.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from ..agents.registry import parse_policy_spec
from ..foundation.errors import MovieMemError
from .mf2_protocol import CONTEXT_OF, DEFAULT_PARSER, DEFAULT_STYLE, POLICY

POLICY_OF = {context: policy for policy, context in CONTEXT_OF.items()}  # statement -> closed-book, ...
_PROTOCOL_KEYS = ("release", "context", "style", "parser")


def display_name(spec: str) -> str:
    """The short name of one policy spec (see the module's docstring); a spec that does not parse is its own name."""
    try:
        name, settings = parse_policy_spec(spec)
    except MovieMemError:
        return spec
    if name != POLICY:
        return spec
    context = str(settings.get("context", "statement"))
    base = POLICY_OF.get(context, context)
    rest = {k: v for k, v in settings.items() if k not in _PROTOCOL_KEYS}
    if rest:
        base += "[" + ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in rest.items()) + "]"
    style = str(settings.get("style", DEFAULT_STYLE))
    parser = str(settings.get("parser", DEFAULT_PARSER))
    return f"{base}@mf2:{style}" + ("" if parser == DEFAULT_PARSER else f":{parser}")


def display_names(specs: Iterable[str]) -> dict[str, str]:
    """Each spec's display name; specs whose short names would collide keep their full specs."""
    specs = list(dict.fromkeys(specs))
    short = {s: display_name(s) for s in specs}
    taken = Counter(short.values())
    full = set(specs)
    return {s: n if taken[n] == 1 and (n == s or n not in full) else s for s, n in short.items()}


def legend(names: dict[str, str]) -> list[str]:
    """Markdown lines saying which full spec each shortened name stands for (none when nothing was shortened)."""
    pairs = [(short, spec) for spec, short in names.items() if short != spec]
    if not pairs:
        return []
    return ["", "## Policy names", "", "Tables name these policies by a short name; run.json keeps the full configuration.",
            "", *(f"- `{short}`: `{spec}`" for short, spec in sorted(pairs))]


def matches(asked: str, spec: str) -> bool:
    """Whether a name given on the command line (a full spec or its display name) names `spec`."""
    return asked in (spec, display_name(spec))
