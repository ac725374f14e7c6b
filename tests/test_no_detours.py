"""No detours (issue 63.4): a backbone is opened by spec from backbones/ alone, and the CLI's shared helpers
check a film below serve/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_the_cli_library_and_captions_stage_open_a_backbone_through_backbones() -> None:
    for rel in ("cli/common.py", "library.py", "ingest/stages/captions.py", "ingest/stage.py"):
        names = _imports(ROOT / rel)
        assert any(n.endswith("registry.open_for_library") for n in names), rel
        assert not any("captioner.open_backbone" in n for n in names), rel


def test_the_cli_common_helpers_import_nothing_from_serve() -> None:
    assert not [n for n in _imports(ROOT / "cli" / "common.py") if "serve" in n.split(".")]
