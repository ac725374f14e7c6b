"""A run's model calls as the model read them: the messages' texts joined from the call log, found by item and
configuration, printed as plain text (`moviemem show-call`) or handed to the inspector's item page."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..foundation.errors import MovieMemError
from .log import CALLS, CallLog
from .records import CallLine, ResultRecord
from .run import RunLog


@dataclass
class ShownMessage:
    role: str
    text: str  # the text parts joined, media shown as `[image: ref]` lines where they were sent
    tool_calls: list[str]


@dataclass
class ShownCall:
    policy: str
    backbone: str
    item_id: str
    query: str
    n: int  # 1-based, within its answer
    of: int
    line: CallLine
    messages: list[ShownMessage]
    schema: str | None
    tools: str | None


def shown(log: CallLog, rec: ResultRecord, query: str, ids: list[str]) -> list[ShownCall]:
    """The calls `ids` of one answer of `rec`, their texts joined."""
    lines = log.of(ids)
    out = []
    for k, line in enumerate(lines, 1):
        messages = []
        for m in line.messages:
            text = []
            for p in m.parts:
                if p.text is not None:
                    text.append(log.text(p.text))
                for kind in ("image", "video", "audio"):
                    ref = getattr(p, kind)
                    if ref is not None:
                        text.append(f"[{kind}: {ref}]\n")
            messages.append(ShownMessage(m.role, "".join(text), [f"{c.name}({c.arguments})" for c in m.tool_calls]))
        out.append(ShownCall(rec.policy, rec.backbone, rec.item_id, query, k, len(lines), line, messages,
                             log.text(line.options.json_schema) if line.options.json_schema else None,
                             log.text(line.options.tools) if line.options.tools else None))
    return out


def find_calls(run_dir: str | Path, item_id: str, policy: str | None = None, backbone: str | None = None,
               query: str | None = None, call: int | None = None) -> list[ShownCall]:
    """Every call of the item's answers in the configurations that match; a one-line error when the item, the
    configuration or the call is not there, or the run was written before calls were kept."""
    run = RunLog(run_dir)
    recs = [r for r in run.records() if r.item_id == item_id]
    if not recs:
        raise MovieMemError(f"{run.dir} holds no answer to item {item_id!r}")
    recs = [r for r in recs if (policy is None or r.policy == policy) and (backbone is None or r.backbone == backbone)]
    configs = sorted({r.config for r in recs})
    if not configs:
        raise MovieMemError(f"no answer to {item_id!r} by policy {policy or 'any'} and backbone {backbone or 'any'}")
    if len(configs) > 1:
        listed = ", ".join(f"--policy {p!r} --backbone {b!r}" for p, b in configs)
        raise MovieMemError(f"{item_id!r} was answered by {len(configs)} configurations; pick one: {listed}")
    rec = recs[0]
    log = run.calls
    if not (run.dir / CALLS).exists() or not any(a.call_ids for a in rec.answers.values()):
        raise MovieMemError(f"{run.dir} keeps no calls as sent for {item_id!r}: it was written before moviemem kept "
                            "them (results.jsonl still names each prompt in the trace)")
    calls: list[ShownCall] = []
    for q, a in rec.answers.items():
        if query is None or q == query:
            calls += shown(log, rec, q, a.call_ids)
    if query is not None and not any(q == query for q in rec.answers):
        raise MovieMemError(f"{item_id!r} has no answer {query!r}; it has {', '.join(rec.answers)}")
    if call is not None:
        calls = [c for c in calls if c.n == call]
        if not calls:
            raise MovieMemError(f"{item_id!r} has no call {call} (its answers made "
                                f"{', '.join(str(len(a.call_ids)) for a in rec.answers.values())} call(s))")
    return calls


def _logprob_line(top: dict[str, float]) -> str:
    ranked = sorted(top.items(), key=lambda kv: -kv[1])[:8]
    return ", ".join(f"{tok!r} {lp:.3f} (p {math.exp(lp):.3f})" for tok, lp in ranked)


def call_text(c: ShownCall) -> str:
    """One call as plain text: a head line, each message under its role, the reply and its log-probabilities."""
    o, r = c.line.options, c.line.reply
    head = (f"=== {c.policy} / {c.backbone} / {c.item_id} ({c.query}) · call {c.n} of {c.of} · prompt {c.line.prompt} "
            f"v{c.line.version} · max_tokens {o.max_tokens}, temperature {o.temperature:g}"
            + (f", log-probabilities {o.logprobs}" if o.logprobs else "") + (f", tool_choice {o.tool_choice}" if o.tool_choice else "")
            + (f", shared prefix {o.shared_prefix:,} characters" if o.shared_prefix else ""))
    parts = [head]
    for m in c.messages:
        parts.append(f"--- {m.role}")
        parts.append(m.text.rstrip("\n"))
        parts += [f"[tool call: {t}]" for t in m.tool_calls]
    if c.schema:
        parts += ["--- JSON schema asked for", c.schema]
    if c.tools:
        parts += ["--- tools offered", c.tools]
    u = c.line.usage
    reused = (f" ({u.cached_input_tokens} reused" + (f", {u.restored_input_tokens} of them restored from a saved state"
                                                      if u.restored_input_tokens else "") + ")") if u.cached_input_tokens else ""
    parts.append(f"--- reply ({'from the replay cache, ' if r.cached else ''}finish {r.finish_reason or '?'}, "
                 f"{u.input_tokens} tokens in{reused}, {u.output_tokens} written"
                 + (f", invalid: {r.error}" if r.invalid else "") + ")")
    parts.append(r.text)
    parts += [f"[tool call: {t.name}({t.arguments})]" for t in r.tool_calls]
    for k, top in enumerate(r.logprobs or [], 1):
        parts.append(f"--- log-probabilities of token {k}: {_logprob_line(top)}")
    return "\n".join(parts) + "\n"
