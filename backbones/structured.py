"""Ask a backbone for JSON that matches a schema, with bounded retries.

Bad model output is part of normal operation for small local models: a reply that is not
JSON, misses a field or fails a check is asked again (the request shows the model its
broken reply and the reason, so a deterministic model does not just repeat itself), and
after the last attempt it is handed back as a failure to be recorded, never raised.
Failures that say nothing about the model (network, rate limits after the backbone's own
retries) do raise: the stage fails, and a rerun replays the finished requests from the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..foundation.errors import MovieMemError
from .base import Backbone, check_schema, parse_json_reply, send_all
from .types import Message, Reply, Request, Usage, assistant, user

RETRY_NOTE = "Your reply could not be used ({error}). Reply again with JSON only, following the schema."

Check = Callable[[Any], str | None]  # extra validation of parsed data: an error message or None


@dataclass
class Ask:
    key: str  # what the request is about, for failure records
    messages: list[Message]


@dataclass
class Answer:
    key: str
    data: Any = None  # the parsed, valid JSON; None when every attempt failed
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    raw: str = ""  # the last reply text (kept for the failure record)
    input_tokens: int = 0
    output_tokens: int = 0
    usage: Usage = field(default_factory=Usage)  # every attempt's, cost included

    @property
    def ok(self) -> bool:
        return self.data is not None


def _judge(reply: Reply, schema: dict[str, Any], check: Check | None) -> tuple[Any, str | None]:
    if reply.invalid:
        return None, reply.error or "invalid reply"
    value = reply.data if reply.data is not None else parse_json_reply(reply.text)
    if value is None:
        return None, "reply is not JSON"
    if err := check_schema(value, schema):
        return None, f"reply does not match the schema: {err}"
    if check is not None and (err := check(value)):
        return None, err
    return value, None


def ask_json(backbone: Backbone, asks: list[Ask], schema: dict[str, Any], *, max_tokens: int, attempts: int = 3,
             check: Check | None = None, timeout: float | None = None,
             progress: Callable[[int], None] | None = None) -> list[Answer]:
    """One Answer per Ask, in order. `progress(n)` is called with the number settled so far;
    `timeout` (seconds per request) overrides the backbone's default."""
    answers = [Answer(a.key) for a in asks]
    convo = {i: list(a.messages) for i, a in enumerate(asks)}
    pending = list(range(len(asks)))
    settled = 0
    for attempt in range(1, max(1, attempts) + 1):
        if not pending:
            break
        reqs = [Request.build(convo[i], json_schema=schema, max_tokens=max_tokens, temperature=0.0, timeout=timeout)
                for i in pending]
        replies = send_all(backbone, reqs)
        transient = [(asks[i].key, r.error) for i, r in zip(pending, replies) if r.invalid and r.transient]
        if transient:
            key, why = transient[0]
            raise MovieMemError(f"{len(transient)} request(s) to backbone {backbone.name} failed ({key}: {why}); "
                                "rerun to resume: finished requests replay from the cache")
        still = []
        for i, reply in zip(pending, replies):
            ans = answers[i]
            ans.attempts = attempt
            ans.raw = reply.raw or reply.text
            ans.input_tokens += reply.usage.input_tokens
            ans.output_tokens += reply.usage.output_tokens
            ans.usage = ans.usage + reply.usage
            value, err = _judge(reply, schema, check)
            if err is None:
                ans.data = value
                settled += 1
                continue
            ans.errors.append(err)
            if attempt < attempts:
                convo[i] = convo[i] + [assistant(ans.raw[:2000] or "(empty)"), user(RETRY_NOTE.format(error=err))]
                still.append(i)
            else:
                settled += 1
        pending = still
        if progress is not None:
            progress(settled)
    return answers
