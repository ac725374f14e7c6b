"""Loopback fake servers speaking the OpenAI and Gemini REST protocols.

Tests point the real SDKs at them, so the HTTP paths (headers, bodies, status codes,
Retry-After, timeouts, malformed bodies) run for real without a network or a key.
Responses are scripted with `push(...)`; every request is recorded in `requests`.
Standard library only; bound to 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeResponse:
    status: int = 200
    body: Any = None  # dict/list (sent as JSON), str or bytes (sent as is)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    drop: bool = False  # close the connection without answering (a reset)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default stderr log
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        resp = self.server.owner._record_and_route(rec)
        if resp.delay:
            time.sleep(resp.delay)
        if resp.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload = resp.body
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload).encode()
        elif isinstance(payload, str):
            payload = payload.encode()
        elif payload is None:
            payload = b""
        try:
            self.send_response(resp.status)
            headers = {"content-type": "application/json", **{k.lower(): v for k, v in resp.headers.items()}}
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer

    do_GET = do_POST = do_DELETE = _handle  # noqa: N815 - http.server's handler method names


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class FakeServer:
    """Base: a threaded HTTP server on 127.0.0.1 with a queue of scripted responses."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def push(self, *responses: FakeResponse | dict[str, Any]) -> None:
        """Queue answers for the model endpoint, used in order before the default answer."""
        with self._lock:
            for r in responses:
                self._queue.append(r if isinstance(r, FakeResponse) else FakeResponse(body=r))

    def calls(self, fragment: str) -> list[Recorded]:
        return [r for r in self.requests if fragment in r.path]

    def _record_and_route(self, rec: Recorded) -> FakeResponse:
        with self._lock:
            self.requests.append(rec)
        return self.route(rec)

    def _next(self, rec: Recorded, default: Callable[[Recorded], dict[str, Any]]) -> FakeResponse:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return FakeResponse(body=default(rec))

    def route(self, rec: Recorded) -> FakeResponse:
        raise NotImplementedError


