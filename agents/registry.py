"""Policies by name: the built-ins as dotted paths (imported only when used), third-party
policies from the entry-point group `moviemem.policies` or `POLICIES.register` (which
`moviemem.register("policy", ...)` calls).

A policy is a class (or factory) that takes its settings as keyword arguments, with the
defaults in a nested `Settings` dataclass; `needs` names the film content it reads
(transcript, captions, frames, clip, events, video)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from ..foundation.specs import checked, setting_types, written_settings
from ..foundation.specs import setting_value as setting_value  # re-exported: `--set key=value` reads values with it
from .base import Policy


def _check(name: str, factory: Callable[..., Policy], meta: dict[str, Any]) -> tuple[Callable[..., Policy], dict[str, Any]]:
    """A policy registered in code: what its listing shows (`description`, the film content it `needs`)."""
    unknown = set(meta) - {"description", "needs"}
    if unknown:
        raise MovieMemError(f"policy {name!r}: unknown option(s) {', '.join(sorted(unknown))}; known: description, needs")
    return factory, {"description": meta.get("description", ""), "needs": tuple(meta.get("needs", ()))}


POLICIES: Registry[Callable[..., Policy]] = Registry("policy", "moviemem.policies", check=_check)

for _name, _target, _needs in [
    ("ace", "moviemem.agents.policies.ace:Ace", ()),
    ("archival", "moviemem.agents.policies.archival:Archival", ("captions", "transcript")),
    ("closed-book", "moviemem.agents.policies.contextual:ClosedBook", ()),
    ("end-to-end", "moviemem.agents.policies.end_to_end:EndToEnd", ("video",)),
    ("graph", "moviemem.agents.policies.graph_policy:GraphPolicy", ("events",)),
    ("hybrid", "moviemem.agents.policies.hybrid:Hybrid", ("transcript", "captions")),
    ("letta", "moviemem.agents.policies.letta:LettaPolicy", ("captions", "transcript")),
    ("mf2-release", "moviemem.agents.policies.mf2_release:MF2Release", ()),
    ("socratic-clip", "moviemem.agents.policies.contextual:SocraticClip", ("captions",)),
    ("socratic-frame", "moviemem.agents.policies.contextual:SocraticFrame", ("captions",)),
    ("subtitles", "moviemem.agents.policies.contextual:Subtitles", ("transcript",)),
    ("videoagent", "moviemem.agents.policies.videoagent:VideoAgent", ("video", "frames", "clip")),
]:
    POLICIES.add(_name, _target, needs=_needs)


@dataclass
class PolicyInfo:
    name: str
    factory: Callable[..., Policy]
    description: str
    defaults: dict[str, Any]
    needs: tuple[str, ...] = ()  # film content it reads: transcript, captions, frames, clip, events, video
    source: str = "moviemem"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "defaults": self.defaults,
                "needs": list(self.needs), "source": self.source}


def policy_info(name: str) -> PolicyInfo:
    entry = POLICIES.entry(name)
    factory = POLICIES.get(name)
    settings = getattr(factory, "Settings", None)
    doc = (getattr(factory, "__doc__", None) or "").strip().splitlines()
    needs: Any = entry.meta.get("needs") or getattr(factory, "needs", ())
    return PolicyInfo(name, factory, entry.meta.get("description") or (doc[0] if doc else ""),
                      asdict(settings()) if settings is not None else {},
                      tuple(needs), entry.source)


def list_policies() -> list[PolicyInfo]:
    """Every policy that loads; the ones that fail are in `POLICIES.failures`."""
    out = []
    for name in sorted(POLICIES.names()):
        try:
            out.append(policy_info(name))
        except MovieMemError:
            continue
    return out


def parse_policy_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`name` or `name[key=value,...]`, so one grid can hold one policy under several settings,
    e.g. `end-to-end[frames=64]`; a value may be a list of parts with their own settings
    (`hybrid[steps=[fuse, widen(lines=1)]]`)."""
    spec = spec.strip()
    if "[" not in spec:
        return spec, {}
    name, _, rest = spec.partition("[")
    if not rest.endswith("]") or not name:
        raise MovieMemError(f"bad policy spec {spec!r}: use name or name[key=value,...]")
    return name.strip(), written_settings(rest[:-1], spec, "policy")


def get_policy(name: str, **settings: Any) -> Policy:
    """A policy by name (or `name[key=value,...]`) with its settings overridden, keyword settings over
    the spec's; unknown names and settings are refused, and each value is checked against its
    setting's type (a number finite and not negative), once, here."""
    name, written = parse_policy_spec(name)
    settings = {**written, **settings}
    info = policy_info(name)
    # an older flat spelling the policy still takes and maps onto its parts (hybrid[context_lines=1]: widen's lines)
    legacy: dict[str, Any] = dict(getattr(info.factory, "legacy_settings", {}))  # name -> type
    unknown = sorted(set(settings) - set(info.defaults) - set(legacy))
    if unknown:
        raise MovieMemError(f"policy {name} has no setting {unknown[0]!r}; settings: {', '.join(info.defaults) or 'none'}")
    hints = {**legacy, **setting_types(getattr(info.factory, "Settings", None))}
    policy = info.factory(**{k: checked(f"policy {name}", k, v, hints.get(k)) for k, v in settings.items()})
    policy.name = name
    return policy
