"""`bench --protocol mf2:DIR[:STYLE[:PARSER]]`: a bench's policies asked with the MF² release's own protocol.

The protocol is read from the user's copy of the release (agents/mf2_release.py) and carried out by
the `mf2-release` policy. Each policy of the bench becomes that policy in the context the release's
modality names: closed-book asks the statement alone (statement_only), subtitles the whole transcript
(transcripts_only), hybrid the transcripts_only template with its retrieved evidence in place of the
transcript. The run header records, per policy, the template, style, parser and the release's files
by digest (and commit); a rerun into the same directory with other release files is refused, so one
run never mixes two protocols under one name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..agents.registry import POLICIES, get_policy, parse_policy_spec
from ..foundation.errors import MovieMemError

DEFAULT_STYLE = "direct_free"  # the release's recommendation for open-weight models
DEFAULT_PARSER = "first-occurrence"  # with direct_free the reply is the verdict alone (the release's README)
CONTEXT_OF = {"closed-book": "statement", "subtitles": "transcript", "hybrid": "evidence"}
POLICY = "mf2-release"
# settings that mean the same in mf2-release (p_true: mf2-release's own, given to any of them)
CARRIED = {"closed-book": ("p_true",), "subtitles": ("p_true",), "hybrid": ("budget_tokens", "retriever", "p_true")}
_SPEC_BREAKERS = ",[]="  # a value with one of these cannot sit in a policy spec


def parse_protocol(spec: str) -> tuple[str, str, str]:
    """(release folder, style, parser) from `mf2:DIR[:STYLE[:PARSER]]`."""
    kind, sep, rest = spec.partition(":")
    parts = rest.split(":")
    if kind != "mf2" or not sep or not parts[0] or len(parts) > 3 or "" in parts:
        raise MovieMemError(f"--protocol takes mf2:DIR[:STYLE[:PARSER]] (the folder of a copy of the MF² release), "
                            f"not {spec!r}")
    folder, style, parser = (parts + [DEFAULT_STYLE, DEFAULT_PARSER][len(parts) - 1:])[:3]
    bad = next((c for c in _SPEC_BREAKERS if c in folder), None)
    if bad:
        raise MovieMemError(f"the release folder {folder!r} holds {bad!r}, which a policy spec cannot carry; "
                            "use a path (or a link) without ',', '[', ']' or '='")
    return folder, style, parser


def protocol_policies(spec: str, policies: Sequence[str]) -> list[str]:
    """The bench's policies as `mf2-release` specs under the protocol `spec`; each is built once here,
    so a folder that is not the release, a missing style or template field fails before anything is asked."""
    folder, style, parser = parse_protocol(spec)
    out = []
    for p in policies:
        name, settings = parse_policy_spec(p)
        if name == POLICY:
            spec_settings = {"release": folder, "style": style, "parser": parser, **settings}
        elif name in CONTEXT_OF:
            extra = sorted(set(settings) - set(CARRIED.get(name, ())))
            if extra:
                raise MovieMemError(f"--protocol mf2: {name}'s setting {extra[0]!r} has no meaning under the release's "
                                    f"protocol (carried: {', '.join(CARRIED.get(name, ())) or 'none'})")
            spec_settings = {"context": CONTEXT_OF[name], **settings, "style": style, "parser": parser, "release": folder}
        else:
            raise MovieMemError(f"--protocol mf2 asks closed-book (statement_only), subtitles (transcripts_only), hybrid "
                                f"(its evidence in place of the transcript) or {POLICY}[...]; not {name!r}")
        full = f"{POLICY}[" + ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                                       for k, v in spec_settings.items()) + "]"
        get_policy(full)
        out.append(full)
    if len(set(out)) != len(out):
        raise MovieMemError("two policies become the same one under --protocol mf2")
    return out


@runtime_checkable
class _Released(Protocol):
    """A policy that follows a released protocol and says which (its files' digests)."""

    def protocol(self) -> dict[str, Any]: ...


def policy_protocols(policies: Sequence[str], old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per policy spec that follows a released protocol (has `protocol()`), what it follows, with what the
    run directory recorded before (`old`); a spec whose release files differ from the recorded ones is refused."""
    out: dict[str, Any] = dict(old or {})
    for spec in policies:
        name, _ = parse_policy_spec(spec)
        if name not in POLICIES or not callable(getattr(POLICIES.get(name), "protocol", None)):
            continue  # no released protocol (or a policy only the answerer knows, as on Ray workers)
        policy = get_policy(spec)
        if not isinstance(policy, _Released):
            raise MovieMemError(f"policy {spec!r} has a protocol() on its class but not on what it builds")
        now = policy.protocol()
        before = out.get(spec)
        if before is not None and before != now:
            changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            raise MovieMemError(f"{spec} ran here with other release files ({', '.join(changed)} differ); "
                                "use another --out")
        out[spec] = now
    return out


def protocol_markdown(protocols: Mapping[str, Any] | None, names: Mapping[str, str] | None = None) -> list[str]:
    """The report's lines saying which released protocol each policy followed, each under the name the
    report's tables give it (`names`: spec -> display name) with its full spec."""
    if not protocols:
        return []
    lines = ["", "## Released protocols", ""]
    for spec, p in protocols.items():
        files = ", ".join(f"{name} sha256:{digest[:12]}" for name, digest in p.get("files", {}).items())
        short = (names or {}).get(spec, spec)
        label = f"`{spec}`" if short == spec else f"`{short}` (`{spec}`)"
        lines.append(f"- {label}: {p.get('template')} (style {p.get('style')}, system prompt {p.get('system')}), "
                     f"parser {p.get('parser')}, release {p.get('release')} at commit {p.get('commit') or 'n/a'} "
                     f"({files})" + (f"; {p['evidence']}" if p.get("evidence") else ""))
    return lines
