"""Backbones: one interface for every QA, captioning and judging model.

    from moviemem.backbones import load, user
    b = load("local-small")
    reply = b.send(Request.build([user("Which option ...?")], json_schema={...}, max_tokens=64))
    reply = b.chat([user("Which option ...?")], max_tokens=64)  # the same call, built for you
    reply.text, reply.tool_calls, reply.usage

Specs: openai:MODEL, openai-compatible:URL#MODEL, gemini:MODEL, llamacpp:PATH, local,
local-small, scripted. `load(spec, cache=DIR)` adds the replay cache. Third parties add
backbones with `@moviemem.register("backbone", "name")` or the entry-point group `moviemem.backbones`.
"""

from __future__ import annotations

from typing import Any

from .base import Backbone, ProviderBackbone, SendBackbone, Wrapper, send_all
from .cache import ReplayCache, ReplayMiss
from .pricing import cost, load_prices, price_for
from .registry import BACKBONES, list_backbones, load, registered
from .scripted import ScriptedBackbone
from .types import (
    Audio,
    Capabilities,
    Clip,
    Image,
    Message,
    Reply,
    Request,
    Text,
    Tool,
    ToolCall,
    Usage,
    assistant,
    normalise_messages,
    system,
    tool_result,
    user,
)

__all__ = [
    "Audio", "Backbone", "SendBackbone", "ProviderBackbone", "Wrapper", "send_all", "Capabilities", "Clip", "Gateway", "Image", "Message", "Reply",
    "ReplayCache", "ReplayMiss", "Request", "ScriptedBackbone", "Text", "Tool", "ToolCall", "Usage", "assistant",
    "cost", "list_backbones", "load", "load_prices", "normalise_messages", "price_for", "BACKBONES", "registered",
    "serve", "start_gateway", "system", "tool_result", "user",
]


def __getattr__(name: str) -> Any:
    # the gateway pulls in fastapi and uvicorn: import it only when asked for
    if name in ("serve", "start_gateway", "Gateway"):
        from . import gateway

        return getattr(gateway, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
