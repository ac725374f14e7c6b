"""`moviemem serve`: an OpenAI-compatible HTTP gateway over any backbone and text embedder.

Endpoints: GET /v1/models, POST /v1/chat/completions (tools, tool_choice, response_format,
stream), POST /v1/embeddings (float or base64), and GET /v1/usage (tokens served so far).
It speaks the OpenAI wire format closely (ids, usage blocks, finish_reason, tool_calls
with string arguments) because clients such as a Letta server rely on its details.
Bound to 127.0.0.1 by default. Browsers can reach loopback too, so every request must name a
loopback Host (and Origin, when it has one) unless other hosts are allowed, POSTs must be
application/json, bodies are bounded, images must be data: URLs (the gateway never reads a local
path a client names), and `token` requires `Authorization: Bearer TOKEN`.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from ..foundation import secrets as known_secrets
from ..foundation.errors import MovieMemError
from ..foundation.httpserver import BackgroundServer, listen, run
from ..foundation.loopback import LOOPBACK, foreign
from .base import Backbone
from .registry import load
from .types import Reply, Request, Tool

SHUTDOWN_GRACE_S = 5  # requests in flight get this long after SIGTERM; then the gateway stops anyway
log = logging.getLogger("moviemem.backbones.gateway")

_FINISH = {"stop", "length", "tool_calls", "content_filter"}
MAX_BODY_BYTES = 32 * 2**20  # a few full-size stills as data: URLs
MAX_EMBED_INPUTS = 2048  # texts per embeddings request, as OpenAI allows


async def _read_json(http: HTTPRequest) -> Any:
    """The JSON body, read in chunks and refused past MAX_BODY_BYTES (never an unbounded read), with
    finite numbers only (1e400 would reach int() as infinity) and nesting Python's parser can take."""
    chunks, size = [], 0
    async for chunk in http.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise MovieMemError(f"request body over {MAX_BODY_BYTES >> 20} MB")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks), parse_float=_finite, parse_constant=_finite)
    except RecursionError:
        raise MovieMemError("the body nests too deeply") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise MovieMemError(f"{text[:20]} is not a finite number")
    return value


def _check_content(body: Any, allow_remote_images: bool) -> None:
    """Text and data: URL images only (http(s) images only when allowed): a part naming a path
    would make the gateway read and send on a local file."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type", "text") if isinstance(part, dict) else None
            if kind == "text":
                continue
            if kind != "image_url":
                raise MovieMemError(f"content part type {kind!r} is not accepted: send text and image_url parts")
            ref = part.get("image_url")
            url = str((ref.get("url") if isinstance(ref, dict) else ref) or "")
            remote = url.startswith(("http://", "https://"))
            if not (url.startswith("data:") or (remote and allow_remote_images)):
                raise MovieMemError("image_url must be a data: URL" + (" or http(s)" if allow_remote_images else "")
                                    + "; this gateway reads no local files")


class ScrubbedJSON(JSONResponse):
    """A JSON reply with every credential of the process scrubbed from it (foundation.secrets): the
    gateway's replies and error bodies quote what an upstream model said, which may echo a key."""

    def render(self, content: Any) -> bytes:
        return known_secrets.scrub(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))).encode()


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    return ScrubbedJSON(status_code=status,
                        content={"error": {"message": message, "type": kind, "param": param, "code": None}})


class _Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.data = {"requests": 0, "chat_requests": 0, "embedding_requests": 0, "errors": 0,
                     "prompt_tokens": 0, "completion_tokens": 0, "embedding_tokens": 0}

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                self.data[k] += v

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.data)


