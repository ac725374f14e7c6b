"""What a bench would spend, before it spends it (`moviemem bench ... --plan`, issue 57).

Each policy answers each item the bench would still ask, as it would in the run, but against a stand-in
for the backbone (`PlanningBackbone`) that calls no model: it counts the request the policy built, looks
it up in the replay cache, and answers it. A request the cache holds gets its stored reply (free on a
rerun, and the policy goes on as it did then); any other gets a stand-in reply (the first option, a
confident log-probability for it, no tool call) whose tokens are the prompt's estimate (4 characters a
token) and the request's output limit (an upper bound). So the plan is exact in calls and a close estimate
of input tokens for policies that make the same calls whatever the model replies, and a lower bound on
calls for those whose calls depend on the replies (tool loops, more frames while unsure, a selection among
disagreeing candidates): the plan says which.

Cost is the price table's (backbones/prices.toml) for what the cache does not hold; wall time is the
backbone's measured speed on this machine (backbones/pace.py) for a local model, and unknown for a backbone
whose speed was never measured here.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.registry import parse_policy_spec
from ..backbones import Backbone, Reply, Request
from ..backbones.base import Wrapper
from ..backbones.cache import ReplayCache, _db_path
from ..backbones.pace import Pace, PaceBook
from ..backbones.pricing import load_prices, price_for
from ..backbones.types import Usage
from ..foundation.errors import MovieMemError
from ..foundation.words import estimate_tokens
from .answerer import LibraryAnswerer
from .formats import Benchmark
from .log import backbone_spec, iter_log, record_key
from .outputs import PlanJson, PlanRowLine
from .tasks import task_for

# policies whose number of calls follows the replies: the stand-in reply takes their shortest path
REPLY_DEPENDENT = {
    "ace": "a selection call only when the candidates disagree",
    "archival": "a tool loop: up to max_steps model turns",
    "letta": "a tool loop on a Letta server",
    "videoagent": "more frames, up to 3 rounds, while the model is unsure",
}
STAND_IN = "A"


def stand_in_value(schema: dict[str, Any]) -> Any:
    """The smallest value a JSON schema accepts: an enum's first member, required keys only."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: stand_in_value(props.get(k) or {}) for k in schema.get("required", [])}
    return {"array": [], "integer": 1, "number": 0.5, "boolean": True, "null": None}.get(str(kind), STAND_IN)


def stand_in_reply(request: Request) -> Reply:
    """What the plan answers a request the cache does not hold: a usable reply that ends the policy's path
    soonest (no tool call), for the most the request may cost (its output limit)."""
    import json

    images, video_s, audio_s = request.media_usage()
    usage = Usage(input_tokens=sum(estimate_tokens(m.text) for m in request.messages), output_tokens=request.max_tokens,
                  images=images, video_s=video_s, audio_s=audio_s)
    if request.logprobs:
        top = {t: -0.1 if t in (STAND_IN, "yes") else -3.0 for t in ("A", "B", "C", "D", "E", "yes", "no")}
        return Reply(text=STAND_IN, usage=usage, finish_reason="stop", logprobs=[top])
    if request.json_schema is not None:
        value = stand_in_value(request.json_schema)
        return Reply(text=json.dumps(value), data=value, usage=usage, finish_reason="stop")
    return Reply(text=STAND_IN, usage=usage, finish_reason="stop")


