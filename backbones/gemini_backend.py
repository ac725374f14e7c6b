"""Gemini through google-genai: text, images, video with its audio, audio, tools, JSON.

Video goes inline when small (the whole file with start/end offsets, or an exact cut of a
short clip); otherwise the whole file is uploaded once with the Files API and every clip
of it is a reference with offsets. Uploads are remembered (SQLite, by content hash and
endpoint) and reused until they expire, so a film is uploaded once, not once per question.

One genai client per backbone: a discarded client closes its connection, and a fresh
one per call would pay a TLS handshake every time. The key is read from the environment
at call time; a changed key gets a new client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..foundation import secrets as known_secrets
from ..foundation.errors import MovieMemError
from . import media
from .base import ProviderBackbone
from .settings import get_backbone_settings
from .types import Audio, Capabilities, Clip, Image, Message, Reply, Request, Text, ToolCall, Usage

SKIP_SIGNATURE = b"skip_thought_signature_validator"  # Google's documented stand-in for a lost signature
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "MALFORMED_FUNCTION_CALL": "malformed_function_call"}


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def _offset(seconds: float) -> str:
    return f"{seconds:.3f}s"


class _Uploads:
    """Files API uploads by content hash, shared by processes through SQLite."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS uploads (key TEXT PRIMARY KEY, name TEXT, uri TEXT, mime TEXT,"
                       " expires REAL)")

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA busy_timeout=60000")
        return db

    def get(self, key: str) -> tuple[str, str, str] | None:
        with self._lock, self._db() as db:
            row = db.execute("SELECT name, uri, mime, expires FROM uploads WHERE key = ?", (key,)).fetchone()
        if row is None or (row[3] and row[3] < time.time() + 3600):  # keep an hour of margin
            return None
        return row[0], row[1], row[2]

    def put(self, key: str, name: str, uri: str, mime: str, expires: float) -> None:
        with self._lock, self._db() as db:
            db.execute("INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?)", (key, name, uri, mime, expires))

    def drop(self, key: str) -> None:
        with self._lock, self._db() as db:
            db.execute("DELETE FROM uploads WHERE key = ?", (key,))


