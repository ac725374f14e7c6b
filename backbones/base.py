"""The Backbone protocol, the one batch runner, and the shared behaviour of backends and wrappers.

Every model (API, local, scripted) and every wrapper around one (the replay cache, the
run's budget meter, a seeded sampler) answers one call, `send(Request) -> Reply`; `chat(...)`
is a convenience that builds the Request. Wrappers therefore see every field of every call
(tools, seed, timeout, log-probabilities) and cannot drop one by rebuilding the call by hand.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, is_dataclass, replace
from typing import Any, Protocol, runtime_checkable

import json_repair

from ..foundation.errors import MovieMemError
from ..foundation.progress import CALLS, read_speed
from ..foundation.secrets import scrub_value
from ..foundation.words import estimate_tokens
from .pace import SETTING
from .pricing import cost, load_prices
from .retry import call_with_retries
from .types import Capabilities, MessageLike, Reply, Request, Tool

# ----------------------------------------------------------------------------- protocol


@runtime_checkable
class Backbone(Protocol):
    """Anything that answers requests. `name` is the spec string it was loaded from;
    `model_id` identifies the model and every option that changes its answers (the
    replay cache keys on it), never credentials. Subclass `SendBackbone` to get `chat`
    and `chat_many` for free."""

    name: str
    model_id: str
    capabilities: Capabilities

    def send(self, request: Request) -> Reply: ...


def send_all(backbone: Backbone, requests: Sequence[Request], *,
             on_reply: Callable[[int, Reply], None] | None = None) -> list[Reply]:
    """Answer several requests; replies come back in the order given.

    A local model (`sequential`) answers in turn, so its requests run sorted by their text:
    questions over the same long context become neighbours and each reuses the prompt already
    in the model's KV cache. Other backbones run concurrently up to their `concurrency`.
    `on_reply(done, reply)` is called in turn as replies arrive (progress bars)."""
    out: list[Reply | None] = [None] * len(requests)
    lock = threading.Lock()
    done = 0

    def one(i: int) -> None:
        nonlocal done
        reply = backbone.send(requests[i])
        with lock:
            out[i] = reply
            done += 1
            if on_reply is not None:
                on_reply(done, reply)

    sequential = bool(getattr(backbone, "sequential", False))
    order = sorted(range(len(requests)), key=lambda i: requests[i].prefix_text()) if sequential else range(len(requests))
    workers = 1 if sequential else max(1, min(int(getattr(backbone, "concurrency", 4)), len(requests) or 1))
    if workers == 1:
        for i in order:
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for f in [pool.submit(one, i) for i in order]:
                f.result()
    return [r for r in out if r is not None]


class SendBackbone(ABC):
    """A backbone defined by its `send` alone (a wrapper, a remote worker, a test fake); `chat` and
    `chat_many` are built on it. A model provider subclasses ProviderBackbone instead."""

    name: str
    model_id: str
    capabilities: Capabilities
    sequential: bool = False  # one model instance answering in turn (local): order batches by prefix
    concurrency: int = 4

    @abstractmethod
    def send(self, request: Request) -> Reply:
        """Answer a prepared Request."""

    def chat(self, messages: Iterable[MessageLike] | str, *, tools: Iterable[Tool | dict[str, Any]] | None = None,
             json_schema: dict[str, Any] | None = None, max_tokens: int = 512, temperature: float = 0.0,
             timeout: float | None = None, tool_choice: str | None = None, seed: int | None = None,
             logprobs: int = 0, shared_prefix: int = 0) -> Reply:
        return self.send(Request.build(messages, tools=tools, json_schema=json_schema, max_tokens=max_tokens,
                                       temperature=temperature, tool_choice=tool_choice, timeout=timeout, seed=seed,
                                       logprobs=logprobs, shared_prefix=shared_prefix))

    def chat_many(self, requests: Sequence[Request | dict[str, Any]]) -> list[Reply]:
        return send_all(self, [r if isinstance(r, Request) else Request.build(**r) for r in requests])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Wrapper(SendBackbone):
    """A backbone around another: it keeps the inner backbone's identity and scheduling
    (name, model_id, capabilities, sequential, concurrency) and overrides `send`, the one hook.
    No attribute is forwarded implicitly: what a wrapper offers is what it declares."""

    def __init__(self, inner: Backbone, *, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.model_id = inner.model_id
        self.capabilities = inner.capabilities
        self.sequential = bool(getattr(inner, "sequential", False))
        self.concurrency = int(getattr(inner, "concurrency", 4))

    def send(self, request: Request) -> Reply:
        return self.inner.send(request)

    def secrets(self) -> list[str]:
        return list(getattr(self.inner, "secrets", list)())


# ----------------------------------------------------------------------------- shared behaviour


def scrub(reply: Reply, secrets: Iterable[str] = ()) -> Reply:
    """`reply` with every credential this process holds (foundation.secrets: the registered keys and URL
    passwords, the key variables of the environment, and `secrets`) removed from every field it has: the
    text, raw body, error, finish reason, model, parsed data, log-probabilities and each tool call's id,
    name, arguments and signature. Done once, after the reply is checked (the check's own error quotes
    the finish reason), where a provider's reply enters, so the CLI, MCP, `serve`, traces and files all
    see the scrubbed text; every way out scrubs again."""
    clean: Reply = _scrubbed(reply, tuple(secrets))  # a Reply in, the same dataclass out
    return clean


def _scrubbed(obj: Any, known: tuple[str, ...]) -> Any:
    """A dataclass with each field scrubbed (nested dataclasses and lists of them too), field by field
    so that a field added later is covered without being named here."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return replace(obj, **{f.name: _scrubbed(getattr(obj, f.name), known) for f in fields(obj) if f.init})
    if isinstance(obj, list) and any(is_dataclass(v) for v in obj):
        return [_scrubbed(v, known) for v in obj]
    return scrub_value(obj, known)


