"""The package's shape: no import loops, and no module importing from a layer above its own
(docs/architecture.md draws the layers). A module's layer is the folder it sits in (a module at the
package root is a layer of its own), so moving a file moves it between layers with no list to keep.
Every import counts, those inside functions too, and so do the dotted paths that registries and
`import_module` load later: a lazy import still makes the lower layer depend on the upper one."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import moviemem

ROOT = Path(moviemem.__file__).resolve().parent
SKIP = {"tests", "bench", "scripts", "docs", "out", ".venv", "setup.py"}  # setup.py builds the wheel; it is not in it
# What each layer may import besides itself and foundation/ (the small modules every layer uses).
# Every folder of the package and every module at its root must be named here, so none goes unchecked.
BELOW: dict[str, set[str]] = {
    "foundation": set(),
    "models": set(),
    "letta": set(),
    "backbones": {"models"},
    "memory": set(),
    "characters": {"models", "backbones", "memory"},  # who is who: voices, faces, names
    "graph": {"models", "backbones", "memory", "characters"},  # the narrative graph and its builders
    "synth": {"memory"},
    "retrievers": {"models", "memory", "graph"},
    "ingest": {"models", "backbones", "memory", "graph", "characters"},
    "agents": {"models", "letta", "backbones", "memory", "graph", "retrievers"},
    "eval": {"models", "letta", "backbones", "memory", "graph", "retrievers", "agents"},
    "library": {"models", "letta", "backbones", "memory", "graph", "characters", "retrievers", "agents", "ingest", "eval"},
    "doctor": {"models", "backbones", "memory"},  # is this machine ready: tools, weights, the llama.cpp build, disk
    "scale": {"models", "letta", "backbones", "memory", "graph", "characters", "retrievers", "agents", "ingest", "eval",
              "library", "doctor"},
    "": {"library", "agents", "retrievers", "backbones", "ingest", "eval"},  # the package's __init__: public names and register(), lazily
}
BELOW["serve"] = BELOW["library"] | {"library"}  # the MCP server and the checked film tools it shares with the CLI
BELOW["cli"] = BELOW["scale"] | {"scale", "synth", "serve"}
# a module run as a separate process (`python -m ...`), never imported: the Letta sidecar starts
# moviemem's own gateway server for the Letta server to call
PROCESSES = {("moviemem.letta.sidecar", "moviemem.cli")}
# "moviemem.pkg.module" or "moviemem.pkg.module:attr": a plug-in's dotted path, an import_module argument
DOTTED = re.compile(r"^moviemem(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?$")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP:
            continue
        parts = ("moviemem", *rel.with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _dotted(tree: ast.AST) -> list[str]:
    """The dotted paths written as strings in a module (plug-in targets, modules imported by name)."""
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and DOTTED.match(n.value)]


def _imports(name: str, path: Path, modules: dict[str, Path], dotted: bool = True) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
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
    for path_string in _dotted(tree) if dotted else ():
        t = path_string.partition(":")[0]
        while t not in modules and "." in t:
            t = t.rsplit(".", 1)[0]
        if t in modules and t != name and t != "moviemem":  # a bare "moviemem.x" that is no module: a logger or group name
            found.add(t)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return "" if len(parts) == 1 else parts[1]


def _graph(dotted: bool = True) -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules, dotted) for name, path in modules.items()}


def test_no_module_imports_a_layer_above_its_own():
    bad = []
    for mod, deps in _graph().items():
        layer = _layer(mod)
        allowed = BELOW.get(layer, set()) | {layer, "foundation"}
        bad += [f"{mod} -> {dep}" for dep in sorted(deps) if _layer(dep) not in allowed and (mod, dep) not in PROCESSES]
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_foundation_imports_nothing_else_of_the_package():
    """foundation/ is below every layer: a module there that reached up would tie all layers together."""
    bad = [f"{m} -> {d}" for m, deps in _graph().items() if _layer(m) == "foundation" for d in deps if _layer(d) != "foundation"]
    assert not bad, bad


def test_every_dotted_path_in_the_package_resolves():
    """A registry's built-in targets and the modules imported by name load only when used, so nothing
    else notices when one of them moves: each `moviemem.x.y[:attr]` string must import."""
    from moviemem.foundation.plugins import import_target

    broken = []
    for name, path in _modules().items():
        for dotted in _dotted(ast.parse(path.read_text(encoding="utf-8"))):
            module = dotted.partition(":")[0]
            if ":" not in dotted and module not in _modules():
                continue  # a logger or entry-point group name ("moviemem.backbones", "moviemem.policies")
            try:
                import_target(dotted) if ":" in dotted else importlib.import_module(module)
            except (ImportError, AttributeError) as exc:
                broken.append(f"{name}: {dotted} ({exc})")
    assert not broken, broken


def test_every_registered_plugin_target_resolves():
    """What the registries hold, built-ins registered by dotted path included."""
    from moviemem.agents.readers.registry import READERS
    from moviemem.agents.registry import POLICIES
    from moviemem.backbones.registry import BACKBONES
    from moviemem.eval.formats import ADAPTERS, FORMATS
    from moviemem.eval.tasks import TASKS
    from moviemem.ingest.registry import STAGES
    from moviemem.retrievers.postprocess import POSTPROCESSORS
    from moviemem.retrievers.registry import RETRIEVERS
    from moviemem.retrievers.routing import CHANNEL_RETRIEVERS

    failed = {}
    for registry in (POLICIES, BACKBONES, FORMATS, ADAPTERS, TASKS, STAGES, RETRIEVERS, POSTPROCESSORS, READERS,
                     CHANNEL_RETRIEVERS):
        registry.load_all()
        failed.update({f"{registry.kind} {n}": why for n, why in registry.failures.items()})
    assert not failed, failed


def test_no_import_loops():
    """Imports only: a registry names its plug-ins by dotted path exactly so that they may import it."""
    graph = _graph(dotted=False)
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
    on_disk = {_layer(m) for m in graph}
    assert on_disk == set(BELOW), f"layers on disk but not placed: {on_disk - set(BELOW)}; placed but gone: {set(BELOW) - on_disk}"
    # the walker itself works: the pipeline imports the stage types, agents import their types
    assert "moviemem.ingest.stage" in graph["moviemem.ingest.pipeline"]
    assert "moviemem.agents.types" in graph["moviemem.agents.base"]
    # and the dotted paths: a registry's built-ins, a module imported by name
    assert "moviemem.agents.policies.hybrid" in graph["moviemem.agents.registry"]
    assert "moviemem.backbones.openai_backend" in graph["moviemem.backbones.registry"]
    assert "moviemem.ingest.stages.events" in graph["moviemem.ingest.registry"]


def test_one_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == moviemem.__version__


def test_bench_scripts_import_only_what_the_package_has():
    """bench/ scripts run by hand, so nothing else notices when a module they import moves: every
    `from moviemem.X import Y` in them must name a module and a name that exist."""
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
