"""Python source from outside read as data: parsed with `ast`, never imported or run.

The MF² release ships its film list (`MOVIES_DICT` in `templates/prompt_utils.py`) and its prompts
as Python modules. Two layers read them: the release's protocol (agents/mf2_release.py) and the
collection importer (ingest/collections.py), which names each film by the release's title and year.
The reading lives here, below both, so there is one reader of the release's film list.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from .errors import MovieMemError
from .limits import MAX_SOURCE_BYTES, read_capped

MOVIES_DICT = "MOVIES_DICT"
PROMPT_UTILS = Path("templates") / "prompt_utils.py"


def read_module(path: Path, root: Path) -> ast.Module:
    """The parsed module at `path` (a file of the release folder `root`); a missing or unreadable
    one is a one-line error."""
    if not path.exists():
        raise MovieMemError(f"{root} is not the MF² release: no {path.relative_to(root)}")
    source = read_capped(path, MAX_SOURCE_BYTES, "release's Python file")
    try:
        return ast.parse(source.decode("utf-8"), filename=str(path))
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise MovieMemError(f"{path} cannot be read as Python source: {type(exc).__name__}: {exc}") from None


def assignments(tree: ast.Module) -> dict[str, ast.expr]:
    """The module's top-level `NAME = value` assignments (later ones win, as when the module runs)."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


def movies_dict(root: Path) -> dict[int, dict[str, Any]]:
    """The MF² release's film list: film number -> {"title": ..., "year": ...} for each entry of
    `MOVIES_DICT` that has both (a literal dict; anything that needs running to build is refused)."""
    path = root / PROMPT_UTILS
    node = assignments(read_module(path, root)).get(MOVIES_DICT)
    try:
        table = ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        table = None
    if not isinstance(table, dict):
        raise MovieMemError(f"{path} has no {MOVIES_DICT} of literal film titles; it is not the MF² release's")
    return {number: film for number, film in table.items()
            if isinstance(number, int) and isinstance(film, dict) and "title" in film and "year" in film}
