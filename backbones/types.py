"""The values backbones trade in: messages, parts, tools, requests, replies, usage.

Messages are small dataclasses (`user("...", images=[...])`) or OpenAI-style dicts; both
are normalised to one internal form so backends, the replay cache and the gateway agree
on what a request is. This module sits at the bottom of the backbones folder: it imports
nothing from it but `media`, so pricing, retries and every backend can share these types.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, Union

import json_repair

from ..foundation.errors import MovieMemError
from . import media

Role = Literal["system", "user", "assistant", "tool"]


# ----------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Image:
    """A still: a file path, raw bytes, or an http(s) URL passed through to the provider."""

    path: Path | None = None
    data: bytes | None = None
    url: str | None = None
    mime: str | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.path is not None:
            try:
                return Path(self.path).read_bytes()
            except OSError as exc:
                raise MovieMemError(f"cannot read image {self.path}: {exc.strerror}") from None
        raise MovieMemError("this image is a URL; it has no local bytes")

    def mime_type(self) -> str:
        if self.mime:
            return self.mime
        if self.path is not None:
            return media.guess_mime(self.path, "image/jpeg")
        return media.sniff_image_mime(self.read()[:16])

    def data_url(self) -> str:
        if self.url:
            return self.url
        return f"data:{self.mime_type()};base64,{base64.b64encode(self.read()).decode()}"

    def fingerprint(self) -> dict[str, Any]:
        if self.url:
            return {"image_url": self.url}
        digest = media.bytes_sha256(self.data) if self.data is not None else media.media_fingerprint(_file_of(self.path, "image"))
        return {"image": digest}


@dataclass(frozen=True)
class Clip:
    """A stretch of a video file (with its audio track) from `start` to `end` seconds."""

    path: Path
    start: float = 0.0
    end: float | None = None

    @property
    def duration(self) -> float:
        end = self.end if self.end is not None else media.media_duration(self.path)
        return max(0.0, end - self.start)

    def mime_type(self) -> str:
        return media.guess_mime(self.path, "video/mp4")

    def fingerprint(self) -> dict[str, Any]:
        return {"video": media.media_fingerprint(self.path), "start": round(self.start, 3),
                "end": None if self.end is None else round(self.end, 3)}


@dataclass(frozen=True)
class Audio:
    """Sound: a file (optionally a stretch of it) or raw bytes with a MIME type."""

    path: Path | None = None
    data: bytes | None = None
    mime: str | None = None
    start: float = 0.0
    end: float | None = None

    def mime_type(self) -> str:
        if self.mime:
            return self.mime
        return media.guess_mime(self.path, "audio/wav") if self.path else "audio/wav"

    @property
    def duration(self) -> float:
        if self.path is None:
            return 0.0
        end = self.end if self.end is not None else media.media_duration(self.path)
        return max(0.0, end - self.start)

    def fingerprint(self) -> dict[str, Any]:
        digest = media.bytes_sha256(self.data) if self.data is not None else media.media_fingerprint(self.file())
        return {"audio": digest, "start": round(self.start, 3), "end": self.end}

    def file(self) -> Path:
        """The sound's file, for an Audio without bytes; one without either is an error, not a None passed on."""
        return _file_of(self.path, "audio")


def _file_of(path: Path | None, kind: str) -> Path:
    """A part's file where it has no bytes (a part holds one or the other)."""
    if path is None:
        raise MovieMemError(f"this {kind} has neither bytes nor a file")
    return path


Part = Union[Text, Image, Clip, Audio]


# ----------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for. `signature` carries a provider's opaque token
    (Gemini's thought signature) that must travel back with the call in later turns."""

    id: str
    name: str
    arguments: dict[str, Any]
    signature: str | None = None

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)}}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    @classmethod
    def from_any(cls, obj: Tool | dict[str, Any]) -> Tool:
        """A Tool, an OpenAI tool dict ({"type": "function", "function": {...}}) or {name, description, parameters}."""
        if isinstance(obj, Tool):
            return obj
        if not isinstance(obj, dict):
            raise MovieMemError(f"a tool must be a dict or Tool, not {type(obj).__name__}")
        fn = obj.get("function", obj)
        if not isinstance(fn, dict) or not fn.get("name"):
            raise MovieMemError("a tool needs a name")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        return cls(name=str(fn["name"]), description=str(fn.get("description") or ""), parameters=params)

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