@dataclass
class Tally:
    """What one configuration's requests would take."""

    calls: int = 0
    cached: int = 0  # of which the replay cache holds: free on a rerun
    input_tokens: int = 0  # of the calls the cache does not hold (estimated)
    output_tokens: int = 0  # their output limits: an upper bound
    cached_input_tokens: int = 0  # what the cached calls were billed, for the record
    cost_usd: float | None = 0.0  # None: the backbone has no price
    wall_s: float | None = 0.0  # None: the backbone's speed was never measured here
    tools: bool = False  # some request offered tools: its calls follow the replies

    def add(self, other: Tally) -> None:
        for f in ("calls", "cached", "input_tokens", "output_tokens", "cached_input_tokens"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        self.wall_s = None if self.wall_s is None or other.wall_s is None else self.wall_s + other.wall_s
        self.tools = self.tools or other.tools


class PlanningBackbone(Wrapper):
    """A backbone's stand-in: the same name, model id and capabilities (so a policy builds the requests it
    would build, and the cache keys match), answering from the replay cache or with `stand_in_reply`."""

    def __init__(self, inner: Backbone, spec: str, cache: Path | None) -> None:
        super().__init__(inner, name=spec)
        self.cache = _open_cache(inner, cache)
        price_key = getattr(inner, "price_key", None)
        self.price = price_for(price_key, load_prices()) if price_key else None
        self.pace = _pace(inner)
        self._local = threading.local()

    def begin(self) -> Tally:
        self._local.tally = Tally()
        return self._local.tally

    def send(self, request: Request) -> Reply:
        tally: Tally = self._local.tally
        tally.calls += 1
        tally.tools = tally.tools or bool(request.tools)
        hit = self.cache.get(self.cache.key(request)) if self.cache is not None else None
        if hit is not None:
            tally.cached += 1
            tally.cached_input_tokens += hit.usage.input_tokens
            return hit
        reply = stand_in_reply(request)
        u = reply.usage
        tally.input_tokens += u.input_tokens
        tally.output_tokens += u.output_tokens
        tally.cost_usd = None if self.price is None or tally.cost_usd is None else tally.cost_usd + self.price.cost(u)
        seconds = self._seconds(u)
        tally.wall_s = None if seconds is None or tally.wall_s is None else tally.wall_s + seconds
        return reply

    def _seconds(self, u: Usage) -> float | None:
        if self.pace is None or not self.pace.read_tok_s or not self.pace.write_tok_s:
            return None
        return u.input_tokens / self.pace.read_tok_s + u.output_tokens / self.pace.write_tok_s


def _open_cache(inner: Backbone, cache: Path | None) -> ReplayCache | None:
    """The replay cache a bench would read, opened only where it exists: a plan writes nothing."""
    if cache is None or not _db_path(cache).is_file():
        return None
    return ReplayCache(inner, cache, "read")


def _pace(inner: Backbone) -> Pace | None:
    """A local model's measured speed on this machine (backbones/pace.py), or None."""
    book, key = getattr(inner, "paces", None), getattr(inner, "pace_key", None)
    return book.get(key) if isinstance(book, PaceBook) and key else None


@dataclass
class PlanRow:
    """One policy x backbone: the items it would ask and what they would take."""

    policy: str
    backbone: str
    items: int
    already: int  # items the run directory holds answers for: a rerun skips them
    tally: Tally = field(default_factory=Tally)
    depends: str | None = None  # why the calls follow the replies (the counts are then a lower bound)
    failures: int = 0  # items whose requests could not be built (the film lacks what the policy reads)
    failure: str | None = None  # the first one's reason

    @property
    def exact(self) -> bool:
        return self.depends is None

    def to_dict(self) -> PlanRowLine:
        t = self.tally
        return {"policy": self.policy, "backbone": self.backbone, "items": self.items, "already_answered": self.already,
                "calls": t.calls, "calls_bound": "exact" if self.exact else "at least",
                "depends_on_replies": self.depends, "cached_calls": t.cached, "calls_to_model": t.calls - t.cached,
                "input_tokens": t.input_tokens, "output_tokens_at_most": t.output_tokens,
                "cost_usd": None if t.cost_usd is None else round(t.cost_usd, 6),
                "wall_s": None if t.wall_s is None else round(t.wall_s, 1),
                "failures": self.failures, "failure": self.failure}


def plan_bench(bench: Benchmark, policies: Sequence[str], backbones: Sequence[str], library: Any, *,
               run_dir: Path | None = None, cache: Path | None = None, limit: int | None = None) -> list[PlanRow]:
    """A row per policy x backbone of what `run_bench` with the same arguments would take; no model called."""
    from ..backbones import load

    if not policies or not backbones:
        raise MovieMemError(f"no {'policies' if not policies else 'backbones'} given")
    answerer = LibraryAnswerer(library)
    answerer.check_policies(policies)
    task = task_for(bench.format)
    items = list(bench.items)[:limit]
    done = {r.key for r in iter_log(run_dir) if r.status != "transient"} if run_dir is not None else set()
    lib_path = getattr(library, "path", None)
    cache = cache if cache is not None else (Path(lib_path) / "cache" if lib_path and "://" not in str(lib_path) else None)
    rows = []
    for spec in backbones:
        stand_in = PlanningBackbone(load(spec), backbone_spec(spec), cache)
        for policy in policies:
            row = PlanRow(policy, stand_in.name, 0, 0, depends=REPLY_DEPENDENT.get(parse_policy_spec(policy)[0]))
            for it in items:
                if record_key(policy, stand_in.name, it.id) in done:
                    row.already += 1
                    continue
                row.items += 1
                tally = stand_in.begin()
                try:
                    for q in task.queries(it):
                        answerer(it.film_id, q, policy, stand_in)
                except MovieMemError as exc:
                    row.failures += 1
                    row.failure = row.failure or f"{it.id}: {exc}"
                row.tally.add(tally)
            if row.tally.tools and row.depends is None:
                row.depends = "a tool loop: the model's tool calls decide the turns"
            rows.append(row)
    return rows


def plan_json(rows: Sequence[PlanRow]) -> PlanJson:
    """The `moviemem bench --plan --json` object: the rows and their totals."""
    total = Tally()
    for r in rows:
        total.add(r.tally)
    return {"rows": [r.to_dict() for r in rows],
            "total": {"items": sum(r.items for r in rows), "calls": total.calls,
                      "calls_bound": "exact" if all(r.exact for r in rows) else "at least",
                      "cached_calls": total.cached, "input_tokens": total.input_tokens,
                      "output_tokens_at_most": total.output_tokens,
                      "cost_usd": None if total.cost_usd is None else round(total.cost_usd, 6),
                      "wall_s": None if total.wall_s is None else round(total.wall_s, 1)},
            "method": "requests built by each policy without calling a model: input tokens estimated at 4 characters "
                      "a token; output tokens at each request's output limit (an upper bound); cached calls cost "
                      "nothing on a rerun; wall time from the backbone's measured speed on this machine"}


def duration(seconds: float | None) -> str:
    """A wall time for the plan's table: unknown where no speed was measured."""
    if seconds is None:
        return "n/a"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def money(usd: float | None) -> str:
    return "no price" if usd is None else f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"
