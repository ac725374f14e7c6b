"""`send(Request)` is the one call: every wrapper and every batch passes the whole request on.

Before this, three paths rebuilt calls by hand through `chat(...)` and lost fields: structured
JSON asks (and captioning batches) dropped `timeout`, `seed` and `tools` for a backbone without
`send`, and the seeded sampler of the ACE policy seeded only `chat`, so a caller using `send`
lost its seed. A minimal third-party backbone (the protocol only: `send`) sees them all now."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from moviemem.agents.policies.ace import SampledBackbone
from moviemem.backbones import Backbone, Capabilities, ReplayCache, Reply, Request, send_all, user
from moviemem.backbones.structured import Ask, ask_json
from moviemem.eval.budget import Budget, MeteredBackbone


@dataclass
class Recorder:
    """A backbone with nothing but the protocol: it records each request it is sent."""

    name: str = "recorder"
    model_id: str = "recorder-1"
    capabilities: Capabilities = field(default_factory=Capabilities.all)
    seen: list[Request] = field(default_factory=list)

    def send(self, request: Request) -> Reply:
        self.seen.append(request)
        return Reply(text='{"ok": true}', data={"ok": True})


def test_a_protocol_only_backbone_is_a_backbone():
    assert isinstance(Recorder(), Backbone)


def test_structured_asks_keep_their_timeout():
    rec = Recorder()
    asks = [Ask("a", [user("first?")]), Ask("b", [user("second?")])]
    answers = ask_json(rec, asks, {"type": "object"}, max_tokens=16, timeout=7.5)
    assert [a.data for a in answers] == [{"ok": True}] * 2
    assert [r.timeout for r in rec.seen] == [7.5, 7.5]


def test_batches_pass_every_field_on():
    rec = Recorder()
    req = Request.build([user("q")], tools=[{"name": "search", "description": "find", "parameters": {"type": "object"}}],
                        seed=11, timeout=3.0, logprobs=5, max_tokens=9)
    done: list[int] = []
    send_all(rec, [req, req], on_reply=lambda n, _: done.append(n))
    assert rec.seen == [req, req] and done == [1, 2]


def test_the_sampler_seeds_send_as_well_as_chat():
    rec = Recorder()
    sampled = SampledBackbone(rec, seed=3, temperature=0.7)
    sampled.send(Request.build([user("q")], temperature=0.0))
    sampled.chat([user("q")])
    assert [(r.seed, r.temperature) for r in rec.seen] == [(3, 0.7), (3, 0.7)]


def test_wrappers_declare_what_they_offer(tmp_path):
    """No implicit attribute forwarding: a wrapper keeps the inner backbone's identity and
    scheduling, passes requests through unchanged, and has no attribute it does not declare."""
    rec = Recorder()
    for wrapper in (ReplayCache(rec, tmp_path / "c.sqlite", "off"), MeteredBackbone(rec, Budget(), "rec"),
                    SampledBackbone(rec, 1, 0.0)):
        assert (wrapper.model_id, wrapper.capabilities, wrapper.sequential, wrapper.concurrency) == \
            ("recorder-1", rec.capabilities, False, 4)
        with pytest.raises(AttributeError):
            wrapper.seen  # noqa: B018 - the attribute access is the assertion
    cache = ReplayCache(rec, tmp_path / "c.sqlite", "readwrite")
    req = Request.build([user("q")], timeout=2.0, seed=5)
    cache.send(req)
    assert rec.seen[-1] == req and cache.send(req).cached