# ----------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Message:
    role: Role
    parts: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": the call this answers
    name: str | None = None  # role == "tool": the tool's name (Gemini needs it)

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, Text))

    def media(self) -> list[Part]:
        return [p for p in self.parts if not isinstance(p, Text)]


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _image(x: Image | str | Path | bytes) -> Image:
    if isinstance(x, Image):
        return x
    if isinstance(x, bytes):
        return Image(data=x)
    s = str(x)
    if s.startswith(("http://", "https://")):
        return Image(url=s)
    if s.startswith("data:"):
        return _from_data_url(s)
    return Image(path=Path(s))


def _audio(x: Audio | str | Path | bytes) -> Audio:
    if isinstance(x, Audio):
        return x
    if isinstance(x, bytes):
        return Audio(data=x)
    return Audio(path=Path(x))


def system(text: str) -> Message:
    return Message("system", (Text(text),))


def user(text: str = "", *, images: Iterable[Image | str | Path | bytes] = (),
         video: Clip | Sequence[Clip] | None = None, audio: Audio | str | Path | bytes | None = None) -> Message:
    """A user turn; media come first so a long shared text prefix is not interrupted by them."""
    parts: list[Part] = [_image(i) for i in images]
    parts += _as_list(video)
    parts += [_audio(a) for a in _as_list(audio)]
    if text:
        parts.append(Text(text))
    return Message("user", tuple(parts))


def assistant(text: str = "", tool_calls: Iterable[ToolCall | dict[str, Any]] = ()) -> Message:
    calls = tuple(c if isinstance(c, ToolCall) else _tool_call(c, i) for i, c in enumerate(tool_calls))
    return Message("assistant", (Text(text),) if text else (), calls)


