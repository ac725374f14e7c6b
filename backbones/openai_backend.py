"""OpenAI chat completions through the official SDK, for OpenAI and any compatible server
(vLLM, Ollama, llama.cpp server, LM Studio, moviemem's own gateway).

The SDK's own retries are off (max_retries=0): retry.py retries once, in one place,
honouring Retry-After. The API key is read from the environment on every request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..foundation import secrets as known_secrets
from ..foundation.errors import MovieMemError
from ..foundation.urls import http_url, url_secrets
from . import media
from .base import ProviderBackbone
from .settings import get_backbone_settings
from .types import Audio, Capabilities, Clip, Image, Message, Reply, Request, Text, ToolCall, Usage, parse_arguments

OPENAI_URL = "https://api.openai.com/v1"
# reasoning models accept only the default temperature and count output as max_completion_tokens
_REASONING = re.compile(r"^(o\d|gpt-5)")


def _clean_url(url: str) -> str:
    """The URL without user:password or query, so it can name a model in cache keys and logs."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class OpenAIBackbone(ProviderBackbone):
    """`openai:MODEL` or `openai-compatible:BASE_URL#MODEL`.

    Options: base_url, api_key_env (the variable holding the key: OPENAI_API_KEY for
    openai, OPENAI_COMPATIBLE_API_KEY for compatible servers so an OpenAI key is never
    sent to a third-party server), capabilities (overrides, e.g. {"video": True} for a
    vLLM VLM), extra (dict merged into every request body, e.g. {"reasoning_effort": "minimal"}),
    plus ProviderBackbone's concurrency, timeout, max_attempts, retry_initial_s, retry_max_s.
    """

    def __init__(self, model: str, *, base_url: str | None = None, compatible: bool | None = None,
                 name: str | None = None, api_key_env: str | None = None,
                 capabilities: dict[str, bool] | None = None, extra: dict[str, Any] | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        if not model:
            raise MovieMemError("an OpenAI backbone needs a model name, e.g. openai:gpt-5-mini")
        self.model = model
        # `openai:` with a base_url is OpenAI behind a proxy: same model, same key, same prices
        self.compatible = (base_url is not None and _clean_url(base_url) != OPENAI_URL) if compatible is None else compatible
        self.base_url = base_url or OPENAI_URL
        self.api_key_env = api_key_env or ("OPENAI_COMPATIBLE_API_KEY" if self.compatible else "OPENAI_API_KEY")
        self.extra = dict(extra or {})
        known_secrets.watch_env(self.api_key_env)  # output is scrubbed of the key from now on, whatever echoes it
        known_secrets.register_url(self.base_url)
        base_caps = Capabilities(text=True, images=True, tools=True, json=True)
        self.capabilities = base_caps.with_overrides(capabilities)
        clean = _clean_url(self.base_url)
        self.name = name or (f"openai-compatible:{clean}#{model}" if self.compatible else f"openai:{model}")
        ident = f"openai-compatible:{clean}#{model}" if self.compatible else f"openai:{model}"
        if self.extra:
            ident += "?" + hashlib.sha256(json.dumps(self.extra, sort_keys=True).encode()).hexdigest()[:12]
        self.model_id = ident
        self.price_key = None if self.compatible else model
        self._client: Any = None

    def secrets(self) -> list[str]:
        """The key and the base URL's credentials (the SDK sends them as an HTTP Basic header, which a
        server may echo)."""
        key = os.environ.get(self.api_key_env)
        return [*([key] if key else []), *url_secrets(self.base_url)]

    def _api_key(self) -> str:
        key = os.environ.get(self.api_key_env)
        if key:
            known_secrets.register(key)  # the value sent, kept even if the variable changes later
            return key
        if self.compatible:
            return "no-key"  # local servers ignore it, but the SDK requires one
        raise MovieMemError(f"{self.name}: set {self.api_key_env} to call OpenAI")

    def client(self) -> Any:
        """One SDK client per backbone, so its connection pool is reused across calls."""
        if self._client is None:
            from openai import OpenAI

            self._api_key()  # fail fast and clearly when the key is missing
            self._client = OpenAI(api_key=self._api_key, base_url=self.base_url, max_retries=0,
                                  timeout=self.timeout)
        return self._client

    # -- request

    def _part(self, p: Any) -> dict[str, Any]:
        if isinstance(p, Text):
            return {"type": "text", "text": p.text}
        if isinstance(p, Image):
            return {"type": "image_url", "image_url": {"url": p.data_url()}}
        if isinstance(p, Audio):
            data, fmt = _audio_bytes(p)
            return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}
        if isinstance(p, Clip):  # vLLM-style video_url; only sent when the capability is switched on
            path = p.path if (p.start == 0 and p.end is None) else media.cut(
                p.path, p.start, p.end, kind="video", scratch=get_backbone_settings().scratch_dir)
            encoded = base64.b64encode(path.read_bytes()).decode()
            return {"type": "video_url", "video_url": {"url": f"data:{p.mime_type()};base64,{encoded}"}}
        raise MovieMemError(f"unsupported part {type(p).__name__}")

    def _message(self, m: Message) -> dict[str, Any]:
        if m.role == "tool":
            return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text}
        if m.role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                out["tool_calls"] = [c.to_openai() for c in m.tool_calls]
            return out
        if m.role == "system" or all(isinstance(p, Text) for p in m.parts):
            return {"role": m.role, "content": m.text}
        return {"role": m.role, "content": [self._part(p) for p in m.parts]}

    def body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [self._message(m) for m in request.messages]}
        reasoning = not self.compatible and _REASONING.match(self.model)
        if self.compatible:
            body["max_tokens"] = request.max_tokens
        else:
            body["max_completion_tokens"] = request.max_tokens
        if not reasoning:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = [t.to_openai() for t in request.tools]
            if request.tool_choice in ("none", "required"):
                body["tool_choice"] = request.tool_choice
            elif request.tool_choice:
                body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        if request.json_schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": request.json_schema, "strict": False}}
        body.update(self.extra)
        return body

    # -- call

    def _send(self, request: Request, timeout: float) -> Reply:
        body = self.body(request)
        model, messages = body.pop("model"), body.pop("messages")
        # everything else travels as extra_body: server-specific options never trip the SDK's signature
        raw = self.client().chat.completions.with_raw_response.create(model=model, messages=messages,
                                                                      extra_body=body, timeout=timeout)
        text = raw.http_response.text
        try:
            completion = raw.parse()
            choice = completion.choices[0]
            message = choice.message
        except Exception:  # noqa: BLE001 - a body the SDK cannot read (or no choices) is a transport fault
            return Reply.failed("transport fault: malformed response body or no choices", raw=text[:20000], transient=True)
        usage = Usage()
        if completion.usage is not None:
            details = getattr(completion.usage, "prompt_tokens_details", None)
            usage = Usage(input_tokens=completion.usage.prompt_tokens or 0,
                          output_tokens=completion.usage.completion_tokens or 0,
                          cached_input_tokens=getattr(details, "cached_tokens", None) or 0)
        calls: list[ToolCall] = []
        bad_args = []
        for i, tc in enumerate(message.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            args = parse_arguments(fn.arguments)
            if args is None:
                bad_args.append(fn.name)
            calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name, arguments=args or {}))
        content = message.content or ""
        reply = Reply(text=content, tool_calls=calls, usage=usage, finish_reason=choice.finish_reason,
                      model=self.model_id, raw=content or None)
        if getattr(message, "refusal", None):
            reply.invalid, reply.error = True, f"refused: {message.refusal}"
        elif bad_args:
            reply.invalid, reply.error, reply.raw = True, f"tool call arguments are not JSON ({bad_args[0]})", text[:20000]
        return reply


