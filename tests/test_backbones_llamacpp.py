"""The llama.cpp backend against the real SmolLM2-135M model (`local-small`)."""

from __future__ import annotations

import pytest

from moviemem.backbones import Request, load, system, user
from moviemem.backbones.base import Tool
from moviemem.backbones.llamacpp_backend import LlamaCppBackbone, parse_tool_calls
from moviemem.backbones.pace import Pace, PaceBook
from moviemem.foundation.errors import MovieMemError

pytest.importorskip("llama_cpp")

CONTEXT = ("Transcript of the film. " + " ".join(
    f"[{m}:00] Rick says the letter arrived in scene {m}." for m in range(1, 13)))
SCHEMA = {"type": "object", "properties": {"choice": {"type": "string", "enum": ["A", "B", "C", "D"]}},
          "required": ["choice"]}
LOOK = {"type": "function", "function": {"name": "look_at", "description": "look at the film at a time",
                                          "parameters": {"type": "object",
                                                         "properties": {"seconds": {"type": "integer"}},
                                                         "required": ["seconds"]}}}


@pytest.fixture(scope="module")
def small() -> LlamaCppBackbone:
    try:
        b = load("local-small", n_ctx=2048)
    except MovieMemError as exc:
        pytest.skip(str(exc))
    assert isinstance(b, LlamaCppBackbone)
    return b


def test_deterministic_at_temperature_zero_and_counts_usage(small):
    msgs = [system("You are terse."), user("Name a colour.")]
    a = small.chat(msgs, max_tokens=12)
    b = small.chat(msgs, max_tokens=12)
    assert a.text and a.text == b.text and not a.invalid
    assert a.usage.input_tokens > 5 and 0 < a.usage.output_tokens <= 12 and a.usage.cost_usd == 0.0
    assert b.usage.cached_input_tokens > 0  # the same prompt is not read twice
    assert small.model_id.startswith("llamacpp:model.gguf:") and small.name == "local-small"


def test_json_schema_is_enforced_by_grammar(small):
    reply = small.chat([user("Which is an animal? A) cat B) car C) cup D) cap. Reply in JSON.")],
                       json_schema=SCHEMA, max_tokens=24)
    assert not reply.invalid and reply.data["choice"] in {"A", "B", "C", "D"}


def test_forced_tool_call_has_schema_valid_arguments(small):
    reply = small.chat([user("Look at the film at 41 seconds.")], tools=[LOOK], tool_choice="required", max_tokens=40)
    assert reply.finish_reason == "tool_calls" and len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call.name == "look_at" and isinstance(call.arguments["seconds"], int) and call.id.startswith("call_")


def test_tools_reach_a_template_without_tool_support(small):
    # SmolLM2's template ignores `tools`, so the instructions go into the system prompt
    prompt = small.prompt(Request.build([system("Be brief."), user("hi")], tools=[LOOK]))
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools") and '"look_at"' in prompt


def test_questions_over_one_context_reuse_the_prompt_cache(small):
    film_a, film_b = CONTEXT, CONTEXT.replace("Rick", "Ilsa")
    reqs = [{"messages": [system(film_a), user("When did the letter arrive?")], "max_tokens": 3},
            {"messages": [system(film_b), user("When did the letter arrive?")], "max_tokens": 3},
            {"messages": [system(film_a), user("Who talks about a letter?")], "max_tokens": 3}]
    replies = small.chat_many(reqs)
    assert all(r.usage.input_tokens > 150 for r in replies)
    # run in prefix order (A, A, B): the second film-A question re-reads only its own tail
    assert replies[2].usage.input_tokens - replies[2].usage.cached_input_tokens < 20
    assert replies[1].usage.cached_input_tokens < 20  # film B diverges at its first name
    # back to film A after B: its KV state comes back from the RAM prompt cache
    again = small.chat([system(film_a), user("What arrived?")], max_tokens=3)
    assert again.usage.input_tokens - again.usage.cached_input_tokens < 20


def test_prompt_larger_than_the_context_is_an_invalid_reply(small):
    from moviemem.backbones.types import CONTEXT

    reply = small.chat([user("word " * 3000)], max_tokens=4)
    assert reply.invalid and "context holds 2048" in reply.error and reply.finish_reason == CONTEXT


