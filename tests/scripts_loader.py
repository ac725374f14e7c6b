"""Scripts run by hand (bench/, scripts/) loaded as modules for a test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """The script at `relative` (to the repository root), under a name of its own; registered in
    sys.modules, where its dataclasses look their module up."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"script_under_test_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