def _audio_bytes(a: Audio) -> tuple[bytes, str]:
    if a.data is not None:
        return a.data, a.mime_type().split("/")[-1].replace("mpeg", "mp3")
    path = a.file()
    if a.start == 0 and a.end is None and str(path).endswith((".wav", ".mp3")):
        return path.read_bytes(), str(path).rsplit(".", 1)[-1]
    cut = media.cut(path, a.start, a.end, kind="audio", scratch=get_backbone_settings().scratch_dir)
    return cut.read_bytes(), "mp3"


def from_spec(kind: str, arg: str | None, **options: Any) -> OpenAIBackbone:
    """`openai:MODEL` or `openai-compatible:URL#MODEL`."""
    if kind == "openai":
        if not arg:
            raise MovieMemError("use openai:MODEL, e.g. openai:gpt-5-mini")
        return OpenAIBackbone(arg, compatible=False, **options)
    if not arg or "#" not in arg:
        raise MovieMemError("use openai-compatible:BASE_URL#MODEL, e.g. openai-compatible:http://127.0.0.1:8000/v1#qwen2.5-vl")
    url, _, model = arg.rpartition("#")
    url = http_url(url, "openai-compatible's base URL", "openai-compatible:http://127.0.0.1:8000/v1#MODEL")
    return OpenAIBackbone(model, base_url=url, compatible=True, **options)
