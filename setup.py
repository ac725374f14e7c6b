"""What pyproject.toml cannot say: the wheel is built from the tree as it is now, never from what an
earlier build left behind.

The package list is written out in pyproject.toml (tests/test_wheel_contents.py keeps it equal to the
package's folders). The repository root is the package `moviemem` (pyproject's package-dir maps it to
"."), so this file, in the package's folder, would ship as a module: build_py leaves it out.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py


def _emptied(folder: str) -> None:
    """Remove a build folder, unless it is this checkout or holds it (a `--build-lib .` would say so)."""
    target, here = Path(folder).resolve(), Path.cwd().resolve()
    if target.is_dir() and target != here and target not in here.parents:
        shutil.rmtree(target)


class BuildPy(build_py):
    """build_py without this file (setuptools leaves out only a setup script that it ran by its own name),
    into an emptied build/lib: files an earlier build (or anyone) left there, a module since renamed or a
    top-level `stale_top.py`, would otherwise ship in the wheel."""

    def run(self) -> None:
        _emptied(self.build_lib)
        super().run()

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        return [m for m in super().find_package_modules(package, package_dir) if (m[0], m[1]) != ("moviemem", "setup")]


class BdistWheel(bdist_wheel):
    """bdist_wheel into an emptied build/bdist.*/wheel: what is left there is packed into the wheel as it is."""

    def run(self) -> None:
        _emptied(self.bdist_dir)
        super().run()


if __name__ == "__main__":  # setuptools runs this file as __main__; importing it builds nothing
    setup(cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
