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

Cost is the price table's (backbones/prices.toml) for what the cache does not hold. Wall time (issue 61) is,
for a local model, the tokens it reads and writes at the speeds measured on this machine (backbones/pace.py:
recorded by every call, and by `moviemem doctor`), and for an API backbone the mean latency its replies
recorded in the replay cache; a backbone never run here has none, and the plan says so.

Tokens read are not tokens billed: a local model keeps the prompt it last read and reads only what differs,
so a film's first full-context question reads the whole transcript (minutes on a CPU) and the film's later
questions (the runner asks a film's items together) read little more than their question. The plan follows
that in the order the runner asks, and lists each configuration's first read of each film apart from the
reused reads. A first read that a saved prompt state could restore (a prefix cache on disk) is priced as a
restore by `price_restores`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
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
from .outputs import FirstReadLine, LaterReadsLine, PlanJson, PlanRowLine
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
    read_tokens: int = 0  # of input_tokens, those the model reads: a local model skips the prefix it holds
    reused_tokens: int = 0  # input tokens a local model had already read (the prompt before shared its prefix)

    def add(self, other: Tally) -> None:
        for f in ("calls", "cached", "input_tokens", "output_tokens", "cached_input_tokens", "read_tokens",
                  "reused_tokens"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        self.wall_s = None if self.wall_s is None or other.wall_s is None else self.wall_s + other.wall_s
        self.tools = self.tools or other.tools


@dataclass
class FirstRead:
    """A configuration's first call on a film: it reads the film's context whole (a full-context policy's
    transcript), where the film's later calls reuse it."""

    film_id: str
    tokens: int  # tokens it reads
    seconds: float | None
    prefix_tokens: int = 0  # of its prompt, shared with the film's later calls: what a saved prompt state holds
    restored: bool = False  # priced as a restore of a saved state (price_restores)

    def to_dict(self) -> FirstReadLine:
        return {"film_id": self.film_id, "tokens_read": self.tokens, "shared_prefix_tokens": self.prefix_tokens,
                "wall_s": None if self.seconds is None else round(self.seconds, 1), "restored": self.restored}


def prompt_text(request: Request) -> str:
    """A request's text in order, roles marked: two prompts share a prefix here where the model's do."""
    return "".join(f"\x00{m.role}\x01{m.text}" for m in request.messages)


def shared_prefix(a: str, b: str) -> int:
    """Characters `a` and `b` share from their start (a binary search on slices: transcripts are long)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class Speed:
    """How long a call takes on this machine: a local model's measured reading and writing speeds, or an API
    backbone's mean recorded latency; `how` says which (or that neither was ever measured here)."""

    def __init__(self, pace: Pace | None, latencies: Sequence[float]) -> None:
        self.pace, self.local = pace, pace is not None
        self.latency = sum(latencies) / len(latencies) if latencies else None
        if pace is not None and pace.read_tok_s:
            self.how = (f"read {pace.read_tok_s:,.0f} tokens/s, write "
                        + (f"{pace.write_tok_s:,.1f} tokens/s" if pace.write_tok_s else "speed not measured yet")
                        + " (measured here)")
        elif pace is not None:
            self.how = "never measured here: run `moviemem doctor` (it times this machine's local models)"
        elif self.latency is not None:
            self.how = f"mean recorded latency {self.latency:.1f} s a call over {len(latencies)} call(s)"
        else:
            self.how = "never measured here: no call to this backbone is recorded in the replay cache"

    def seconds(self, read: int, written: int, logprobs: bool) -> float | None:
        """A call's time: a letter read from log-probabilities is one pass over the prompt, nothing written."""
        if self.pace is None:
            return self.latency
        if not self.pace.read_tok_s:
            return None
        if logprobs or not written:
            return read / self.pace.read_tok_s
        return read / self.pace.read_tok_s + written / self.pace.write_tok_s if self.pace.write_tok_s else None


class PlanningBackbone(Wrapper):
    """A backbone's stand-in: the same name, model id and capabilities (so a policy builds the requests it
    would build, and the cache keys match), answering from the replay cache or with `stand_in_reply`. For a
    local model it follows the prompt the model holds, so it counts the tokens each call really reads."""

    def __init__(self, inner: Backbone, spec: str, cache: Path | None) -> None:
        super().__init__(inner, name=spec)
        self.cache = _open_cache(inner, cache)
        price_key = getattr(inner, "price_key", None)
        self.price = price_for(price_key, load_prices()) if price_key else None
        self.pace = _pace(inner)
        self.speed = Speed(self.pace, _latencies(self.cache) if self.pace is None else [])
        self._local = threading.local()
        self._held = ""  # the prompt a local model holds: the last one it read
        self.firsts: dict[str, FirstRead] = {}  # this configuration's first read of each film
        self._first_text: dict[str, str] = {}

    def begin_row(self) -> None:
        self.firsts, self._first_text = {}, {}

    def begin(self, film_id: str = "") -> Tally:
        self._local.tally = Tally()
        self._local.film = film_id
        return self._local.tally

    def send(self, request: Request) -> Reply:
        tally: Tally = self._local.tally
        tally.calls += 1
        tally.tools = tally.tools or bool(request.tools)
        hit = self.cache.get(self.cache.key(request)) if self.cache is not None else None
        if hit is not None:  # answered from the cache: the model reads nothing, and holds what it held
            tally.cached += 1
            tally.cached_input_tokens += hit.usage.input_tokens
            return hit
        reply = stand_in_reply(request)
        u = reply.usage
        tally.input_tokens += u.input_tokens
        tally.output_tokens += u.output_tokens
        tally.cost_usd = None if self.price is None or tally.cost_usd is None else tally.cost_usd + self.price.cost(u)
        read = self._read(request, u.input_tokens, tally)
        seconds = self.speed.seconds(read, u.output_tokens, bool(request.logprobs))
        tally.wall_s = None if seconds is None or tally.wall_s is None else tally.wall_s + seconds
        return reply

    def _read(self, request: Request, tokens: int, tally: Tally) -> int:
        """Tokens this call reads (a local model skips the prefix it holds), noting a film's first read."""
        text = prompt_text(request)
        reused = 0
        if self.speed.local:
            common = shared_prefix(self._held, text)
            if request.shared_prefix:  # a marked prefix is kept whole or read again whole, and reading resumes at its end
                mark = len(text) - len(request.messages[-1].text) + request.shared_prefix
                common = mark if common >= mark else 0
            reused = min(tokens, estimate_tokens(text[:common]))
            self._held = text
        read = tokens - reused
        tally.read_tokens += read
        tally.reused_tokens += reused
        film = getattr(self._local, "film", "")
        first = self.firsts.get(film)
        if film and first is None:
            self.firsts[film] = FirstRead(film, read, self.speed.seconds(read, request.max_tokens, bool(request.logprobs)))
            self._first_text[film] = text
        elif first is not None:
            shared = estimate_tokens(text[:shared_prefix(self._first_text[film], text)])
            first.prefix_tokens = max(first.prefix_tokens, min(shared, first.tokens))
        return read


def _open_cache(inner: Backbone, cache: Path | None) -> ReplayCache | None:
    """The replay cache a bench would read, opened only where it exists: a plan writes nothing."""
    if cache is None or not _db_path(cache).is_file():
        return None
    return ReplayCache(inner, cache, "read")


def _latencies(cache: ReplayCache | None, most: int = 500) -> list[float]:
    """The latencies an API backbone's replies recorded (the replay cache keeps each reply's usage), newest first."""
    if cache is None:
        return []
    rows = cache._conn().execute(  # noqa: SLF001 - the cache's own connection, read only
        "SELECT reply FROM replies WHERE model_id = ? ORDER BY created DESC LIMIT ?", (cache.model_id, most)).fetchall()
    out = []
    for (raw,) in rows:
        try:
            latency = float((json.loads(raw).get("usage") or {}).get("latency_s") or 0)
        except (ValueError, TypeError, AttributeError):
            continue
        if latency > 0:
            out.append(latency)
    return out


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
    speed: Speed | None = None
    failures: int = 0  # items whose requests could not be built (the film lacks what the policy reads)
    failure: str | None = None  # the first one's reason
    firsts: list[FirstRead] = field(default_factory=list)  # the first read of each film, apart from the reused reads
    wall_from: str = ""  # what the wall time rests on (Speed.how)

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
                "failures": self.failures, "failure": self.failure,
                "tokens_billed": t.input_tokens, "tokens_read": t.read_tokens, "tokens_reused": t.reused_tokens,
                "first_reads": [f.to_dict() for f in self.firsts], "later_reads": self.later(), "wall_from": self.wall_from}

    def later(self) -> LaterReadsLine:
        """The calls after each film's first: what they read, and their time."""
        t = self.tally
        first_s = [f.seconds for f in self.firsts]
        wall = None if t.wall_s is None or None in first_s else t.wall_s - sum(x or 0.0 for x in first_s)
        return {"calls": t.calls - t.cached - len(self.firsts), "tokens_read": t.read_tokens - sum(f.tokens for f in self.firsts),
                "tokens_reused": t.reused_tokens, "wall_s": None if wall is None else round(max(0.0, wall), 1)}


def price_restores(row: PlanRow, saved: Collection[str], restore_s: Callable[[int], float] | None = None) -> None:
    """The hook for a saved prompt-state cache (issue 65): the first reads of the films in `saved` (films whose
    shared prefix this row's local backbone holds on disk) priced as a restore: the shared prefix is not read,
    the rest is, and restoring its `prefix_tokens` takes `restore_s(prefix_tokens)` seconds (None: not counted,
    and `wall_from` says so). Changes the row in place; an API backbone's row is left as it is."""
    speed, t = row.speed, row.tally
    if speed is None or not speed.local:
        return
    for f in row.firsts:
        if f.film_id not in saved or f.restored or not f.prefix_tokens:
            continue
        spared = speed.seconds(f.prefix_tokens, 0, True)  # reading the prefix: what the restore saves
        seconds = None if f.seconds is None or spared is None else (
            f.seconds - spared + (restore_s(f.prefix_tokens) if restore_s is not None else 0.0))
        if t.wall_s is not None and f.seconds is not None and seconds is not None:
            t.wall_s += seconds - f.seconds
        t.read_tokens -= f.prefix_tokens
        t.reused_tokens += f.prefix_tokens
        f.tokens, f.seconds, f.restored = f.tokens - f.prefix_tokens, seconds, True
    if any(f.restored for f in row.firsts):
        row.wall_from += "; saved prefixes restored" + ("" if restore_s is not None else " (restore time not counted)")


def film_order(items: Sequence[Any]) -> list[Any]:
    """Items of one film together, films in order of first appearance: the order the runner asks them in."""
    first: dict[str, int] = {}
    for i, it in enumerate(items):
        first.setdefault(it.film_id, i)
    return sorted(items, key=lambda it: first[it.film_id])


def plan_bench(bench: Benchmark, policies: Sequence[str], backbones: Sequence[str], library: Any, *,
               run_dir: Path | None = None, cache: Path | None = None, limit: int | None = None,
               saved_prefixes: Mapping[str, Collection[str]] | None = None) -> list[PlanRow]:
    """A row per policy x backbone of what `run_bench` with the same arguments would take; no model called.
    `saved_prefixes`: by backbone spec, the films whose prompt prefix a saved state holds (`price_restores`);
    None: those backbones/prefix_states.py finds in the library's cache folder for each local backbone."""
    from ..backbones import load

    if not policies or not backbones:
        raise MovieMemError(f"no {'policies' if not policies else 'backbones'} given")
    answerer = LibraryAnswerer(library)
    answerer.check_policies(policies)
    task = task_for(bench.format)
    items = film_order(list(bench.items)[:limit])
    done = {r.key for r in iter_log(run_dir) if r.status != "transient"} if run_dir is not None else set()
    lib_path = getattr(library, "path", None)
    cache = cache if cache is not None else (Path(lib_path) / "cache" if lib_path and "://" not in str(lib_path) else None)
    rows = []
    saved = dict(saved_prefixes or {})
    for spec in backbones:
        stand_in = PlanningBackbone(load(spec), backbone_spec(spec), cache)
        if saved_prefixes is None and stand_in.speed.local:  # the prompt states this library's cache holds (issue 65)
            from ..backbones.prefix_states import saved_prefixes as saved_in

            saved[stand_in.name] = saved_in(cache, stand_in.name)
        for policy in policies:
            row = PlanRow(policy, stand_in.name, 0, 0, depends=REPLY_DEPENDENT.get(parse_policy_spec(policy)[0]),
                          speed=stand_in.speed, wall_from=stand_in.speed.how)
            stand_in.begin_row()
            for it in items:
                if record_key(policy, stand_in.name, it.id) in done:
                    row.already += 1
                    continue
                row.items += 1
                tally = stand_in.begin(it.film_id)
                try:
                    for q in task.queries(it):
                        answerer(it.film_id, q, policy, stand_in)
                except MovieMemError as exc:
                    row.failures += 1
                    row.failure = row.failure or f"{it.id}: {exc}"
                row.tally.add(tally)
            if row.tally.tools and row.depends is None:
                row.depends = "a tool loop: the model's tool calls decide the turns"
            row.firsts = list(stand_in.firsts.values())
            price_restores(row, saved.get(stand_in.name, ()))
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
                      "wall_s": None if total.wall_s is None else round(total.wall_s, 1),
                      "tokens_billed": total.input_tokens, "tokens_read": total.read_tokens},
            "method": "requests built by each policy without calling a model: input tokens estimated at 4 characters "
                      "a token; output tokens at each request's output limit (an upper bound); cached calls cost "
                      "nothing on a rerun; tokens read: what a local model reads, its prompt less the prefix it holds "
                      "from the call before (a film's first full-context call reads the film whole, its later ones "
                      "reuse it), in the order the runner asks; wall time: a local model's reading and writing speeds "
                      "measured on this machine (by `moviemem doctor` and by every call), an API backbone's mean "
                      "latency recorded in the replay cache"}


def duration(seconds: float | None) -> str:
    """A wall time for the plan's table: unknown where no speed was measured."""
    if seconds is None:
        return "n/a"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def money(usd: float | None) -> str:
    return "no price" if usd is None else f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"