def check_schema(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """A small JSON-schema check (type, required, enum, properties, items): enough to
    tell a usable structured answer from a broken one without another dependency."""
    types: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
             "null": type(None)}
    expected = schema.get("type")
    if isinstance(expected, str) and expected in types:
        ok = isinstance(value, types[expected]) and not (expected in ("integer", "number") and isinstance(value, bool))
        if not ok:
            return f"{path} should be {expected}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} should be one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{path} should be {schema['const']!r}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{path} is missing {key!r}"
        for key, sub in (schema.get("properties") or {}).items():
            if key in value and isinstance(sub, dict):
                if err := check_schema(value[key], sub, f"{path}.{key}"):
                    return err
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            if err := check_schema(item, schema["items"], f"{path}[{i}]"):
                return err
    return None


def parse_json_reply(text: str) -> Any:
    """JSON from a model's text: strict first, then repaired (fences, trailing prose,
    truncation). Returns None when nothing JSON-like is there: no answer is invented."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    value = json_repair.loads(stripped)
    return value if isinstance(value, (dict, list)) and value != {} and value != [] else None


class ProviderBackbone(SendBackbone):
    """The base of a model provider's backend (OpenAI, Gemini, llama.cpp): shared behaviour for them: normalisation, capability checks, a
    concurrency limit, retries, timing, validation of structured replies, and cost.

    Subclasses implement `_send(request, timeout) -> Reply` and raise the provider's
    exceptions on transport failures; `retry.py` decides which of those are retried.
    """

    name: str
    model_id: str
    capabilities: Capabilities
    price_key: str | None = None  # the price-table entry; None = unknown

    def __init__(self, *, concurrency: int | None = None, timeout: float | None = None,
                 max_attempts: int | None = None, retry_initial_s: float | None = None,
                 retry_max_s: float | None = None) -> None:
        from .settings import get_backbone_settings

        s = get_backbone_settings()  # backbone_timeout_s: a remote call's limit, a local model's floor (pace.py)
        self.concurrency = max(1, concurrency or s.backbone_concurrency)
        self.timeout = timeout or s.backbone_timeout_s
        self.max_attempts = max(1, max_attempts or s.backbone_max_attempts)
        self.retry_initial_s = s.backbone_retry_initial_s if retry_initial_s is None else retry_initial_s
        self.retry_max_s = s.backbone_retry_max_s if retry_max_s is None else retry_max_s
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._prices = load_prices(s.prices)  # read once: settings and TOML parsing cost ms per call

    @abstractmethod
    def _send(self, request: Request, timeout: float) -> Reply:
        """One attempt at the provider; raise on transport errors, return Reply.failed on bad content."""

    def secrets(self) -> list[str]:
        """Credential values this backbone uses, so logs and errors can redact them."""
        return []

    def send(self, request: Request) -> Reply:
        """Answer a prepared Request (the replay cache and the gateway call this)."""
        missing = sorted(request.needs() - {k for k, v in self.capabilities.to_dict().items() if v})
        if missing:
            raise MovieMemError(f"backbone {self.name} does not take {', '.join(missing)}")
        timeout = request.timeout or self.timeout
        started = time.perf_counter()
        prompt = sum(estimate_tokens(m.text) for m in request.messages)
        with self._slots, CALLS.call(self.name, prompt, read_speed(self)):  # what a log's heartbeat names (issue 61)
            reply = call_with_retries(lambda: self._send(request, timeout), label=self.name,
                                      attempts=self.max_attempts, initial=self.retry_initial_s,
                                      max_wait=self.retry_max_s, secrets=self.secrets(),
                                      waited=f"each attempt waited {timeout:.0f} s for the whole reply"
                                             + ("" if request.timeout else f"; raise {SETTING} to wait longer"))
        reply = scrub(self._check(reply, request), self.secrets())
        images, video_s, audio_s = request.media_usage()
        usage = replace(reply.usage, images=images, video_s=video_s, audio_s=audio_s,
                        latency_s=time.perf_counter() - started)
        usage.cost_usd = cost(self.price_key, usage, self._prices) if not reply.transient else None
        reply.usage = usage
        reply.model = reply.model or self.model_id
        return reply

    def _check(self, reply: Reply, request: Request) -> Reply:
        if reply.invalid:
            return reply
        if not reply.text.strip() and not reply.tool_calls:
            why = "empty reply" + (f" (finish_reason {reply.finish_reason})" if reply.finish_reason else "")
            return replace(reply, invalid=True, error=why)
        if request.json_schema is not None and not reply.tool_calls:
            value = parse_json_reply(reply.text)
            if value is None:
                return replace(reply, invalid=True, error="reply is not JSON", raw=reply.raw or reply.text)
            if err := check_schema(value, request.json_schema):
                return replace(reply, invalid=True, error=f"reply does not match the schema: {err}",
                               raw=reply.raw or reply.text, data=value)
            return replace(reply, data=value)
        return reply


