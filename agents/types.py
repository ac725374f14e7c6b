"""The values policies trade in: answers and the steps of a trace (the question is the retrievers' query type).

At the bottom of the agents folder: policies, the runner and the CLI share these types
without importing any policy."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..backbones.types import Reply, Request, Usage
from ..retrievers.types import LETTERS, MAX_TEXT_CHARS, Evidence, Kind, Question

__all__ = ["LETTERS", "MAX_TEXT_CHARS", "Answer", "Kind", "Question", "SentCall", "Step"]


@dataclass
class SentCall:
    """One model call exactly as it went out and came back: what the model read (every message, image
    reference and tool result), what it wrote and, where the backbone gives them, the log-probabilities a
    reader used. The trace names the prompt; this keeps its text, so a wrong answer can be read as the
    model read it (the run folder keeps it once per distinct text: eval/log.py)."""

    prompt: str  # the prompt's id (agents/prompts.py)
    version: str
    request: Request
    reply: Reply

@dataclass
class Step:
    """One thing a policy did: kind is retrieve | prompt | reply | tool | note."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    t: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}

    def line(self) -> str:
        """The step in a few words, for whoever waits on the answer: `ask` on a terminal, an MCP
        client's progress notifications."""
        d = self.data
        if self.kind == "retrieve":
            return f"searched {d.get('retriever')} for {str(d.get('query'))[:60]!r}: {len(d.get('found') or [])} found"
        if self.kind == "prompt":
            chars = int(d.get("chars") or 0)
            return f"reading prompt {d.get('prompt')} (about {chars // 4:,} tokens)"
        if self.kind == "reply":
            if d.get("invalid"):
                return f"no usable reply: {d.get('error')}"
            calls = ", ".join(c["name"] for c in d.get("tool_calls") or [])
            return f"replied ({d.get('output_tokens', 0)} tokens)" + (f", calling {calls}" if calls else "")
        if self.kind == "tool":
            return f"tool {d.get('name')}: {len(d.get('found') or [])} found" + (f" ({d['error']})" if d.get("error") else "")
        if self.kind == "rerank":
            return f"reranked {d.get('candidates')} candidates"
        if self.kind == "parse" and "how" in d:
            return f"answer unreadable: {d.get('error')}" if d.get("invalid") else f"answer read ({d['how']})"
        if self.kind == "note":
            return str(d.get("text"))
        return self.kind


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
    faults: int = 0  # of which got no reply: the backbone's server did not answer, or refused the request
    reason: str | None = None  # why an invalid answer is not scored at all: "context" (the prompt did not fit)
    grounded: bool = True  # False: the model was shown no evidence from the film, so the answer is a guess
    sent: list[SentCall] = field(default_factory=list, repr=False)  # every model call as sent, in order

    def __post_init__(self) -> None:
        from .display import EvidenceList

        self.evidence = EvidenceList(self.evidence)  # shows itself as a table in a notebook

    def _repr_html_(self) -> str:
        """The answer in a notebook: choice, grounded or not, evidence with times and stills, usage."""
        from .display import answer_html

        return answer_html(self)

    @property
    def replayed(self) -> bool:
        """Every model call came from the replay cache: the latency shown is not this run's."""
        return self.calls > 0 and self.replayed_calls == self.calls

    def to_dict(self) -> dict[str, Any]:
        """The `moviemem ask --json` object."""
        u = self.usage
        return {
            "choice": self.choice, "text": self.text, "confidence": self.confidence, "invalid": self.invalid,
            "reason": self.reason, "grounded": self.grounded,
            "policy": self.policy, "backbone": self.backbone,
            "evidence": [{"kind": e.kind, "start": round(e.start, 3), "end": round(e.end, 3), "text": e.text,
                          "score": round(e.score, 6), "retriever": e.retriever, "id": e.id, "cited": e.cited}
                         for e in self.evidence],
            "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "images": u.images,
                      "latency_s": round(u.latency_s, 3), "cost_usd": u.cost_usd, "calls": self.calls,
                      "replayed_calls": self.replayed_calls, "faults": self.faults},
            "replayed": self.replayed,
            "trace": [s.to_dict() for s in self.trace],
        }
