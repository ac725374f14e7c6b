"""The OpenAI-compatible gateway over HTTP, with the openai SDK as the client."""

from __future__ import annotations

import json

import httpx
import numpy as np
import openai
import pytest

from moviemem.backbones import ScriptedBackbone, start_gateway
from moviemem.foundation.errors import MovieMemError

LOOK = {"type": "function", "function": {"name": "archival_memory_search", "description": "search captions",
                                          "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                         "required": ["query"]}}}


def script(request):
    last = request.messages[-1]
    if request.tools and last.role == "user":
        return {"tool_calls": [{"name": "archival_memory_search", "arguments": {"query": last.text}}]}
    if last.role == "tool":
        return f"found: {last.text}"
    return last.text


@pytest.fixture(scope="module")
def embedder():
    from moviemem.models.embedder import get_embedder

    try:
        return get_embedder("minilm")
    except MovieMemError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gateway(embedder):
    backbone = ScriptedBackbone(script, name="scripted-gw")
    with start_gateway(backbone, embedder) as gw:
        gw.backbone = backbone
        yield gw


@pytest.fixture()
def client(gateway):
    return openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)


def test_models_and_plain_chat(client, gateway):
    assert gateway.url.startswith("http://127.0.0.1:")
    assert {m.id for m in client.models.list()} == {"scripted-gw", "minilm"}
    r = client.chat.completions.create(model="scripted-gw", messages=[{"role": "system", "content": "be brief"},
                                                                      {"role": "user", "content": "hello gateway"}])
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.content == "hello gateway" and r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_tool_loop_in_openai_wire_format(client, gateway):
    messages = [{"role": "user", "content": "who wrote the letter"}]
    first = client.chat.completions.create(model="scripted-gw", messages=messages, tools=[LOOK], tool_choice="auto")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id and call.function.name == "archival_memory_search"
    assert json.loads(call.function.arguments) == {"query": "who wrote the letter"}  # a JSON string, as OpenAI sends
    sent = gateway.backbone.calls[-1]
    assert sent.tools[0].name == "archival_memory_search" and sent.tools[0].parameters["required"] == ["query"]
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Rick, at 0:41:10"}]
    second = client.chat.completions.create(model="scripted-gw", messages=messages, tools=[LOOK])
    assert second.choices[0].message.content == "found: Rick, at 0:41:10"
    tool_msg = gateway.backbone.calls[-1].messages[-1]
    assert tool_msg.role == "tool" and tool_msg.name == "archival_memory_search" and tool_msg.tool_call_id == call.id


def test_json_response_format_and_streaming(client, gateway):
    schema = {"type": "object", "properties": {"choice": {"type": "string"}}, "required": ["choice"]}
    r = client.chat.completions.create(model="scripted-gw", messages=[{"role": "user", "content": '{"choice": "B"}'}],
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "answer", "schema": schema}},
                                       max_tokens=20, temperature=0.2)
    assert json.loads(r.choices[0].message.content) == {"choice": "B"}
    sent = gateway.backbone.calls[-1]
    assert (sent.json_schema, sent.max_tokens, sent.temperature) == (schema, 20, 0.2)
    chunks = list(client.chat.completions.create(model="scripted-gw", stream=True, stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": "streamed"}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed" and chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].usage.total_tokens > 0


def test_embeddings_match_the_embedder(client, embedder):
    texts = ["Rick writes a letter.", "Ilsa leaves on the plane."]
    r = client.embeddings.create(model="minilm", input=texts)  # the SDK asks for base64 and decodes it
    direct = embedder.embed(texts)
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    assert got.shape == (2, 384) and np.allclose(got, direct, atol=1e-6)
    assert r.usage.prompt_tokens >= 10 and r.model == "minilm"
    floats = client.embeddings.create(model="minilm", input="one", encoding_format="float")
    assert np.allclose(floats.data[0].embedding, embedder.embed(["one"])[0], atol=1e-6)


def test_errors_use_the_openai_error_shape(client, gateway):
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="scripted-gw", messages="not a list")  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="token arrays"):
        client.embeddings.create(model="minilm", input=[[1, 2, 3]], encoding_format="float")
    raw = httpx.post(f"{gateway.base_url}/chat/completions", json={"messages": [], "n": 3})
    assert raw.status_code == 400 and set(raw.json()["error"]) >= {"message", "type"}


def test_out_of_range_requests_are_refused_before_the_model_runs(gateway):
    """Sizes and numbers a client sends are bounded where they enter: each is a 400 naming the field."""
    hi = [{"role": "user", "content": "hi"}]
    calls = len(gateway.backbone.calls)
    cases = {
        "temperature": {"messages": hi, "temperature": "nan"},  # float("nan") passes every comparison-free check
        "max_tokens": {"messages": hi, "max_tokens": 10**12},
        "tools": {"messages": hi, "tools": "junk"},
    }
    for field, body in cases.items():
        raw = httpx.post(f"{gateway.base_url}/chat/completions", json={"model": "scripted-gw", **body})
        assert raw.status_code == 400 and field in raw.json()["error"]["message"], (field, raw.text)
    assert len(gateway.backbone.calls) == calls
    from moviemem.backbones.gateway import MAX_EMBED_INPUTS

    raw = httpx.post(f"{gateway.base_url}/embeddings", json={"model": "minilm", "input": ["a"] * (MAX_EMBED_INPUTS + 1)})
    assert raw.status_code == 400 and f"at most {MAX_EMBED_INPUTS}" in raw.json()["error"]["message"]


def test_upstream_failures_are_502_and_usage_is_counted(embedder):
    class Down(Exception):
        status_code = 503

    with start_gateway(ScriptedBackbone([Down("down")], max_attempts=1), None) as gw:
        c = openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502
        with pytest.raises(openai.NotFoundError, match="no embedder"):
            c.embeddings.create(model="minilm", input="x")
        usage = httpx.get(f"{gw.base_url}/usage").json()
        assert usage["requests"] == 2 and usage["errors"] == 2


def test_gateway_counts_tokens_served(client, gateway):
    before = gateway.stats()
    r = client.chat.completions.create(model="scripted-gw", messages=[{"role": "user", "content": "count me please"}])
    e = client.embeddings.create(model="minilm", input=["count me"])
    after = httpx.get(f"{gateway.base_url}/usage").json()
    assert after["prompt_tokens"] - before["prompt_tokens"] == r.usage.prompt_tokens
    assert after["completion_tokens"] - before["completion_tokens"] == r.usage.completion_tokens
    assert after["embedding_tokens"] - before["embedding_tokens"] == e.usage.prompt_tokens


def test_gateway_over_the_real_local_model():
    pytest.importorskip("llama_cpp")
    try:
        gw = start_gateway("local-small", None)
    except MovieMemError as exc:
        pytest.skip(str(exc))
    with gw:
        c = openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)
        r = c.chat.completions.create(model="local-small", messages=[{"role": "user", "content": "Search for the letter."}],
                                      tools=[LOOK], tool_choice="required", max_tokens=40)
        call = r.choices[0].message.tool_calls[0]
        assert call.function.name == "archival_memory_search" and "query" in json.loads(call.function.arguments)
        assert r.choices[0].finish_reason == "tool_calls" and r.usage.prompt_tokens > 20
