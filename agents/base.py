"""Questions, answers, trace steps, the Policy protocol and the policy registry.

A policy turns (film, question, backbone) into an Answer that carries the evidence it showed
the model and a trace of every step (retrieval queries, prompts by id and version, tool calls,
replies), so an answer can be inspected and a run compared across policies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from ..backbones import Backbone, Reply, Usage
from ..errors import MovieMemError
from ..memory.view import FilmMemory
from ..retrievers.base import Evidence

Kind = Literal["mcq", "claim", "open"]
LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class Question:
    """mcq: text + options (2-10); claim: a statement judged TRUE/FALSE; open: free answer."""

    text: str
    options: tuple[str, ...] = ()
    kind: Kind = "mcq"

    def __post_init__(self) -> None:
        if not self.text or not self.text.strip():
            raise MovieMemError("the question is empty")
        if self.kind not in ("mcq", "claim", "open"):
            raise MovieMemError(f"unknown question kind {self.kind!r}; use mcq, claim or open")
        if self.kind == "mcq" and not 2 <= len(self.options) <= len(LETTERS):
            raise MovieMemError(f"a multiple-choice question needs 2 to {len(LETTERS)} options, not {len(self.options)}")
        if self.kind != "mcq" and self.options:
            raise MovieMemError(f"a {self.kind} question takes no options")

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    @classmethod
    def make(cls, text: str, options: list[str] | tuple[str, ...] | None = None, kind: str | None = None) -> Question:
        """Kind defaults to mcq with options and open without."""
        opts = tuple(str(o) for o in options or ())
        return cls(text, opts, (kind or ("mcq" if opts else "open")))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "options": list(self.options), "kind": self.kind}


@dataclass
class Step:
    """One thing a policy did: kind is retrieve | prompt | reply | tool | note."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    t: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}


@dataclass
class Answer:
    """choice: a letter (mcq), TRUE/FALSE (claim) or None (open, or invalid); text: the answer
    in words (the option text, or the free answer); confidence in [0, 1] or None."""

    choice: str | None
    text: str
    confidence: float | None
    invalid: bool
    policy: str
    backbone: str
    evidence: list[Evidence] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    calls: int = 0  # model calls made for this answer
    replayed_calls: int = 0  # of which answered from the replay cache (their latency is the original call's)

    @property
    def replayed(self) -> bool:
        """Every model call came from the replay cache: the latency shown is not this run's."""
        return self.calls > 0 and self.replayed_calls == self.calls

    def to_dict(self) -> dict[str, Any]:
        """The `moviemem ask --json` object."""
        u = self.usage
        return {
            "choice": self.choice, "text": self.text, "confidence": self.confidence, "invalid": self.invalid,
            "policy": self.policy, "backbone": self.backbone,
            "evidence": [{"kind": e.kind, "start": round(e.start, 3), "end": round(e.end, 3), "text": e.text,
                          "score": round(e.score, 6), "retriever": e.retriever, "id": e.id, "cited": e.cited}
                         for e in self.evidence],
            "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "images": u.images,
                      "latency_s": round(u.latency_s, 3), "cost_usd": u.cost_usd, "calls": self.calls,
                      "replayed_calls": self.replayed_calls},
            "replayed": self.replayed,
            "trace": [s.to_dict() for s in self.trace],
        }


