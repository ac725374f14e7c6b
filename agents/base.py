"""The Policy protocol and the plumbing every policy shares (the Run that records a trace).

A policy turns (film, question, backbone) into an Answer that carries the evidence it showed
the model and a trace of every step (retrieval queries, prompts by id and version, tool calls,
replies), so an answer can be inspected and a run compared across policies.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from ..backbones.base import Backbone
from ..backbones.types import CONTEXT, Reply, Request, Usage
from ..memory.view import FilmMemory
from ..retrievers.types import Evidence
from .types import Answer, Question, SentCall, Step

_watcher: ContextVar[Callable[[Step], None] | None] = ContextVar("moviemem_step_watcher", default=None)


@contextmanager
def watching(watcher: Callable[[Step], None]) -> Iterator[None]:
    """Hand every step of the answers begun inside to `watcher` as it is taken (`ask` on a terminal,
    an MCP client's progress): a policy works for a minute, and a caller that sees nothing gives up."""
    token = _watcher.set(watcher)
    try:
        yield
    finally:
        _watcher.reset(token)


class Trace(list[Step]):
    """A run's steps; each one appended is also handed to the watcher the run began under (`watching`).
    Steps copied in whole (ACE's candidates, `extend`) were shown as their own runs took them."""

    def __init__(self, watcher: Callable[[Step], None] | None) -> None:
        super().__init__()
        self.watcher = watcher

    def append(self, step: Step) -> None:
        super().append(step)
        if self.watcher is not None:
            self.watcher(step)


class Run:
    """What a policy accumulates while answering: trace, usage, evidence shown."""

    def __init__(self, backbone: Backbone):
        self.backbone = backbone
        self.trace: list[Step] = Trace(_watcher.get())
        self.usage = Usage()
        self.evidence: dict[str, Evidence] = {}
        self.calls = 0
        self.replayed = 0  # calls answered from the replay cache
        self.faults = 0  # calls that got no reply (the server did not answer or refused the request)
        self.unfit = 0  # calls whose prompt was longer than the backbone's context (nothing was read)
        self.sent: list[SentCall] = []  # every call as sent, with its reply (Answer.sent)

    def note(self, text: str, **data: Any) -> None:
        self.trace.append(Step("note", {"text": text, **data}))

    def step(self, kind: str, data: dict[str, Any]) -> None:
        self.trace.append(Step(kind, data))

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
        request = Request.build(messages, **kw)
        reply = self.backbone.send(request)
        self.sent.append(SentCall(prompt.id, str(prompt.version), request, reply))
        self.calls += 1
        self.replayed += bool(reply.cached)
        self.faults += bool(reply.invalid and reply.transient)
        self.unfit += reply.finish_reason == CONTEXT
        if not reply.usage.latency_s:
            reply.usage.latency_s = time.perf_counter() - started
        self.usage = self.usage + reply.usage
        self.trace.append(Step("reply", {"text": reply.text[:2000], "invalid": reply.invalid, "error": reply.error,
                                         "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                                         "input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens}))
        return reply


def joined_settings(owner: str, *parts: type) -> type[Any]:
    """One flat settings dataclass with every field of `parts` (dataclasses), in their order, named
    `<owner>.Settings`: a policy made of parts (hybrid: a retriever and a reader) takes each part's
    settings by their own names (`hybrid[units=lines,rotations=one]`) and hands each part its own
    (`settings_part`), so no part's settings inherit another's."""
    specs: list[tuple[str, Any, Any]] = []
    for part in parts:
        hints = typing.get_type_hints(part)
        specs += [(f.name, hints[f.name], dataclasses.field(default=f.default, default_factory=f.default_factory))
                  for f in dataclasses.fields(part)]
    module, _, name = owner.rpartition(":")
    joined = dataclasses.make_dataclass("Settings", specs, namespace={"__module__": module})
    joined.__qualname__ = f"{name}.Settings"
    joined.__doc__ = "Settings of " + ", ".join(p.__name__ for p in parts) + ", in one namespace."
    return joined


P = typing.TypeVar("P")


def settings_part(part: type[P], settings: Any) -> P:
    """The fields of `part` (a dataclass) out of a larger settings object (`joined_settings`)."""
    fields = dataclasses.fields(cast(Any, part))  # a dataclass type, as joined_settings takes
    return part(**{f.name: getattr(settings, f.name) for f in fields})


@runtime_checkable
class Policy(Protocol):
    """Answers a question about a film with a backbone. `settings` holds every knob."""

    name: str

    def answer(self, film: FilmMemory, question: Question, backbone: Backbone) -> Answer: ...


class BasePolicy:
    """Shared plumbing: settings as a dataclass, the Run, and the final Answer."""

    name: str = ""  # the registry name it was created under

    @dataclass
    class Settings:
        pass

    def __init__(self, **settings: Any):
        self.settings: Any = self.Settings(**settings)  # each policy's own Settings dataclass

    def answer(self, film: FilmMemory, question: Question, backbone: Backbone) -> Answer:
        run = Run(backbone)
        if film.cutoff is not None:
            run.note(f"memory restricted to what is shown by {film.cutoff:.1f} s")
        from .parsing import Parsed

        parsed: Parsed = self._answer(film, question, run)
        if run.unfit:  # the model read nothing: no answer to score and no evidence shown to it
            run.note(f"{run.unfit} prompt(s) longer than the backbone's context were not read; "
                     "the answer is invalid with reason 'context' (never scored)")
            parsed = Parsed(None, "", None, True, parsed.error)
            run.evidence.clear()
        elif not run.evidence and not parsed.invalid:
            run.note("the model was shown no evidence from the film: this answer is a guess (grounded: false)")
        return Answer(choice=parsed.choice, text=parsed.text, confidence=parsed.confidence, invalid=parsed.invalid,
                      policy=self.name, backbone=getattr(backbone, "name", str(backbone)),
                      evidence=list(run.evidence.values()), trace=run.trace, usage=run.usage, error=parsed.error,
                      calls=run.calls, replayed_calls=run.replayed, faults=run.faults, grounded=bool(run.evidence),
                      reason=CONTEXT if run.unfit else None, sent=run.sent)

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Any:
        raise NotImplementedError