def test_the_context_defaults_to_what_the_model_was_trained_for(small):
    from moviemem.backbones.llamacpp_backend import trained_context

    b = LlamaCppBackbone(small.path)  # no n_ctx: the llm_context setting, 0 by default
    assert "ctxtrained" in b.model_id  # read from the file when first needed, so making a backbone opens nothing
    assert b.n_ctx == trained_context(small.path) == 8192  # SmolLM2's own length
    with pytest.raises(MovieMemError, match="holds no prompt"):
        LlamaCppBackbone(small.path, n_ctx=100)


def test_flash_attention_is_on_by_default_and_named_in_the_model_id(small, monkeypatch):
    """Its sums differ in the last bits, so a replay cache must never answer one kernel with the other's reply."""
    on = LlamaCppBackbone(small.path, n_ctx=512)
    assert on.flash and on.model_id.endswith(":fa")
    assert on.chat([user("Say yes.")], max_tokens=2).text  # the kernel loads and answers
    monkeypatch.setenv("MOVIEMEM_LLM_FLASH_ATTN", "false")
    off = LlamaCppBackbone(small.path, n_ctx=512)
    assert not off.flash and ":fa" not in off.model_id and off.model_id != on.model_id
    monkeypatch.setenv("MOVIEMEM_LLM_KV_TYPE", "q8_0")  # a quantised KV cache needs it, whatever the setting
    q8 = LlamaCppBackbone(small.path, n_ctx=512)
    assert q8.flash and q8.model_id.endswith(":kv-q8_0")


def test_the_model_runs_in_a_child_process_by_default(small):
    """The parent never holds llama.cpp (a native crash there would end it): the worker answers."""
    assert small.isolate
    with pytest.raises(MovieMemError, match="child process"):
        small.model()
    worker = small.worker()
    assert worker.proc.poll() is None and worker.proc.pid != __import__("os").getpid()


def test_tool_call_parsing():
    tools = (Tool("look_at"), Tool("search"))
    text, calls = parse_tool_calls('Let me check.\n<tool_call>\n{"name": "look_at", "arguments": {"seconds": 4}}\n'
                                   '</tool_call>\n<tool_call>{"name": "search", "arguments": "{\\"q\\": \\"x\\"}"}',
                                   tools)
    assert text == "Let me check." and [(c.name, c.arguments) for c in calls] == [("look_at", {"seconds": 4}),
                                                                                 ("search", {"q": "x"})]
    assert parse_tool_calls('{"name": "unknown", "arguments": {}}', tools)[1] == []
    assert parse_tool_calls("The answer is B.", tools) == ("The answer is B.", [])


def test_timeout_gives_an_invalid_reply_with_partial_text(small):
    reply = small.chat([user("Count from 1 to 100.")], max_tokens=64, timeout=1e-6)
    assert reply.invalid and reply.error.startswith("timed out") and reply.finish_reason == "timeout"
    assert reply.transient  # a time limit depends on machine load: the replay cache must not keep it


def test_time_limit_follows_the_work_at_the_measured_speeds() -> None:
    """Issue 48: one fixed limit cut a long prompt off on every try. The limit is twice the time the
    prompt's tokens and the reply's take at the speeds measured here, never under backbone_timeout_s;
    an unmeasured part gets the floor of its own."""
    measured = Pace(read_tok_s=50.0, write_tok_s=5.0)
    limit, how = measured.limit(120.0, 5000, 100)
    assert limit == 2 * (5000 / 50 + 100 / 5) == 240.0
    assert "5,000 prompt tokens read at 50 tokens/s measured, x2" in how and "backbone_timeout_s" in how
    assert measured.limit(120.0, 200, 16)[0] == 120.0  # a short call: the floor
    assert Pace(write_tok_s=5.0).limit(120.0, 5000, 100)[0] == 120.0 + 40.0


def test_speeds_are_measured_and_kept_for_the_next_process(tmp_path) -> None:
    book = PaceBook(tmp_path / "pace.json")
    book.record("m", read=1000, read_s=10.0, written=5, write_s=1.0)  # too few reply tokens to measure
    assert book.get("m") == Pace(read_tok_s=100.0, write_tok_s=None)
    book.record("m", read=1000, read_s=5.0, written=100, write_s=10.0)
    assert PaceBook(tmp_path / "pace.json").get("m") == Pace(read_tok_s=150.0, write_tok_s=10.0)