class FakeOpenAI(FakeServer):
    """POST …/chat/completions; by default echoes the last user text. `base_url` ends in /v1."""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @staticmethod
    def completion(text: str | None = None, tool_calls: list[tuple[str, Any]] | None = None, *,
                   prompt_tokens: int = 11, completion_tokens: int = 7, finish_reason: str | None = None,
                   model: str = "fake-model") -> dict[str, Any]:
        calls = [{"id": f"call_{i}", "type": "function",
                  "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                 for i, (n, a) in enumerate(tool_calls or [])]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": finish_reason or ("tool_calls" if calls else "stop")}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def route(self, rec: Recorded) -> FakeResponse:
        if rec.path.rstrip("/").endswith("/chat/completions") and rec.method == "POST":
            return self._next(rec, self._echo)
        return FakeResponse(404, {"error": {"message": f"no route {rec.path}"}})

    def _echo(self, rec: Recorded) -> dict[str, Any]:
        last = next((m for m in reversed(rec.json["messages"]) if m["role"] == "user"), {"content": ""})
        content = last["content"]
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
        return self.completion(str(content))


class EchoAuthOpenAI(FakeOpenAI):
    """An OpenAI-compatible upstream that echoes the credentials it was sent (the Authorization header
    as received, then the user:password of a Basic header decoded, or a Bearer token alone) through one
    field of its reply at a time, as a careless or hostile server might. `field` (a list cycles, one per
    request): "text" (the message text and finish_reason), "empty" (no text; the finish_reason carries
    the echo), "tool_name" and "tool_arguments" (a tool call's name or arguments), or an HTTP status
    (401, 400, 500) whose error body carries it at `offset` characters into its message."""

    TOOL = "archival_memory_search"  # the archival policy's tool: the echo in its arguments reaches the loop

    def __init__(self, field: str | int | list[str | int] = "text", offset: int = 290) -> None:
        super().__init__()
        self._field: str | int | list[str | int] = field
        self.offset = offset
        self._turn = 0

    @property
    def field(self) -> str | int | list[str | int]:
        return self._field

    @field.setter
    def field(self, value: str | int | list[str | int]) -> None:
        """A new script starts at its first field."""
        with self._lock:
            self._field, self._turn = value, 0

    @staticmethod
    def echo(rec: Recorded) -> str:
        auth = rec.headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        decoded = base64.b64decode(value + "==").decode("utf-8", "replace") if scheme.lower() == "basic" else value
        return f"{auth} {decoded}"

    def route(self, rec: Recorded) -> FakeResponse:
        if not (rec.path.rstrip("/").endswith("/chat/completions") and rec.method == "POST"):
            return super().route(rec)
        with self._lock:
            fields = self.field if isinstance(self.field, list) else [self.field]
            field = fields[self._turn % len(fields)]
            self._turn += 1
        secret = self.echo(rec)
        if isinstance(field, int):
            message = "x" * self.offset + secret + " was sent"
            return FakeResponse(field, {"error": {"message": message, "type": secret, "param": None, "code": secret}})
        if field == "text":
            return FakeResponse(body=self.completion(f"The keeper. {secret}", finish_reason=secret))
        if field == "empty":
            return FakeResponse(body=self.completion("", finish_reason=secret))
        if field == "tool_name":
            return FakeResponse(body=self.completion(None, [(secret, {"query": "keeper"})], finish_reason=secret))
        if field == "tool_arguments":
            return FakeResponse(body=self.completion(None, [(self.TOOL, {"query": secret, secret: 1})]))
        raise ValueError(f"no such field {field!r}")


class FakeGemini(FakeServer):
    """generateContent, and the Files API (resumable upload, get); `uploads` counts finished uploads."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, dict[str, Any]] = {}
        self.uploads = 0

    @staticmethod
    def content(text: str | None = None, function_calls: list[tuple[str, dict[str, Any]]] | None = None, *,
                prompt_tokens: int = 13, output_tokens: int = 5, thoughts_tokens: int = 0,
                finish_reason: str = "STOP", signature: str | None = None) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append({"text": text})
        for name, args in function_calls or []:
            part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
        usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
                 "totalTokenCount": prompt_tokens + output_tokens + thoughts_tokens}
        if thoughts_tokens:
            usage["thoughtsTokenCount"] = thoughts_tokens
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish_reason,
                                "index": 0}],
                "usageMetadata": usage, "modelVersion": "fake-gemini"}

    def route(self, rec: Recorded) -> FakeResponse:
        path = rec.path.split("?")[0]
        if rec.method == "POST" and path.endswith(":generateContent"):
            return self._next(rec, self._echo)
        if rec.method == "POST" and path.startswith("/upload/") and rec.headers.get("x-goog-upload-command") == "start":
            sid = f"s{len(self.files) + 1}"
            meta = rec.json or {}
            self.files[sid] = {"name": f"files/{sid}", "mimeType": meta.get("file", {}).get("mimeType") or
                               rec.headers.get("x-goog-upload-header-content-type", "application/octet-stream"),
                               "state": "PROCESSING", "data": b""}
            return FakeResponse(body={}, headers={"x-goog-upload-url": f"{self.url}/upload/session/{sid}",
                                                  "x-goog-upload-status": "active"})
        if rec.method == "POST" and path.startswith("/upload/session/"):
            sid = path.rsplit("/", 1)[-1]
            f = self.files[sid]
            f["data"] += rec.body
            if "finalize" in rec.headers.get("x-goog-upload-command", ""):
                self.uploads += 1
                return FakeResponse(body={"file": self._file_json(sid)}, headers={"x-goog-upload-status": "final"})
            return FakeResponse(body={}, headers={"x-goog-upload-status": "active"})
        if rec.method == "GET" and "/files/" in path:
            sid = path.rsplit("/", 1)[-1]
            if sid not in self.files:
                return FakeResponse(404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}})
            self.files[sid]["state"] = "ACTIVE"  # processing finishes by the first poll
            return FakeResponse(body=self._file_json(sid))
        return FakeResponse(404, {"error": {"code": 404, "message": f"no route {rec.path}", "status": "NOT_FOUND"}})

    def _file_json(self, sid: str) -> dict[str, Any]:
        f = self.files[sid]
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 47 * 3600))
        return {"name": f["name"], "uri": f"{self.url}/v1beta/{f['name']}", "mimeType": f["mimeType"],
                "sizeBytes": str(len(f["data"])), "state": f["state"], "expirationTime": expires}

    def _echo(self, rec: Recorded) -> dict[str, Any]:
        texts = [p.get("text", "") for c in rec.json.get("contents", []) if c.get("role") == "user"
                 for p in c.get("parts", []) if "text" in p]
        return self.content(texts[-1] if texts else "")
