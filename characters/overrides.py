"""The user's corrections to a film's character registry, kept in the library and applied on every rebuild.

A rule can merge two people wrongly, or leave one person as two. The user says so once:
`moviemem characters FILM --split NAME` takes NAME out of the character that holds it (it becomes
a character of its own), `--merge A,B` makes the characters holding A and B one. Each is stored in
`<library>/overrides/<film_id>.characters.json`, a JSON object

    {"merge": [["Ted", "Spencer"]], "split": ["Dearest"]}

(a file the user may also edit by hand), and the characters stage applies it after its own rules:
its content is part of the stage's params, so a change reruns the stage. A merge later undone by
`--split` of one of its names is dropped from the file, and a split undone by `--merge`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from .aliases import Tie, merge, norm
from .names import Character


@dataclass
class Overrides:
    merge: list[list[str]] = field(default_factory=list)
    split: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"merge": [list(m) for m in self.merge], "split": list(self.split)}

    def __bool__(self) -> bool:
        return bool(self.merge or self.split)

    def add_merge(self, names: list[str]) -> None:
        names = [" ".join(n.split()) for n in names if n.strip()]
        if len(names) < 2:
            raise MovieMemError("--merge takes two names or more, separated by commas: --merge 'Ted,Spencer'")
        wanted = {norm(n) for n in names}
        self.split = [s for s in self.split if norm(s) not in wanted]
        self.merge.append(names)

    def add_split(self, name: str) -> None:
        name = " ".join(name.split())
        if not name:
            raise MovieMemError("--split takes a name")
        self.merge = [m for m in self.merge if norm(name) not in {norm(n) for n in m}]
        if norm(name) not in {norm(s) for s in self.split}:
            self.split.append(name)


def overrides_path(root: Path, film_id: str) -> Path:
    return root / "overrides" / f"{film_id}.characters.json"


def load_overrides(path: Path) -> Overrides:
    """The stored overrides; none when there is no file. A malformed file is an error naming it."""
    if not path.is_file():
        return Overrides()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        merges = [[str(n) for n in m] for m in data.get("merge", [])]
        splits = [str(s) for s in data.get("split", [])]
    except (ValueError, TypeError, AttributeError) as exc:
        raise MovieMemError(f"{path}: not a character override file ({exc}); expected "
                            '{"merge": [["A", "B"]], "split": ["C"]}') from None
    if any(len(m) < 2 for m in merges):
        raise MovieMemError(f"{path}: each merge names two characters or more")
    return Overrides(merges, splits)


def save_overrides(path: Path, ov: Overrides) -> None:
    """Written whole to a temporary file and moved into place: a crash leaves the old file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ov.as_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def apply_overrides(chars: list[Character], ov: Overrides,
                    moved: dict[str, str] | None = None) -> tuple[list[Character], list[str]]:
    """The registry with the user's splits, then merges, applied; and what could not be applied
    (a name no character holds), for the stage's note."""
    missing: list[str] = []
    chars = list(chars)
    for k, name in enumerate(ov.split, 1):
        holder = next((c for c in chars if norm(name) in {norm(n) for n in c.names}), None)
        if holder is None:
            missing.append(name)
            continue
        if len(holder.names) == 1:
            continue
        holder.names = [n for n in holder.names if norm(n) != norm(name)]
        if norm(holder.name) == norm(name):
            holder.name = holder.names[0]
        alone = Character(f"u{k}", name, [name], confidence=0.0)
        alone.links.append({"kind": "alias", "rule": "user-split", "value": [name], "confidence": 1.0,
                            "evidence": [f"split from {holder.name} by the user (moviemem characters --split)"]})
        chars.append(alone)
    held = {norm(n) for c in chars for n in c.names}
    ties = []
    for names in ov.merge:
        lost = [n for n in names if norm(n) not in held]
        missing += lost
        if len(names) - len(lost) >= 2:
            ties.append(Tie(tuple(names), "user", ("merged by the user (moviemem characters --merge)",)))
    return merge(chars, ties, moved=moved), missing
