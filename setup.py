"""What pyproject.toml cannot say: the package list, read from the tree, so that a new subpackage
ships without anyone listing it (a hand-written list once left out moviemem.agents.policies).

The repository root is the package `moviemem` (pyproject's package-dir maps it to "."), so
`[tool.setuptools.packages.find]`, which names packages after their folders, would list `agents`
where the wheel needs `moviemem.agents`; and this file, in the package's folder, would ship as a module.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# folders of the checkout that are not the package: tests, scripts run by hand, run outputs, build trees
NOT_SHIPPED = ["tests", "tests.*", "bench", "bench.*", "scripts", "scripts.*", "docs", "docs.*", "out", "out.*",
               "build", "build.*", "dist", "dist.*"]


class BuildPy(build_py):
    """build_py without this file (setuptools leaves out only a setup script that it ran by its own name),
    into an emptied build/lib: files an earlier build left there (a module since renamed or deleted)
    would otherwise ship in the wheel."""

    def run(self) -> None:
        import shutil
        from pathlib import Path

        stale = Path(self.build_lib) / "moviemem"
        if stale.is_dir():
            shutil.rmtree(stale)
        super().run()

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        return [m for m in super().find_package_modules(package, package_dir) if (m[0], m[1]) != ("moviemem", "setup")]


if __name__ == "__main__":  # setuptools runs this file as __main__; importing it builds nothing
    setup(packages=["moviemem", *(f"moviemem.{p}" for p in find_packages(".", exclude=NOT_SHIPPED))],
          cmdclass={"build_py": BuildPy})
