"""The package's shape: no import loops, and no module importing from a layer above its own
(docs/architecture.md draws the layers). Every import counts, those inside functions too: a lazy
import still makes the lower layer depend on the upper one."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import moviemem

ROOT = Path(moviemem.__file__).resolve().parent
SKIP = {"tests", "bench", "scripts", "docs", "out", ".venv", "setup.py"}  # setup.py builds the wheel; it is not in it
BASE = {"errors", "_version", "hardware", "config", "plugins", "timefmt", "digests", "files", "words", "progress", "loopback", "urls"}
# what each layer may import besides itself and the base modules
BELOW: dict[str, set[str]] = {
    "models": set(),
    "letta": set(),
    "backbones": {"models"},
    "memory": set(),
    "graph": {"memory"},
    "synth": {"memory"},
    "retrievers": {"models", "memory", "graph"},
    "ingest": {"models", "backbones", "memory", "graph"},
    "agents": {"models", "letta", "backbones", "memory", "graph", "retrievers"},
    "eval": {"models", "letta", "backbones", "memory", "graph", "retrievers", "agents"},
    "library": {"models", "letta", "backbones", "memory", "graph", "retrievers", "agents", "ingest", "eval"},
    "scale": {"models", "letta", "backbones", "memory", "graph", "retrievers", "agents", "ingest", "eval", "library"},
    "": {"library", "agents", "retrievers"},  # the package root: the public names, lazily
}
BELOW["film_tools"] = BELOW["library"] | {"library"}  # the checked tool functions shared by the MCP server and the CLI
BELOW["mcp_server"] = BELOW["film_tools"] | {"film_tools"}
BELOW["cli"] = BELOW["scale"] | {"scale", "synth", "film_tools", "mcp_server"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP:
            continue
        parts = ("moviemem", *rel.with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
        for t in targets:
            while t not in modules and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in modules and t != name:
                found.add(t)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    return "base" if parts[1] in BASE else parts[1]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_module_imports_a_layer_above_its_own():
    bad = []
    for mod, deps in _graph().items():
        layer = _layer(mod)
        allowed = BELOW.get(layer, set()) | {layer, "base"}
        bad += [f"{mod} -> {dep}" for dep in sorted(deps) if _layer(dep) not in allowed]
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_no_import_loops():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    loops: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not loops, f"import loops: {loops}"


def test_every_layer_is_known_and_the_checker_sees_imports():
    graph = _graph()
    assert {_layer(m) for m in graph} <= set(BELOW) | {"base", "cli"}
    # the walker itself works: the pipeline imports the stage types, agents import their types
    assert "moviemem.ingest.stage" in graph["moviemem.ingest.pipeline"]
    assert "moviemem.agents.types" in graph["moviemem.agents.base"]


def test_one_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == moviemem.__version__


def test_bench_scripts_import_only_what_the_package_has():
    """bench/ scripts run by hand, so nothing else notices when a module they import moves: every
    `from moviemem.X import Y` in them must name a module and a name that exist."""
    import importlib

    missing = []
    for script in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "moviemem"):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                missing.append(f"{script.name}: {node.module} ({exc})")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{script.name}: {node.module}.{alias.name}")
    assert not missing, missing
