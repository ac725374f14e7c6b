"""What produced a run's numbers: moviemem's version and commit, the versions of the engines that
shape answers, each backbone's identity and each policy's settings. Stored in run.json and
printed by `moviemem report`; a rerun into the same directory whose provenance differs says so."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from ..backbones import Backbone
from ..foundation._version import __version__
from ..foundation.digests import file_sha256
from .records import Provenance, ResultRecord

ENGINES = ("llama-cpp-python", "lancedb", "sentence-transformers", "faster-whisper")


def _git_commit() -> str | None:
    """The checkout's commit (with '+dirty' for local changes), or None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def backbone_identity(b: Any, spec: str) -> str:
    """model_id, plus the weights' sha256 for a local GGUF file (two files of one name are told apart)."""
    ident = str(getattr(b, "model_id", "") or spec)
    inner = getattr(b, "inner", b)  # the replay cache wraps the model
    path = getattr(inner, "path", None)
    if isinstance(path, Path) and path.is_file() and path.suffix == ".gguf":
        ident += f" sha256:{file_sha256(path)}"
    return ident


def film_stages(library: Any, film_ids: list[str]) -> dict[str, dict[str, str]]:
    """For every film the run answered from: each finished stage's params hash (what the memory was built with)."""
    out: dict[str, dict[str, str]] = {}
    for fid in sorted(set(film_ids)):
        if fid in library:  # a film missing from the library is reported by the answers themselves
            out[fid] = {r.stage: f"{r.status}:{r.params_hash}" for r in library.film(fid).stages()}
    return out


def prompts(records: Iterable[ResultRecord]) -> dict[str, list[str]]:
    """Per policy: the prompt ids and versions its answers sent (from their traces)."""
    out: dict[str, set[str]] = {}
    for rec in records:
        for ans in rec.answers.values():
            for step in ans.trace:
                if step.kind == "prompt":
                    out.setdefault(rec.policy, set()).add(f"{step.data.get('prompt')}@v{step.data.get('version')}")
    return {k: sorted(v) for k, v in sorted(out.items())}


def collect(backbones: dict[str, Backbone], policies: dict[str, dict[str, Any]],
            films: dict[str, dict[str, str]] | None = None) -> Provenance:
    """`backbones`: spec -> loaded backbone; `policies`: spec -> resolved settings; `films`: film -> stage hashes."""
    return {"moviemem": __version__, "commit": _git_commit(),
            "engines": {name: _version(name) for name in ENGINES},
            "backbones": {spec: backbone_identity(b, spec) for spec, b in sorted(backbones.items())},
            "policies": {spec: settings for spec, settings in sorted(policies.items())},
            "films": films or {}}


def differences(old: Provenance | None, new: Provenance) -> list[str]:
    """What changed between two runs' provenance, one short phrase each (empty when nothing did)."""
    if not old:
        return []
    out = [f"{key} {before} -> {now}" for key, before, now in (("moviemem", old.get("moviemem"), new.get("moviemem")),
                                                               ("commit", old.get("commit"), new.get("commit")))
           if before != now]
    return (out + _changed("engines", old.get("engines"), new.get("engines"))
            + _changed("backbones", old.get("backbones"), new.get("backbones"))
            + _changed("policies", old.get("policies"), new.get("policies"))
            + _changed("films", old.get("films"), new.get("films")))


V = TypeVar("V")


def _changed(group: str, old: Mapping[str, V] | None, new: Mapping[str, V] | None) -> list[str]:
    """One group's entries both runs name and that differ ("engine lancedb: 0.1 -> 0.2")."""
    before, now = old or {}, new or {}
    return [f"{group[:-1]} {k}: {before[k]} -> {now[k]}" for k in sorted(set(before) & set(now)) if before[k] != now[k]]


def markdown(prov: Provenance | None) -> list[str]:
    """The report's provenance block."""
    if not prov:
        return ["", "## Provenance", "", "Not recorded (the run predates provenance in run.json)."]
    engines = ", ".join(f"{k} {v}" for k, v in prov.get("engines", {}).items() if v) or "none installed"
    lines = ["", "## Provenance", "", f"- moviemem {prov.get('moviemem')}, commit {prov.get('commit') or 'n/a'}",
             f"- engines: {engines}"]
    lines += [f"- backbone `{spec}`: {ident}" for spec, ident in prov.get("backbones", {}).items()]
    lines += [f"- policy `{spec}`: settings {settings or '{}'}" for spec, settings in prov.get("policies", {}).items()]
    lines += [f"- prompts of `{spec}`: {', '.join(ids)}" for spec, ids in prov.get("prompts", {}).items()]
    lines += [f"- film `{fid}`: " + ", ".join(f"{k} {v}" for k, v in stages.items())
              for fid, stages in prov.get("films", {}).items()]
    lines += [f"- changed during the run: {d}" for d in prov.get("changes", [])]
    return lines