def _count_tokens(embedder: Any, texts: list[str]) -> int:
    """Tokens as the embedder's own tokenizer counts them (words when it has none)."""
    tokenizer = getattr(getattr(embedder, "_model", None), "tokenizer", None)
    if tokenizer is None:
        return sum(len(t.split()) for t in texts)
    return sum(len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"])


def _request_from_body(body: dict[str, Any]) -> tuple[Request, bool, bool]:
    """(request, stream, include_usage) from an OpenAI chat body; MovieMemError when it is unusable."""
    if not isinstance(body.get("messages"), list):
        raise MovieMemError("'messages' must be a list")
    if body.get("n") not in (None, 1):
        raise MovieMemError("only n=1 is supported")
    for key in ("tools", "functions"):
        given = body.get(key) or []
        if not isinstance(given, list) or not all(isinstance(t, dict) for t in given):
            raise MovieMemError(f"'{key}' must be a list of objects")
    tools = [t for t in body.get("tools") or [] if t.get("type", "function") == "function"]
    tools += [{"function": f} for f in body.get("functions") or []]  # the legacy form
    choice = body.get("tool_choice", body.get("function_call"))
    if isinstance(choice, dict):
        choice = (choice.get("function") or choice).get("name")
    schema = None
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
    elif fmt.get("type") == "json_object":
        schema = {}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 1024
    temperature = body.get("temperature")
    request = Request.build(body["messages"], tools=[Tool.from_any(t) for t in tools], json_schema=schema,
                            max_tokens=int(max_tokens), temperature=0.0 if temperature is None else float(temperature),
                            seed=body.get("seed"),
                            tool_choice=choice if tools else None)
    stream = bool(body.get("stream"))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return request, stream, include_usage


def _usage_block(reply: Reply) -> dict[str, Any]:
    u = reply.usage
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens, "total_tokens": u.total_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens}}


def _finish(reply: Reply) -> str:
    if reply.tool_calls:
        return "tool_calls"
    if reply.finish_reason in _FINISH:
        return reply.finish_reason
    return "length" if reply.finish_reason in ("max_tokens", "timeout") else "stop"


def create_app(backbone: Backbone, embedder: Any = None, *, token: str | None = None,
               allowed_hosts: Sequence[str] = LOOPBACK, allow_remote_images: bool = False) -> FastAPI:
    """The gateway as an ASGI app (tests and embedding in other servers use it directly)."""
    known_secrets.register(token)  # a client's echo of the token is scrubbed like an upstream's of a key
    app = FastAPI(title="moviemem gateway", docs_url=None, redoc_url=None, default_response_class=ScrubbedJSON)
    _add_guard(app, set(allowed_hosts), token)
    stats = _Stats()
    app.state.stats = stats
    created = int(time.time())
    _add_model_routes(app, backbone, embedder, stats, created)
    _add_chat_route(app, backbone, stats, created, allow_remote_images)
    _add_embeddings_route(app, embedder, stats)
    return app


def _add_guard(app: FastAPI, allowed: set[str], token: str | None) -> None:
    """The middleware that checks every request before any route sees it: browsers can reach
    loopback too (module docstring), so a request must prove it comes from a client of ours."""

    @app.middleware("http")
    async def guard(http: HTTPRequest, call_next: Any) -> Any:
        """Refuse before routing: a foreign Host or Origin (a web page driving the gateway from the
        user's browser, DNS rebinding), a missing token, a POST that is not JSON."""
        if foreign(http.headers.get("host"), http.headers.get("origin"), allowed):
            return _error(403, "this gateway answers only requests to and from " + ", ".join(sorted(allowed)),
                          kind="permission_error")
        if token is not None and http.headers.get("authorization") != f"Bearer {token}":
            return _error(401, "missing or wrong bearer token", kind="authentication_error")
        if http.method == "POST" and http.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _error(415, "send the body as application/json")
        return await call_next(http)


def _unknown_model(stats: _Stats, body: Any, served: str) -> JSONResponse | None:
    """A named model this gateway does not serve is refused, never answered by the default."""
    asked = body.get("model") if isinstance(body, dict) else None
    if asked in (None, "", served):
        return None
    stats.add(errors=1)
    return _error(404, f"The model '{asked}' does not exist; this gateway serves '{served}'", param="model")


