"""A backbone that answers from a script, so tests can check exactly what a policy sends.

It goes through the same ProviderBackbone path as real models (capability checks, JSON
validation, usage), and records every Request it receives in `calls`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Union

from ..foundation.errors import MovieMemError
from ..foundation.words import estimate_tokens
from .base import ProviderBackbone
from .types import Capabilities, Reply, Request, ToolCall, Usage

Scripted = Union[str, Reply, dict[str, Any], BaseException]
Script = Union[Sequence[Scripted], Callable[[Request], Scripted], None]


class ScriptedBackbone(ProviderBackbone):
    """Answers in turn from `replies`, or from `replies(request)` when it is a function.

    A scripted answer is a string, a Reply, a dict ({"text": ..., "tool_calls": [{"name",
    "arguments"}], "invalid": ..., "error": ...}) or an exception, which is raised inside
    the call as a provider error would be (to exercise retries and invalid replies).
    With no script it echoes the last user text. Running out of replies is an error:
    a policy that calls more often than the test expects should fail loudly.
    """

    price_key = "scripted"

    def __init__(self, replies: Script = None, *, name: str = "scripted", model_id: str | None = None,
                 capabilities: Capabilities | dict[str, bool] | None = None, cycle: bool = False,
                 **options: Any) -> None:
        options.setdefault("retry_initial_s", 0.0)
        options.setdefault("retry_max_s", 0.0)
        super().__init__(**options)
        self.name = name
        self.model_id = model_id or name
        if isinstance(capabilities, Capabilities):
            self.capabilities = capabilities
        else:
            # log-probabilities only when a test scripts them (a Reply with `logprobs`) and asks for them
            self.capabilities = Capabilities.all().with_overrides({"logprobs": False, **(capabilities or {})})
        self._script = replies
        self._cycle = cycle
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[Request] = []

    def _pick(self, request: Request) -> Scripted:
        if self._script is None:
            last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
            return last or "(empty)"
        if callable(self._script):
            return self._script(request)
        script = list(self._script)
        with self._lock:
            if self._next >= len(script):
                if not self._cycle or not script:
                    raise MovieMemError(f"scripted backbone ran out of replies after {len(script)} call(s)")
                self._next = 0
            item = script[self._next]
            self._next += 1
        return item

    def _send(self, request: Request, timeout: float) -> Reply:
        with self._lock:
            self.calls.append(request)
        item = self._pick(request)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Reply):
            reply = replace(item, tool_calls=list(item.tool_calls))
        elif isinstance(item, str):
            reply = Reply(text=item, finish_reason="stop")
        elif isinstance(item, dict):
            calls = [ToolCall(id=str(c.get("id") or f"call_{len(self.calls)}_{i}"), name=c["name"],
                              arguments=dict(c.get("arguments") or {})) for i, c in enumerate(item.get("tool_calls") or [])]
            reply = Reply(text=str(item.get("text") or ""), tool_calls=calls, invalid=bool(item.get("invalid")),
                          error=item.get("error"), raw=item.get("raw"),
                          finish_reason=item.get("finish_reason") or ("tool_calls" if calls else "stop"))
        else:
            raise MovieMemError(f"unsupported scripted reply {type(item).__name__}")
        prompt = sum(estimate_tokens(m.text) for m in request.messages)
        reply.usage = Usage(input_tokens=prompt, output_tokens=estimate_tokens(reply.text))
        return reply