def tool_result(call_id: str, content: str | dict[str, Any] | list[Any], name: str | None = None) -> Message:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return Message("tool", (Text(text),), tool_call_id=call_id, name=name)


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """Tool-call arguments as a dict; None when they cannot be read as a JSON object."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            value = json_repair.loads(raw)
        return value if isinstance(value, dict) else None
    return None


def _tool_call(d: dict[str, Any], index: int) -> ToolCall:
    fn = d.get("function", d)
    args = parse_arguments(fn.get("arguments", fn.get("args")))
    return ToolCall(id=str(d.get("id") or f"call_{index}"), name=str(fn.get("name", "")), arguments=args or {},
                    signature=d.get("signature"))


def _from_data_url(url: str) -> Image:
    head, _, payload = url.partition(",")
    mime = head[5:].split(";")[0] or None
    try:
        data = base64.b64decode(payload, validate=False)
    except (ValueError, binascii.Error):
        raise MovieMemError("an image data URL is not valid base64") from None
    return Image(data=data, mime=mime)


def _dict_part(p: Any) -> Part:
    if isinstance(p, (Text, Image, Clip, Audio)):
        return p
    if isinstance(p, str):
        return Text(p)
    if not isinstance(p, dict):
        raise MovieMemError(f"unsupported message part {type(p).__name__}")
    kind = p.get("type")
    if kind in ("text", "input_text"):
        return Text(str(p.get("text", "")))
    if kind == "image_url":
        url = p["image_url"]["url"] if isinstance(p.get("image_url"), dict) else p.get("image_url")
        return _image(str(url))
    if kind == "image":
        return _image(p.get("path") or p.get("url") or base64.b64decode(p["data"]))
    if kind == "input_audio":
        a = p["input_audio"]
        return Audio(data=base64.b64decode(a["data"]), mime=f"audio/{a.get('format', 'wav')}")
    if kind in ("video", "video_clip"):
        return Clip(Path(p["path"]), float(p.get("start") or 0.0), None if p.get("end") is None else float(p["end"]))
    if kind == "audio":
        return Audio(path=Path(p["path"]), start=float(p.get("start") or 0.0),
                     end=None if p.get("end") is None else float(p["end"]))
    raise MovieMemError(f"unsupported message part type {kind!r}")


def _from_dict(d: dict[str, Any]) -> Message:
    role = d.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise MovieMemError(f"unsupported message role {role!r}")
    content = d.get("content")
    if content is None:
        parts: tuple[Part, ...] = ()
    elif isinstance(content, str):
        parts = (Text(content),) if content or role != "assistant" else ()
    else:
        parts = tuple(_dict_part(p) for p in content)
    calls = tuple(_tool_call(c, i) for i, c in enumerate(d.get("tool_calls") or []))
    return Message(role, parts, calls, tool_call_id=d.get("tool_call_id"), name=d.get("name"))


MessageLike = Union[Message, dict[str, Any]]


def normalise_messages(messages: Iterable[MessageLike] | str) -> tuple[Message, ...]:
    """Messages in one internal form; a bare string is one user turn."""
    if isinstance(messages, str):
        return (user(messages),)
    out = tuple(m if isinstance(m, Message) else _from_dict(m) for m in messages)
    if not out:
        raise MovieMemError("a chat needs at least one message")
    # name tool results after the call they answer, so backends that key results by name can
    names = {c.id: c.name for m in out for c in m.tool_calls}
    return tuple(replace(m, name=names.get(m.tool_call_id or "", m.name)) if m.role == "tool" and not m.name else m
                 for m in out)


# ----------------------------------------------------------------------------- capabilities, usage, reply


@dataclass(frozen=True)
class Capabilities:
    text: bool = True
    images: bool = False
    video: bool = False
    audio: bool = False
    tools: bool = False
    json: bool = False
    logprobs: bool = False  # can return the log-probabilities of the next token's top alternatives

    @classmethod
    def all(cls) -> Capabilities:
        return cls(True, True, True, True, True, True, True)

    def with_overrides(self, overrides: dict[str, bool] | None) -> Capabilities:
        if not overrides:
            return self
        unknown = set(overrides) - {f.name for f in fields(self)}
        if unknown:
            raise MovieMemError(f"unknown capability {sorted(unknown)[0]!r}")
        return replace(self, **{k: bool(v) for k, v in overrides.items()})

    def to_dict(self) -> dict[str, bool]:
        return asdict(self)


@dataclass
class Usage:
    """What one call (or a sum of calls) consumed. cost_usd is None when no price is known;
    a sum carries the cost of the priced calls and is None only if none was priced.

    Input tokens are counted three ways: `input_tokens` the prompt (what a price table bills, its cached part at
    the cached rate), `cached_input_tokens` the part the model did not read (a provider's cache, a local model's
    prompt cache), `restored_input_tokens` the part of that restored from a state saved on disk by an earlier
    process (backbones/prefix_states.py); `read_input_tokens` is what the model really read."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    restored_input_tokens: int = 0
    images: int = 0
    video_s: float = 0.0
    audio_s: float = 0.0
    latency_s: float = 0.0
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens, output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            restored_input_tokens=self.restored_input_tokens + other.restored_input_tokens,
            images=self.images + other.images, video_s=self.video_s + other.video_s, audio_s=self.audio_s + other.audio_s,
            latency_s=self.latency_s + other.latency_s, cost_usd=sum(costs) if costs else None,
        )

    def __radd__(self, other: Any) -> Usage:  # sum(usages) starts from 0
        return self if other == 0 else self.__add__(other)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def read_input_tokens(self) -> int:
        """Prompt tokens the model read itself: neither cached nor restored."""
        return max(0, self.input_tokens - self.cached_input_tokens)

    @property
    def billed_tokens(self) -> int:
        """Tokens a price table charges for: the whole prompt (its cached part at the cached rate) and the reply."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


CONTEXT = "context"  # Reply.finish_reason of a prompt longer than the backbone's context: nothing was read


@dataclass
class Reply:
    """A model's answer. `invalid` replies keep what came back (`raw`) and say why (`error`);
    they are never replaced by a guess. `transient` marks failures that say nothing about the
    model (network, rate limits, rejected requests): a later run may succeed, so the replay
    cache does not store them, and they carry no cost."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    invalid: bool = False
    error: str | None = None
    raw: str | None = None
    finish_reason: str | None = None
    data: Any = None  # the parsed JSON when a json_schema was requested
    model: str = ""
    cached: bool = False
    transient: bool = False
    logprobs: list[dict[str, float]] | None = None  # per output token: top alternatives -> log-probability

    @classmethod
    def failed(cls, error: str, *, raw: str | None = None, transient: bool = False, **kw: Any) -> Reply:
        return cls(invalid=True, error=error, raw=raw, transient=transient, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tool_calls"] = [asdict(c) for c in self.tool_calls]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Reply:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["tool_calls"] = [ToolCall(**c) for c in d.get("tool_calls") or []]
        kw["usage"] = Usage.from_dict(d.get("usage") or {})
        return cls(**kw)


# ----------------------------------------------------------------------------- request


MAX_OUTPUT_TOKENS = 131072  # the most any served model writes in one reply
MAX_TEMPERATURE = 2.0  # the OpenAI and Gemini range


@dataclass(frozen=True)
class Request:
    """One normalised chat call; the replay cache keys on `fingerprint()`."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    json_schema: dict[str, Any] | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    tool_choice: str | None = None
    timeout: float | None = None
    seed: int | None = None  # a sampling seed: several samples of one prompt at temperature > 0 stay distinct in the cache
    logprobs: int = 0  # return this many top alternatives (with log-probabilities) for each output token
    # characters of the last message's text that, with every message before it, open other calls too (a film's
    # transcript before the question): a local model reads them as a unit of its own and keeps that unit's state,
    # so what it reads after them is the same whether the unit was read now, held in memory or restored from disk.
    # Not in the fingerprint: it says how to read the text, not what the text is (as the reuse of a prefix never was)
    shared_prefix: int = 0

    @classmethod
    def build(cls, messages: Iterable[MessageLike] | str, *, tools: Iterable[Tool | dict[str, Any]] | None = None,
              json_schema: dict[str, Any] | None = None, max_tokens: int = 512, temperature: float = 0.0,
              tool_choice: str | None = None, timeout: float | None = None, seed: int | None = None,
              logprobs: int = 0, shared_prefix: int = 0) -> Request:
        if not 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
            raise MovieMemError(f"max_tokens must be between 1 and {MAX_OUTPUT_TOKENS}, not {max_tokens}")
        if not 0.0 <= float(temperature) <= MAX_TEMPERATURE:  # NaN fails too
            raise MovieMemError(f"temperature must be between 0 and {MAX_TEMPERATURE:g}, not {temperature}")
        tool_list = tuple(Tool.from_any(t) for t in tools or ())
        if tool_choice not in (None, "auto", "none", "required") and tool_choice not in {t.name for t in tool_list}:
            raise MovieMemError(f"tool_choice {tool_choice!r} names no given tool")
        if not 0 <= int(logprobs) <= 20:
            raise MovieMemError("logprobs must be between 0 and 20")
        normalised = normalise_messages(messages)
        if shared_prefix and not (normalised and 0 < int(shared_prefix) <= len(normalised[-1].text)):
            raise MovieMemError(f"shared_prefix {shared_prefix} is not within the last message's text")
        return cls(normalised, tool_list, json_schema, int(max_tokens), float(temperature),
                   None if tool_choice == "auto" else tool_choice, timeout, None if seed is None else int(seed),
                   int(logprobs), int(shared_prefix))

    def needs(self) -> set[str]:
        """Capabilities this request uses."""
        kinds = {type(p) for m in self.messages for p in m.parts}
        need = {"text"}
        if Image in kinds:
            need.add("images")
        if Clip in kinds:
            need.add("video")
        if Audio in kinds:
            need.add("audio")
        if self.tools and self.tool_choice != "none":
            need.add("tools")
        if self.logprobs:
            need.add("logprobs")
        return need

    def fingerprint(self) -> dict[str, Any]:
        """Everything that can change the answer, and nothing else: no timeout, no call ids
        (a replayed conversation has the same calls under fresh ids), no credentials."""
        def part(p: Part) -> Any:
            return p.text if isinstance(p, Text) else p.fingerprint()

        msgs = [{"role": m.role, "parts": [part(p) for p in m.parts],
                 "calls": [[c.name, c.arguments] for c in m.tool_calls], "name": m.name} for m in self.messages]
        out = {"messages": msgs, "tools": [asdict(t) for t in self.tools], "json_schema": self.json_schema,
               "max_tokens": self.max_tokens, "temperature": self.temperature, "tool_choice": self.tool_choice}
        if self.seed is not None:  # only when set, so keys of unseeded requests never change
            out["seed"] = self.seed
        if self.logprobs:
            out["logprobs"] = self.logprobs
        return out

    def prefix_text(self) -> str:
        """The request as one string, for ordering requests so shared prefixes are adjacent."""
        return "\x00".join(f"{m.role}\x01{m.text}" for m in self.messages)

    def media_usage(self) -> tuple[int, float, float]:
        images = sum(isinstance(p, Image) for m in self.messages for p in m.parts)
        video = sum(p.duration for m in self.messages for p in m.parts if isinstance(p, Clip))
        audio = sum(p.duration for m in self.messages for p in m.parts if isinstance(p, Audio))
        return images, video, audio