def _add_model_routes(app: FastAPI, backbone: Backbone, embedder: Any, stats: _Stats, created: int) -> None:
    """GET /health, /v1/models, /v1/models/{id} and /v1/usage: what a client checks before it asks."""

    def model_card(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": created, "owned_by": "moviemem"}

    def model_ids() -> list[str]:
        return [backbone.name] + ([embedder.name] if embedder is not None else [])

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card(m) for m in model_ids()]}

    @app.get("/v1/models/{model_id:path}")
    def model(model_id: str) -> Any:
        if model_id not in model_ids():
            return _error(404, f"The model '{model_id}' does not exist", param="model")
        return model_card(model_id)

    @app.get("/v1/usage")
    def usage() -> dict[str, int]:
        return stats.snapshot()


def _add_chat_route(app: FastAPI, backbone: Backbone, stats: _Stats, created: int, allow_remote_images: bool) -> None:
    """POST /v1/chat/completions: the backbone's reply in OpenAI's chat format, whole or as a stream."""
    answer = backbone.send

    @app.post("/v1/chat/completions")
    async def chat(http: HTTPRequest) -> Any:
        stats.add(requests=1, chat_requests=1)
        try:
            body = await _read_json(http)
            refused = _unknown_model(stats, body, backbone.name)
            if refused is not None:
                return refused
            _check_content(body, allow_remote_images)
            request, stream, include_usage = _request_from_body(body)
            reply = await run_in_threadpool(answer, request)
        except (MovieMemError, ValueError, TypeError, KeyError, AttributeError) as exc:
            stats.add(errors=1)
            return _error(400, str(exc) or type(exc).__name__)
        stats.add(prompt_tokens=reply.usage.input_tokens, completion_tokens=reply.usage.output_tokens)
        if reply.transient:  # the backbone could not be reached: say so, as an upstream error
            stats.add(errors=1)
            return _error(502, reply.error or "backbone failed", kind="upstream_error")
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        content = reply.text or ("" if reply.tool_calls else (reply.raw or ""))
        calls = [c.to_openai() for c in reply.tool_calls]
        if stream:
            return StreamingResponse(_stream(completion_id, created, backbone.name, content, calls, reply, include_usage),
                                     media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": content or None if calls else content,
                                   "refusal": None}
        if calls:
            message["tool_calls"] = calls
        return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": backbone.name,
                "system_fingerprint": None,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(reply)}],
                "usage": _usage_block(reply)}


def _add_embeddings_route(app: FastAPI, embedder: Any, stats: _Stats) -> None:
    """POST /v1/embeddings: the embedder's vectors, as floats or base64, with OpenAI's usage block."""

    @app.post("/v1/embeddings")
    async def embeddings(http: HTTPRequest) -> Any:
        stats.add(requests=1, embedding_requests=1)
        if embedder is None:
            stats.add(errors=1)
            return _error(404, "this gateway serves no embedder (start it with --embedder)")
        try:
            body = await _read_json(http)
        except (MovieMemError, ValueError) as exc:
            stats.add(errors=1)
            return _error(400, str(exc) or "the body is not JSON")
        try:
            raw = body["input"]
        except (KeyError, TypeError):
            stats.add(errors=1)
            return _error(400, "'input' is required", param="input")
        refused = _unknown_model(stats, body, embedder.name)
        if refused is not None:
            return refused
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            stats.add(errors=1)
            return _error(400, "'input' must be a string or a non-empty list of strings (token arrays are not supported)",
                          param="input")
        if len(texts) > MAX_EMBED_INPUTS:
            stats.add(errors=1)
            return _error(400, f"'input' holds {len(texts)} texts; at most {MAX_EMBED_INPUTS} per request", param="input")
        dims = body.get("dimensions")
        if dims is not None and dims != embedder.dim:
            stats.add(errors=1)
            return _error(400, f"this embedder makes {embedder.dim}-d vectors", param="dimensions")
        vecs = await run_in_threadpool(embedder.embed, texts)
        tokens = _count_tokens(embedder, texts)
        stats.add(embedding_tokens=tokens)
        as_b64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() if as_b64 else v.tolist()}
                for i, v in enumerate(vecs)]
        # vectors of local text, megabytes of numbers with no upstream text in them: not scrubbed
        return JSONResponse({"object": "list", "data": data, "model": embedder.name,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def _stream(completion_id: str, created: int, model: str, content: str, calls: list[dict[str, Any]], reply: Reply,
            include_usage: bool) -> Iterator[str]:
    """The whole reply as OpenAI stream chunks (a backbone answers at once; clients that ask
    for a stream still get the protocol they parse)."""
    def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> str:
        payload = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                   "system_fingerprint": None,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
        if include_usage:
            payload.setdefault("usage", None)
        return f"data: {known_secrets.scrub(json.dumps(payload))}\n\n"

    yield chunk({"role": "assistant", "content": ""}, None)
    if content:
        yield chunk({"content": content}, None)
    if calls:
        yield chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}, None)
    yield chunk({}, _finish(reply))
    if include_usage:
        usage_chunk = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "system_fingerprint": None, "choices": [], "usage": _usage_block(reply)}
        yield f"data: {known_secrets.scrub(json.dumps(usage_chunk))}\n\n"
    yield "data: [DONE]\n\n"