def test_a_prompt_already_read_is_not_thrown_away_for_the_time_it_took(monkeypatch) -> None:
    """llama.cpp reads a prompt in one call no deadline can interrupt: a reading slower than foreseen
    (a busy machine) still leaves the reply its own share, and the message says what was waited for."""
    from moviemem.backbones import llamacpp_backend

    now = [100.0]
    monkeypatch.setattr(llamacpp_backend.time, "perf_counter", lambda: now[0])
    clock = llamacpp_backend._Clock(100.0, 60.0, "how", reply_share=30.0)
    now[0] = 190.0  # the first stop check: the prompt took 90 s, past the 60 s limit
    assert not clock.stop(None, None) and clock.limit == 120.0
    now[0] = 221.0
    assert clock.stop(None, None)
    why = clock.why(121.0, 4800, 5000, 7, 256)
    assert why.startswith("timed out after 121 s: read 4,800 new of 5,000 prompt tokens in 90 s, then wrote 7 of up to "
                          "256 reply tokens; the limit was 120 s (how)")
    assert why.endswith("raise backbone_timeout_s ($MOVIEMEM_BACKBONE_TIMEOUT_S) to wait longer")
    fixed = llamacpp_backend._Clock(100.0, 60.0, "the request's own limit")  # a caller's limit is kept
    now[0] = 190.0
    assert fixed.stop(None, None)


def test_a_real_call_records_its_speeds(small, tmp_path) -> None:
    here = LlamaCppBackbone(small.path, n_ctx=2048, isolate=False)  # the engine itself, in this process
    here.paces = PaceBook(tmp_path / "pace.json")
    here.chat([user(CONTEXT + " Count from 1 to 40.")], max_tokens=48)
    pace = here.paces.get(here.pace_key)
    assert pace.read_tok_s and pace.read_tok_s > 0


def test_prompt_cache_is_bounded_by_what_its_states_really_hold():
    """llama-cpp-python's RAM cache counts only the KV state; each state also copies up to
    n_batch x vocabulary logits. Ours counts both, so a long run cannot grow without bound."""
    import llama_cpp
    import numpy as np

    from moviemem.backbones.llamacpp_backend import _RAMCache

    class State:
        def __init__(self):
            self.llama_state_size = 1_000
            self.scores = np.zeros((512, 1_000), dtype=np.float32)  # 2,048,000 bytes
            self.input_ids = np.zeros(512, dtype=np.intc)

    cache = _RAMCache(llama_cpp.LlamaRAMCache, capacity_bytes=5_000_000)
    for i in range(6):
        cache[(i, i + 1)] = State()
    assert len(cache.cache_state) == 2 and cache.cache_size <= 5_000_000  # the stock class kept all 6
    assert list(cache.cache_state) == [(4, 5), (5, 6)]  # least recently used evicted first


def test_real_model_prompt_cache_stays_within_capacity():
    try:
        b = LlamaCppBackbone(load("local-small").path, n_ctx=1024, cache_bytes=300_000_000, isolate=False)
    except MovieMemError as exc:
        pytest.skip(str(exc))
    cache = b.model().llm.cache  # the llama.cpp cache this backbone set
    for i in range(5):
        b.chat([user(f"Count to {i + 3} in words, film number {i * 7919}.")], max_tokens=4)
    assert cache is not None and 0 < len(cache.cache_state) and cache.cache_size <= 300_000_000


def test_next_token_log_probabilities_reuse_the_prompt_prefix(small: LlamaCppBackbone) -> None:
    assert small.capabilities.logprobs
    q = [user("Answer with one letter. Which comes first in the alphabet, A or B?")]
    first = small.chat(q, max_tokens=1, logprobs=5)
    alts = first.logprobs[0]
    assert len(alts) == 5 and all(v <= 0 for v in alts.values())
    assert first.text == next(iter(alts)).strip() and first.usage.output_tokens == 1
    again = small.chat(q, max_tokens=1, logprobs=5)  # the prompt is in the context: only its last token is read again
    assert again.usage.cached_input_tokens == again.usage.input_tokens - 1
    assert set(again.logprobs[0]) & set(alts)
    with pytest.raises(MovieMemError, match="between 0 and 20"):
        small.chat(q, max_tokens=1, logprobs=21)
