"""Backbones by name: `load("openai:gpt-5-mini")`, `BACKBONES.register("name", factory)` (or
`moviemem.register("backbone", ...)`), and the entry-point group `moviemem.backbones`, so a third
party adds a backbone without touching moviemem.

A spec is `NAME` or `NAME:ARGUMENT` (split at the first colon). A factory is any callable
`factory(argument: str | None, **options) -> Backbone`, a class included. Built-in backends
are imported only when used: listing backbones never imports an SDK.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry, first_doc_line
from .base import Backbone
from .types import Capabilities

log = logging.getLogger("moviemem.backbones")

ENTRY_POINT_GROUP = "moviemem.backbones"
Factory = Callable[..., Backbone]


_OPTIONS = {"description", "capabilities", "example", "requires"}


def _check(name: str, factory: Factory, meta: dict[str, Any]) -> tuple[Factory, dict[str, Any]]:
    """A backbone registered in code: a name a spec can hold, and what its listing shows."""
    if ":" in name:
        raise MovieMemError(f"backbone name {name!r} must contain no ':' (a spec is NAME or NAME:ARGUMENT)")
    if set(meta) - _OPTIONS:
        raise MovieMemError(f"backbone {name!r}: unknown option(s) {', '.join(sorted(set(meta) - _OPTIONS))}; "
                            f"known: {', '.join(sorted(_OPTIONS))}")
    return factory, {**meta, "description": meta.get("description") or first_doc_line(factory),
                     "requires": tuple(meta.get("requires", ()))}


BACKBONES: Registry[Factory] = Registry("backbone", ENTRY_POINT_GROUP, check=_check)


@dataclass
class Registration:
    """What a listing shows of a backbone, without importing its SDK."""

    name: str
    factory: Factory | str
    description: str = ""
    capabilities: Capabilities | None = None
    example: str = ""
    requires: tuple[str, ...] = ()  # any one of these environment variables
    source: str = "moviemem"
    ready: Callable[[], bool] | None = field(default=None, repr=False)

    def is_ready(self) -> bool | None:
        if self.ready is not None:
            try:
                return bool(self.ready())
            except Exception:  # noqa: BLE001 - a readiness probe must not break a listing
                return False
        if self.requires:
            return any(os.environ.get(v) for v in self.requires)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "example": self.example or self.name,
                "capabilities": self.capabilities.to_dict() if self.capabilities else None,
                "requires": list(self.requires), "ready": self.is_ready(), "source": self.source}


def _add(name: str, factory: Factory | str, description: str = "", capabilities: Capabilities | None = None,
         example: str = "", requires: tuple[str, ...] = (), source: str = "moviemem",
         ready: Callable[[], bool] | None = None) -> None:
    BACKBONES.add(name, factory, source=source, description=description, capabilities=capabilities, example=example,
                  requires=tuple(requires), ready=ready)


def _registration(name: str) -> Registration:
    entry = BACKBONES.entry(name)
    meta = dict(entry.meta)
    if entry.lazy and not meta.get("description"):  # an entry point: its docstring is the description
        try:
            meta["description"] = first_doc_line(BACKBONES.get(name))
        except MovieMemError as exc:
            log.warning("%s", exc)
            meta["description"] = f"(failed to load: {BACKBONES.failures.get(name, exc)})"
    return Registration(name, entry.target, meta.get("description", ""), meta.get("capabilities"),
                        meta.get("example", ""), tuple(meta.get("requires", ())), entry.source, meta.get("ready"))


def _factory_call(factory: Factory, arg: str | None, options: dict[str, Any]) -> Backbone:
    try:
        return factory(arg, **options)
    except TypeError as exc:
        raise MovieMemError(f"bad options for backbone: {exc}") from None


def load(spec: str | Backbone, *, cache: str | Path | bool | None = None, cache_mode: str | None = None,
         **options: Any) -> Backbone:
    """A backbone from its spec string; `cache` (a directory, a .sqlite file, or True for
    the library's cache) wraps it in a ReplayCache with `cache_mode` (default: setting)."""
    if isinstance(spec, str):
        spec = spec.strip()
        name, _, arg = spec.partition(":")
        if name not in BACKBONES and spec.endswith(".gguf"):
            name, arg = "llamacpp", spec  # a bare GGUF path
        if name not in BACKBONES:
            raise MovieMemError(f"unknown backbone {name!r}; registered: {', '.join(sorted(BACKBONES.names()))}")
        backbone = _factory_call(BACKBONES.get(name), arg or None, options)
        if not isinstance(backbone, Backbone):
            raise MovieMemError(f"backbone factory {name!r} returned {type(backbone).__name__}, not a Backbone")
    elif isinstance(spec, Backbone):
        backbone = spec
    else:
        raise MovieMemError(f"a backbone spec must be a string, not {type(spec).__name__}")
    if cache:
        from .cache import ReplayCache

        return ReplayCache(backbone, None if cache is True else cache, cache_mode)
    return backbone



def open_for_library(spec: str, library_root: str | Path | None, cache_mode: str) -> Backbone:
    """A backbone behind a library's replay cache (<library>/cache, or the default cache for a library that is not
    a local folder): the one way the CLI, `Library` and the captions stage open a backbone by spec."""
    cache: Path | bool = Path(library_root) / "cache" if library_root is not None else True
    return load(spec, cache=cache, cache_mode=cache_mode)

def list_backbones() -> list[dict[str, Any]]:
    """Registered backbones with capabilities and readiness, JSON-serialisable (for `moviemem backbones`)."""
    return [_registration(n).to_dict() for n in sorted(BACKBONES.names())]


def registered() -> dict[str, Registration]:
    return {n: _registration(n) for n in BACKBONES.names()}


# ----------------------------------------------------------------------------- built-ins


def _lazy(module: str, kind: str) -> Factory:
    """`module`'s from_spec, imported on first use; the module is named in full, so the architecture
    test sees this import as it sees a dotted plug-in path."""

    def factory(arg: str | None, **options: Any) -> Backbone:
        backbone: Backbone = importlib.import_module(module).from_spec(kind, arg, **options)
        return backbone

    return factory


def _prepared(name: str) -> Callable[[], bool]:
    def ready() -> bool:
        from ..models import model_path

        try:
            model_path(name)
            return True
        except MovieMemError:
            return False

    return ready


def _register_builtins() -> None:
    api = Capabilities(text=True, images=True, tools=True, json=True)
    local = Capabilities(text=True, tools=True, json=True, logprobs=True)
    builtins = [
        ("openai", "moviemem.backbones.openai_backend", "OpenAI chat completions", api, "openai:gpt-5-mini", ("OPENAI_API_KEY",), None),
        ("openai-compatible", "moviemem.backbones.openai_backend", "any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio)",
         api, "openai-compatible:http://127.0.0.1:8000/v1#qwen2.5-vl", (), None),
        ("gemini", "moviemem.backbones.gemini_backend", "Google Gemini (API key or Vertex AI)", replace(Capabilities.all(), logprobs=False),
         "gemini:gemini-3-flash", ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"), None),
        ("llamacpp", "moviemem.backbones.llamacpp_backend", "a local GGUF model through llama.cpp", local,
         "llamacpp:/models/model.gguf", (), None),
        ("local", "moviemem.backbones.llamacpp_backend", "offline default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M", local, "local", (),
         _prepared("local")),
        ("local-small", "moviemem.backbones.llamacpp_backend", "offline SmolLM2-135M-Instruct: fast, weak, for tests", local,
         "local-small", (), _prepared("local-small")),
    ]
    for name, module, desc, caps, example, requires, ready in builtins:
        _add(name, _lazy(module, name), desc, caps, example, requires, "moviemem", ready)

    def scripted(arg: str | None, **options: Any) -> Backbone:
        from .scripted import ScriptedBackbone

        if arg and "replies" not in options:
            options["replies"] = [arg]
            options["cycle"] = True
        return ScriptedBackbone(**options)

    _add("scripted", scripted, "answers from a script (tests); echoes by default",
         replace(Capabilities.all(), logprobs=False), "scripted", (), "moviemem", lambda: True)


_register_builtins()
