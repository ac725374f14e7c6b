"""Backbone protocol, messages, usage, pricing, registry (decorator and entry points), scripted backbone."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from moviemem import register
from moviemem.backbones import (
    Backbone,
    Capabilities,
    Clip,
    Image,
    Reply,
    Request,
    ScriptedBackbone,
    Text,
    ToolCall,
    Usage,
    assistant,
    list_backbones,
    load,
    normalise_messages,
    pricing,
    registry,
    system,
    tool_result,
    user,
)
from moviemem.backbones.base import SendBackbone
from moviemem.foundation.errors import MovieMemError

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def test_dataclass_and_dict_messages_normalise_to_the_same_request():
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    ours = Request.build([system("s"), user("look", images=[PNG]), assistant("", [ToolCall("c1", "search", {"q": 1})]),
                          tool_result("c1", {"hits": 2})], tools=tools)
    data_url = "data:image/png;base64," + __import__("base64").b64encode(PNG).decode()
    dicts = Request.build([
        {"role": "developer", "content": "s"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}, {"type": "text", "text": "look"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "other-id", "type": "function", "function": {"name": "search", "arguments": '{"q": 1}'}}]},
        {"role": "tool", "tool_call_id": "other-id", "content": '{"hits": 2}'},
    ], tools=[{"name": "search", "parameters": {"type": "object"}}])
    assert ours.fingerprint() == dicts.fingerprint()  # call ids differ, content does not
    tool_msg = dicts.messages[-1]
    assert tool_msg.name == "search"  # tool results learn the name of the call they answer
    assert isinstance(dicts.messages[1].parts[0], Image) and dicts.messages[1].parts[0].mime_type() == "image/png"


def test_bare_string_and_bad_messages():
    assert normalise_messages("hi")[0].parts == (Text("hi"),)
    with pytest.raises(MovieMemError, match="role"):
        normalise_messages([{"role": "wizard", "content": "x"}])
    with pytest.raises(MovieMemError, match="at least one"):
        normalise_messages([])
    with pytest.raises(MovieMemError, match="tool_choice"):
        Request.build("x", tools=[{"name": "a"}], tool_choice="b")


def test_usage_sums_and_cost_unknown_stays_none():
    a = Usage(input_tokens=10, output_tokens=2, images=1, latency_s=0.5, cost_usd=0.25)
    b = Usage(input_tokens=5, output_tokens=1, video_s=3.0, latency_s=0.25)
    total = sum([a, b])
    assert (total.input_tokens, total.output_tokens, total.images, total.video_s) == (15, 3, 1, 3.0)
    assert total.cost_usd == 0.25 and total.latency_s == 0.75 and total.total_tokens == 18
    assert (Usage() + Usage()).cost_usd is None


def test_price_table_prefix_match_and_user_override(tmp_path, monkeypatch):
    prices = pricing.load_prices()
    p = pricing.price_for("gpt-5-mini-2025-08-07", prices)
    assert p is not None and p.input_per_mtok == prices["gpt-5-mini"].input_per_mtok
    assert pricing.price_for("someone-elses-model", prices) is None
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cached_input_tokens=500_000)
    expected = 0.5 * p.input_per_mtok + 0.5 * p.cached_input_per_mtok + p.output_per_mtok
    assert pricing.cost("gpt-5-mini", usage, prices) == pytest.approx(expected)

    override = tmp_path / "prices.toml"
    override.write_text('[models."my-vlm"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\nper_video_s = 0.01\n'
                        '[models."gpt-5-mini"]\ninput_per_mtok = 100.0\noutput_per_mtok = 0.0\n')
    monkeypatch.setenv("MOVIEMEM_PRICES", str(override))
    table = pricing.load_prices()
    assert table["gpt-5-mini"].input_per_mtok == 100.0 and "gemini-2.5-flash" in table
    assert pricing.cost("my-vlm", Usage(input_tokens=1000, video_s=10), table) == pytest.approx(0.001 + 0.1)
    # a backbone picks the override up: its replies carry the overridden cost
    b = ScriptedBackbone(["ok"], model_id="my-vlm")
    b.price_key = "my-vlm"
    assert b.chat("1234").usage.cost_usd == pytest.approx(1 / 1e6 + 1 * 2 / 1e6)
    monkeypatch.setenv("MOVIEMEM_PRICES", str(tmp_path / "missing.toml"))
    with pytest.raises(MovieMemError, match="does not exist"):
        pricing.load_prices()


def test_scripted_backbone_records_requests_and_validates_json():
    b = load("scripted", replies=['{"choice": "B"}', "The answer is B", '{"other": 1}', "", {"tool_calls": [
        {"name": "search", "arguments": {"q": "x"}}]}])
    schema = {"type": "object", "properties": {"choice": {"enum": ["A", "B"]}}, "required": ["choice"]}
    ok = b.chat([user("Q?")], json_schema=schema, max_tokens=8)
    assert ok.data == {"choice": "B"} and not ok.invalid and ok.usage.cost_usd == 0.0
    prose = b.chat([user("Q?")], json_schema=schema)
    assert prose.invalid and prose.error == "reply is not JSON" and prose.raw == "The answer is B" and prose.data is None
    wrong = b.chat([user("Q?")], json_schema=schema)
    assert wrong.invalid and "missing 'choice'" in wrong.error
    empty = b.chat([user("Q?")])
    assert empty.invalid and empty.error.startswith("empty reply")
    tool = b.chat([user("find x")], tools=[{"name": "search"}])
    assert tool.tool_calls[0].name == "search" and tool.finish_reason == "tool_calls"
    assert [r.max_tokens for r in b.calls][:1] == [8] and b.calls[-1].tools[0].name == "search"
    with pytest.raises(MovieMemError, match="ran out of replies"):
        b.chat("one more")


def test_provider_errors_are_retried_then_reported_not_raised():
    class Flaky(Exception):
        status_code = 503

    b = ScriptedBackbone([Flaky("busy"), "fine"], max_attempts=3)
    assert b.chat("x").text == "fine"
    b = ScriptedBackbone([Flaky("busy")] * 2, max_attempts=2)
    reply = b.chat("x")
    assert reply.invalid and reply.transient and "HTTP 503" in reply.error and reply.usage.cost_usd is None

    class Unauthorised(Exception):
        status_code = 401

    with pytest.raises(MovieMemError, match="HTTP 401"):
        ScriptedBackbone([Unauthorised("bad key")]).chat("x")


def test_capabilities_are_enforced(tmp_path):
    b = ScriptedBackbone(["x"], capabilities={"images": False, "video": False})
    with pytest.raises(MovieMemError, match="does not take images"):
        b.chat([user("look", images=[PNG])])
    with pytest.raises(MovieMemError, match="does not take video"):
        b.chat([user("watch", video=Clip(tmp_path / "f.mp4", 0, 1))])
    with pytest.raises(MovieMemError, match="unknown capability"):
        Capabilities().with_overrides({"smell": True})


def test_chat_many_orders_local_requests_by_shared_prefix_and_keeps_result_order():
    b = ScriptedBackbone(lambda r: r.messages[-1].text)
    b.sequential = True
    ctx_a, ctx_b = "film A transcript " * 20, "film B transcript " * 20
    reqs = [{"messages": [system(ctx_a), user("q1")]}, {"messages": [system(ctx_b), user("q2")]},
            {"messages": [system(ctx_a), user("q3")]}]
    replies = b.chat_many(reqs)
    assert [r.text for r in replies] == ["q1", "q2", "q3"]
    sent = [r.messages[-1].text for r in b.calls]
    assert sent == ["q1", "q3", "q2"]  # both film-A questions back to back


def test_register_decorator_and_listing():
    @register("backbone", "echo-test", description="echoes", capabilities=Capabilities(text=True))
    class Echo(SendBackbone):
        def __init__(self, arg, **options):
            self.name = f"echo-test:{arg}"
            self.model_id = "echo"
            self.capabilities = Capabilities(text=True)
            self.prefix = options.get("prefix", "")

        def send(self, request):
            return Reply(text=self.prefix + request.messages[-1].text)

    try:
        b = load("echo-test:x", prefix="> ")
        assert isinstance(b, Backbone) and b.chat("hi").text == "> hi"
        listing = {d["name"]: d for d in json.loads(json.dumps(list_backbones()))}
        assert listing["echo-test"]["description"] == "echoes"
        assert {"openai", "openai-compatible", "gemini", "llamacpp", "local", "local-small", "scripted"} <= set(listing)
        assert listing["gemini"]["capabilities"]["video"] is True and listing["local"]["capabilities"]["images"] is False
        with pytest.raises(MovieMemError, match="unknown backbone"):
            load("nope:x")
        with pytest.raises(MovieMemError, match="bad options"):
            load("openai:gpt-5-mini", no_such_option=1)
    finally:
        registry.BACKBONES._entries.pop("echo-test", None)


def test_entry_point_plugin_is_loaded_without_touching_moviemem(tmp_path, monkeypatch):
    (tmp_path / "mm_plugin_demo.py").write_text(textwrap.dedent('''
        """A demo plugin backbone."""
        from moviemem.backbones import ScriptedBackbone

        def make(arg, **options):
            """Demo plugin: always says its argument."""
            return ScriptedBackbone(lambda request: f"plugin says {arg}", name=f"demo-plugin:{arg}")
    '''))
    dist = tmp_path / "mm_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mm-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[moviemem.backbones]\ndemo-plugin = mm_plugin_demo:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.BACKBONES, "_discovered", False)
    try:
        assert load("demo-plugin:hello").chat("x").text == "plugin says hello"
        entry = next(d for d in list_backbones() if d["name"] == "demo-plugin")
        assert entry["source"].startswith("entry point") and "Demo plugin" in entry["description"]
    finally:
        registry.BACKBONES._entries.pop("demo-plugin", None)
        sys.modules.pop("mm_plugin_demo", None)


def test_concurrency_limit_per_backbone():
    import threading
    import time as _time

    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def slow(request):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        _time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return "ok"

    b = ScriptedBackbone(slow, concurrency=2)
    threads = [threading.Thread(target=b.chat, args=(f"q{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(b.calls) == 8 and state["peak"] == 2