class GeminiBackbone(ProviderBackbone):
    """`gemini:MODEL`. Key from GEMINI_API_KEY or GOOGLE_API_KEY; Vertex AI when
    GOOGLE_GENAI_USE_VERTEXAI is set (project and location from GOOGLE_CLOUD_PROJECT /
    GOOGLE_CLOUD_LOCATION, or the options). Options: base_url, vertexai, project, location,
    thinking_budget, thinking_level, capabilities, and ProviderBackbone's reliability options.
    """

    def __init__(self, model: str, *, name: str | None = None, base_url: str | None = None,
                 vertexai: bool | None = None, project: str | None = None, location: str | None = None,
                 thinking_budget: int | None = None, thinking_level: str | None = None,
                 capabilities: dict[str, bool] | None = None, **options: Any) -> None:
        super().__init__(**options)
        if not model:
            raise MovieMemError("a Gemini backbone needs a model name, e.g. gemini:gemini-3-flash")
        self.model = model.removeprefix("models/")
        self.base_url = base_url
        known_secrets.register_url(base_url)  # a base URL's user:password too, should one be given
        self.vertexai = _truthy(os.environ.get("GOOGLE_GENAI_USE_VERTEXAI")) if vertexai is None else vertexai
        self.project = project
        self.location = location
        self.thinking: dict[str, Any] = {k: v for k, v in {"thinking_budget": thinking_budget, "thinking_level": thinking_level}.items()
                         if v is not None}
        self.name = name or f"gemini:{self.model}"
        ident = f"gemini:{self.model}"
        if self.thinking:
            ident += "?" + "&".join(f"{k}={v}" for k, v in sorted(self.thinking.items()))
        self.model_id = ident
        self.price_key = self.model
        self.capabilities = Capabilities.all().with_overrides({"logprobs": False, **(capabilities or {})})
        self._client: Any = None
        self._client_key: str | None = None
        self._client_lock = threading.Lock()
        self._verified: set[str] = set()
        settings = get_backbone_settings()
        self._uploads = _Uploads(settings.scratch_dir / "gemini_uploads.sqlite")
        self._scratch = settings.scratch_dir
        self._inline_max = settings.gemini_inline_max_bytes
        self._inline_clip_max_s = settings.gemini_inline_clip_max_s

    # -- client

    def _key(self) -> str | None:
        key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        known_secrets.register(key)  # output is scrubbed of the key sent, whatever echoes it
        return key

    def secrets(self) -> list[str]:
        key = self._key()
        return [key] if key else []

    def client(self) -> Any:
        from google import genai
        from google.genai import types

        key = None if self.vertexai else self._key()
        if not self.vertexai and not key:
            raise MovieMemError(f"{self.name}: set GEMINI_API_KEY (or GOOGLE_API_KEY), or configure Vertex AI "
                                "with GOOGLE_GENAI_USE_VERTEXAI=true and GOOGLE_CLOUD_PROJECT")
        with self._client_lock:
            if self._client is None or self._client_key != key:
                http = types.HttpOptions(base_url=self.base_url) if self.base_url else None
                if self.vertexai:
                    self._client = genai.Client(
                        vertexai=True, http_options=http,
                        project=self.project or os.environ.get("GOOGLE_CLOUD_PROJECT"),
                        location=self.location or os.environ.get("GOOGLE_CLOUD_LOCATION", "global"))
                else:
                    self._client = genai.Client(api_key=key, http_options=http)
                self._client_key = key
            return self._client

    # -- media

    def _bytes_part(self, data: bytes, mime: str) -> Any:
        from google.genai import types

        return types.Part(inline_data=types.Blob(data=data, mime_type=mime))

    def _upload(self, path: Path, mime: str, timeout: float) -> tuple[str, str]:
        """(uri, mime) of `path` in the Files API, uploading only when no live upload exists."""
        from google.genai import types

        key = hashlib.sha256(f"{media.media_fingerprint(path)}|{self.base_url or 'default'}".encode()).hexdigest()
        known = self._uploads.get(key)
        client = self.client()
        if known is not None:
            name, uri, known_mime = known
            if name in self._verified:
                return uri, known_mime
            try:
                f = client.files.get(name=name)
                if str(getattr(f.state, "value", f.state)) == "ACTIVE":
                    self._verified.add(name)
                    return uri, known_mime
            except Exception:  # noqa: BLE001 - gone, expired or another project's: upload again
                pass
            self._uploads.drop(key)
        # a film takes far longer to upload than a question takes to answer
        f = client.files.upload(file=str(path), config=types.UploadFileConfig(
            mime_type=mime, display_name=path.name, http_options=types.HttpOptions(timeout=int(max(timeout, 1800) * 1000))))
        deadline, pause = time.monotonic() + max(timeout, 600), 0.1
        while str(getattr(f.state, "value", f.state)) == "PROCESSING":
            if time.monotonic() > deadline:
                raise RuntimeError(f"upload of {path.name} still processing after {max(timeout, 600):.0f}s")
            time.sleep(pause)
            pause = min(pause * 2, 5.0)
            f = client.files.get(name=f.name)
        if str(getattr(f.state, "value", f.state)) == "FAILED":
            raise RuntimeError(f"Gemini could not process the upload of {path.name}")
        expires = f.expiration_time.timestamp() if f.expiration_time else time.time() + 47 * 3600
        self._uploads.put(key, f.name, f.uri, f.mime_type or mime, expires)
        self._verified.add(f.name)
        return f.uri, f.mime_type or mime

    def _video_part(self, clip: Clip, timeout: float) -> Any:
        from google.genai import types

        path = Path(clip.path)
        mime = clip.mime_type()
        whole = clip.start == 0 and clip.end is None
        offsets = None if whole else types.VideoMetadata(
            start_offset=_offset(clip.start), end_offset=None if clip.end is None else _offset(clip.end))
        size = path.stat().st_size
        if size <= self._inline_max:
            return types.Part(inline_data=types.Blob(data=path.read_bytes(), mime_type=mime), video_metadata=offsets)
        if not whole and clip.duration <= self._inline_clip_max_s:
            cut = media.cut(path, clip.start, clip.end, kind="video", scratch=self._scratch)
            if cut.stat().st_size <= self._inline_max:
                return self._bytes_part(cut.read_bytes(), "video/mp4")
        if self.vertexai:
            raise MovieMemError(f"{path.name}: clip too large to send inline to Vertex AI; use a shorter clip")
        uri, mime = self._upload(path, mime, timeout)
        return types.Part(file_data=types.FileData(file_uri=uri, mime_type=mime), video_metadata=offsets)

    def _audio_part(self, a: Audio, timeout: float) -> Any:
        from google.genai import types

        if a.data is not None:
            return self._bytes_part(a.data, a.mime_type())
        path = Path(a.file())
        mime = a.mime_type()
        if a.start or a.end is not None:
            path, mime = media.cut(path, a.start, a.end, kind="audio", scratch=self._scratch), "audio/mpeg"
        if path.stat().st_size <= self._inline_max or self.vertexai:
            return self._bytes_part(path.read_bytes(), mime)
        uri, mime = self._upload(path, mime, timeout)
        return types.Part(file_data=types.FileData(file_uri=uri, mime_type=mime))

    def _part(self, p: Any, timeout: float) -> Any:
        from google.genai import types

        if isinstance(p, Text):
            return types.Part(text=p.text)
        if isinstance(p, Image):
            if p.url:
                return types.Part(file_data=types.FileData(file_uri=p.url, mime_type=p.mime or "image/jpeg"))
            return self._bytes_part(p.read(), p.mime_type())
        if isinstance(p, Clip):
            return self._video_part(p, timeout)
        if isinstance(p, Audio):
            return self._audio_part(p, timeout)
        raise MovieMemError(f"unsupported part {type(p).__name__}")

    # -- request

    def _contents(self, messages: tuple[Message, ...], timeout: float) -> tuple[str | None, list[Any]]:
        from google.genai import types

        system_parts = [m.text for m in messages if m.role == "system"]
        contents: list[Any] = []
        for m in messages:
            if m.role == "system":
                continue
            if m.role == "tool":
                try:
                    result: Any = json.loads(m.text)
                except ValueError:
                    result = m.text
                part = types.Part(function_response=types.FunctionResponse(
                    name=m.name or "tool", id=m.tool_call_id, response={"result": result}))
                if contents and contents[-1].role == "user" and contents[-1].parts[-1].function_response:
                    contents[-1].parts.append(part)  # parallel results answer in one turn
                else:
                    contents.append(types.Content(role="user", parts=[part]))
                continue
            parts = [self._part(p, timeout) for p in m.parts]
            for c in m.tool_calls:
                signature = base64.b64decode(c.signature) if c.signature else (
                    SKIP_SIGNATURE if self.model.startswith("gemini-3") else None)
                parts.append(types.Part(function_call=types.FunctionCall(name=c.name, args=c.arguments, id=c.id),
                                        thought_signature=signature))
            if parts:  # Gemini rejects empty turns
                contents.append(types.Content(role="model" if m.role == "assistant" else "user", parts=parts))
        return ("\n\n".join(system_parts) or None), contents

    def _config(self, request: Request, system_text: str | None, timeout: float) -> Any:
        from google.genai import types

        cfg: dict[str, Any] = {
            "temperature": request.temperature, "max_output_tokens": request.max_tokens,
            "system_instruction": system_text, "http_options": types.HttpOptions(timeout=int(timeout * 1000)),
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if request.seed is not None:
            cfg["seed"] = request.seed
        if self.thinking:
            cfg["thinking_config"] = types.ThinkingConfig(**self.thinking)
        if request.json_schema is not None:
            cfg["response_mime_type"] = "application/json"
            if request.json_schema:
                cfg["response_json_schema"] = request.json_schema
        if request.tools:
            cfg["tools"] = [types.Tool(function_declarations=[
                types.FunctionDeclaration(name=t.name, description=t.description, parameters_json_schema=t.parameters)
                for t in request.tools])]
            mode = {"none": "NONE", "required": "ANY", None: "AUTO"}.get(request.tool_choice, "ANY")
            named = [request.tool_choice] if mode == "ANY" and request.tool_choice is not None and request.tool_choice != "required" else None
            cfg["tool_config"] = types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode(mode), allowed_function_names=named))
        return types.GenerateContentConfig(**cfg)

    # -- call

    def _send(self, request: Request, timeout: float) -> Reply:
        from google.genai import errors

        system_text, contents = self._contents(request.messages, timeout)
        config = self._config(request, system_text, timeout)
        try:
            resp = self.client().models.generate_content(model=self.model, contents=contents, config=config)
        except (errors.UnknownApiResponseError, json.JSONDecodeError) as exc:
            raw = exc.doc if isinstance(exc, json.JSONDecodeError) else str(exc)
            return Reply.failed("transport fault: malformed response body", raw=raw[:20000], transient=True)
        return self._reply(resp)

    def _reply(self, resp: Any) -> Reply:
        meta = resp.usage_metadata
        usage = Usage()
        if meta is not None:
            usage = Usage(input_tokens=meta.prompt_token_count or 0,
                          output_tokens=(meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0),
                          cached_input_tokens=meta.cached_content_token_count or 0)
        if not resp.candidates:
            block = getattr(resp.prompt_feedback, "block_reason", None) if resp.prompt_feedback else None
            if block:  # the provider's decision about this prompt: an answer of sorts, kept
                return Reply.failed(f"no answer (blocked: {getattr(block, 'value', block)})", usage=usage)
            return Reply.failed("transport fault: no candidates", usage=usage, transient=True)
        cand = resp.candidates[0]
        reason = str(getattr(cand.finish_reason, "value", cand.finish_reason) or "")
        texts, calls = [], []
        for i, part in enumerate((cand.content.parts if cand.content else None) or []):
            if part.function_call is not None:
                fc = part.function_call
                args = dict(fc.args or {})
                call_id = fc.id or "call_" + hashlib.sha256(
                    json.dumps([i, fc.name, args], sort_keys=True, default=str).encode()).hexdigest()[:16]
                sig = base64.b64encode(part.thought_signature).decode() if part.thought_signature else None
                calls.append(ToolCall(id=call_id, name=fc.name or "", arguments=args, signature=sig))
            elif part.text and not part.thought:
                texts.append(part.text)
        text = "".join(texts)
        finish = "tool_calls" if calls else _FINISH[reason] if reason in _FINISH else (reason.lower() or None)
        reply = Reply(text=text, tool_calls=calls, usage=usage, finish_reason=finish, raw=text or None)
        if not text and not calls and reason not in ("STOP", "MAX_TOKENS", ""):
            reply.invalid, reply.error = True, f"no answer (finish reason {reason})"
        return reply


def from_spec(kind: str, arg: str | None, **options: Any) -> GeminiBackbone:
    if not arg:
        raise MovieMemError("use gemini:MODEL, e.g. gemini:gemini-3-flash")
    return GeminiBackbone(arg, **options)