def _resolve(backbone: str | Backbone, embedder: Any, cache: str | Path | bool | None,
             cache_mode: str | None) -> tuple[Backbone, Any]:
    bb = load(backbone, cache=cache, cache_mode=cache_mode)
    if isinstance(embedder, str):
        from ..models.embedder import get_embedder

        embedder = get_embedder(embedder)
    return bb, embedder


class Gateway(BackgroundServer):
    """A gateway running in a background thread: `url`, `base_url` (…/v1), `stats()`, `stop()`."""

    def __init__(self, app: FastAPI, sock: socket.socket) -> None:
        super().__init__(app, sock, what="gateway", grace=SHUTDOWN_GRACE_S)
        self.app = app
        self.url = f"http://{self.host}:{self.port}"
        self.base_url = f"{self.url}/v1"

    def stats(self) -> dict[str, int]:
        snapshot: dict[str, int] = self.app.state.stats.snapshot()
        return snapshot

    def __enter__(self) -> Gateway:
        return self


def start_gateway(backbone: str | Backbone = "local", embedder: Any = None, *, host: str = "127.0.0.1",
                  port: int = 0, cache: str | Path | bool | None = None, cache_mode: str | None = None,
                  token: str | None = None) -> Gateway:
    """Start the gateway in a background thread (port 0 picks a free port) and return it running."""
    bb, emb = _resolve(backbone, embedder, cache, cache_mode)
    return Gateway(create_app(bb, emb, token=token), listen(host, port)).start()


def serve(backbone_spec: str, embedder: str | None = "minilm", host: str = "127.0.0.1", port: int = 8383, *,
          cache: str | Path | bool | None = None, cache_mode: str | None = None, log_level: str = "info",
          token: str | None = None, announce: Callable[[str], None] = lambda line: None) -> None:
    """Run the gateway in the foreground until interrupted (`moviemem serve`); `announce` gets the line
    naming its address (the port the system gave, with port 0)."""
    if host not in LOOPBACK and not token:
        raise MovieMemError(f"--host {host} listens beyond this machine; give a token (--token or "
                            "$MOVIEMEM_GATEWAY_TOKEN) so that only clients holding it are answered")
    bb, emb = _resolve(backbone_spec, embedder, cache, cache_mode)
    allowed = LOOPBACK if host in LOOPBACK or host in ("0.0.0.0", "::") else (*LOOPBACK, host)
    sock = listen(host, port)
    announce(f"moviemem gateway on http://{host}:{sock.getsockname()[1]}/v1 (backbone {bb.name}, "
             f"embedder {getattr(emb, 'name', None)})")
    app = create_app(bb, emb, token=token, allowed_hosts=allowed)
    run(app, sock, lifespan="off", grace=SHUTDOWN_GRACE_S, log_level=log_level)
