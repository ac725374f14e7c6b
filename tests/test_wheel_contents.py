"""Issue 62 (low): the wheel holds the package's own folders and nothing else. The package list is
written out in pyproject.toml (a search of the tree shipped any stray folder with an __init__.py as
`moviemem.<folder>`), kept equal here to the folders that are package layers (test_architecture's
BELOW); and the wheel is built from the tree, not from what build/lib or build/bdist.* held."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

from test_architecture import BELOW, ROOT, SKIP


def _package_folders() -> set[str]:
    """moviemem and each folder under a layer of the package that holds an __init__.py, as dotted names."""
    found = {"moviemem"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts and rel.parts[0] not in SKIP and rel.parts[0] in BELOW and ".venv" not in rel.parts:
            found.add(".".join(("moviemem", *rel.parts)))
    return found


def test_the_package_list_is_the_package_layers_folders() -> None:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert len(listed) == len(set(listed))
    assert set(listed) == _package_folders(), (set(listed) ^ _package_folders())
    layers = {name for name in BELOW if name and (ROOT / name).is_dir()}  # "" and library.py are modules of the root
    assert {f"moviemem.{name}" for name in layers} <= set(listed)


def test_the_wheel_ships_no_stale_build_file_and_no_stray_folder(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*_cache", "build", "dist",
                                                              "*.egg-info", "tests", "out"))
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    planted = {"build/lib/stale_top.py": "moviemem_stale_top = 1\n",
               "build/lib/moviemem/renamed_long_ago.py": "x = 1\n",
               f"build/bdist.{plat}/wheel/moviemem/planted_in_bdist.py": "x = 1\n",
               f"build/bdist.{sysconfig.get_platform()}/wheel/moviemem/planted_too.py": "x = 1\n",
               "stray/__init__.py": "", "stray/thing.py": "x = 1\n"}
    for rel, text in planted.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(src)], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = wheels.glob("moviemem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "moviemem/agents/policies/hybrid.py" in names and "moviemem/eval/templates/item.html.j2" in names
    leaked = [n for n in names if any(bad in n for bad in ("stale_top", "renamed_long_ago", "planted", "stray"))]
    assert not leaked, leaked
    shipped = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.startswith("moviemem/") and n.endswith(".py")}
    assert shipped == _package_folders(), shipped ^ _package_folders()