class Run:
    """What a policy accumulates while answering: trace, usage, evidence shown."""

    def __init__(self, backbone: Backbone):
        self.backbone = backbone
        self.trace: list[Step] = []
        self.usage = Usage()
        self.evidence: dict[str, Evidence] = {}
        self.calls = 0
        self.replayed = 0  # calls answered from the replay cache

    def note(self, text: str, **data: Any) -> None:
        self.trace.append(Step("note", {"text": text, **data}))

    def retrieved(self, retriever: str, query: str, found: list[Evidence], **data: Any) -> list[Evidence]:
        self.trace.append(Step("retrieve", {"retriever": retriever, "query": query, "found": [e.id for e in found], **data}))
        return found

    def show(self, evidence: list[Evidence]) -> None:
        """Record evidence as shown to the model (first occurrence wins)."""
        for e in evidence:
            self.evidence.setdefault(e.key, e)

    def chat(self, prompt: Any, messages: list[Any], **kw: Any) -> Reply:
        """Call the backbone, recording the prompt (id, version) and the reply in the trace."""
        self.trace.append(Step("prompt", {"prompt": prompt.id, "version": prompt.version, "messages": len(messages),
                                          "chars": sum(len(getattr(m, "text", "")) for m in messages),
                                          "images": sum(len([p for p in getattr(m, "parts", ()) if type(p).__name__ == "Image"])
                                                        for m in messages)}))
        started = time.perf_counter()
        reply = self.backbone.chat(messages, **kw)
        self.calls += 1
        self.replayed += bool(getattr(reply, "cached", False))
        if not reply.usage.latency_s:
            reply.usage.latency_s = time.perf_counter() - started
        self.usage = self.usage + reply.usage
        self.trace.append(Step("reply", {"text": reply.text[:2000], "invalid": reply.invalid, "error": reply.error,
                                         "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                                         "input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens}))
        return reply


@runtime_checkable
class Policy(Protocol):
    """Answers a question about a film with a backbone. `settings` holds every knob."""

    name: str

    def answer(self, film: FilmMemory, question: Question, backbone: Backbone) -> Answer: ...


# ----------------------------------------------------------------------------- registry


@dataclass
class PolicyInfo:
    name: str
    factory: Callable[..., Policy]
    description: str
    defaults: dict[str, Any]
    needs: tuple[str, ...] = ()  # film content it reads: transcript, captions, frames, clip, events, video

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "defaults": self.defaults, "needs": list(self.needs)}


_policies: dict[str, PolicyInfo] = {}


def register_policy(name: str, *, description: str = "", needs: tuple[str, ...] = ()) -> Callable[[type], type]:
    """Class decorator: the class takes its settings as keyword arguments (defaults in `Settings`)."""

    def deco(cls: type) -> type:
        doc = (cls.__doc__ or "").strip().splitlines()
        defaults = asdict(cls.Settings()) if hasattr(cls, "Settings") else {}
        _policies[name] = PolicyInfo(name, cls, description or (doc[0] if doc else ""), defaults, needs)
        cls.name = name
        return cls

    return deco


def _load_builtin() -> None:
    from . import policies  # noqa: F401 - registers the built-in policies


def list_policies() -> list[PolicyInfo]:
    _load_builtin()
    return [_policies[k] for k in sorted(_policies)]


def get_policy(name: str, **settings: Any) -> Policy:
    """A policy by name with its settings overridden; unknown names and settings are refused."""
    _load_builtin()
    if name not in _policies:
        raise MovieMemError(f"unknown policy {name!r}; known: {', '.join(sorted(_policies))}")
    info = _policies[name]
    unknown = sorted(set(settings) - set(info.defaults))
    if unknown:
        raise MovieMemError(f"policy {name} has no setting {unknown[0]!r}; settings: {', '.join(info.defaults) or 'none'}")
    return info.factory(**settings)


class BasePolicy:
    """Shared plumbing: settings as a dataclass, the Run, and the final Answer."""

    name: ClassVar[str] = ""

    @dataclass
    class Settings:
        pass

    def __init__(self, **settings: Any):
        self.settings = self.Settings(**settings)

    def answer(self, film: FilmMemory, question: Question, backbone: Backbone) -> Answer:
        run = Run(backbone)
        if film.cutoff is not None:
            run.note(f"memory restricted to what is shown by {film.cutoff:.1f} s")
        from .parsing import Parsed

        parsed: Parsed = self._answer(film, question, run)
        return Answer(choice=parsed.choice, text=parsed.text, confidence=parsed.confidence, invalid=parsed.invalid,
                      policy=self.name, backbone=getattr(backbone, "name", str(backbone)),
                      evidence=list(run.evidence.values()), trace=run.trace, usage=run.usage, error=parsed.error,
                      calls=run.calls, replayed_calls=run.replayed)

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Any:
        raise NotImplementedError
