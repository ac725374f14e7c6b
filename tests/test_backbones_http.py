"""OpenAI and Gemini backends through their real SDKs against loopback fake servers."""

from __future__ import annotations

import base64
import logging
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fake_servers import FakeGemini, FakeOpenAI, FakeResponse

from moviemem.backbones import Clip, assistant, load, system, tool_result, user
from moviemem.foundation.errors import MovieMemError

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000" "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
OPENAI_KEY = "sk-test-OPENAI-KEY-must-never-leak-1234"
GEMINI_KEY = "gm-test-GEMINI-KEY-must-never-leak-5678"
FAST = {"retry_initial_s": 0.05, "retry_max_s": 2.0}
SEARCH = {"type": "function", "function": {"name": "search", "description": "search the film",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                          "required": ["q"]}}}
SCHEMA = {"type": "object", "properties": {"choice": {"enum": ["A", "B", "C", "D"]}}, "required": ["choice"]}


def snake(obj):
    """Gemini bodies with every key in snake_case (the SDK mixes camelCase and snake_case)."""
    if isinstance(obj, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): snake(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [snake(v) for v in obj]
    return obj


def unb64(text: str) -> bytes:
    """Bytes from the SDK's url-safe base64."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("MOVIEMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)


@pytest.fixture()
def oai():
    with FakeOpenAI() as srv:
        yield srv


@pytest.fixture()
def gem():
    with FakeGemini() as srv:
        yield srv


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg is not installed")
    out = tmp_path_factory.mktemp("media") / "clip.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-f", "lavfi",
                    "-i", "sine=frequency=440", "-t", "4", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
                    "-shortest", str(out)], check=True)
    return out


# ----------------------------------------------------------------------------- OpenAI


def test_openai_text_image_usage_and_cost(oai):
    b = load("openai:gpt-5-mini", base_url=oai.base_url, **FAST)
    oai.push(FakeOpenAI.completion("B", prompt_tokens=1000, completion_tokens=10))
    reply = b.chat([system("Answer with a letter."), user("Which option?", images=[PNG])], max_tokens=16)
    assert reply.text == "B" and not reply.invalid
    u = reply.usage
    assert (u.input_tokens, u.output_tokens, u.images) == (1000, 10, 1)
    assert u.cost_usd == pytest.approx((1000 * 0.25 + 10 * 2.0) / 1e6) and u.latency_s > 0
    body = oai.requests[-1].json
    assert body["model"] == "gpt-5-mini" and body["max_completion_tokens"] == 16 and "temperature" not in body
    parts = body["messages"][1]["content"]
    assert parts[0]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert parts[1] == {"type": "text", "text": "Which option?"}
    assert oai.requests[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"


def test_openai_compatible_tools_round_trip_and_json_schema(oai):
    b = load(f"openai-compatible:{oai.base_url}#qwen2.5-vl", extra={"top_k": 1}, **FAST)
    assert b.name == f"openai-compatible:{oai.base_url}#qwen2.5-vl" and b.model_id.startswith("openai-compatible:")
    oai.push(FakeOpenAI.completion(None, [("search", {"q": "the letter"})]))
    first = b.chat([user("Who wrote the letter?")], tools=[SEARCH], tool_choice="required", temperature=0)
    assert first.finish_reason == "tool_calls" and first.tool_calls[0].arguments == {"q": "the letter"}
    body = oai.requests[-1].json
    assert body["tools"][0]["function"]["name"] == "search" and body["tool_choice"] == "required"
    assert body["max_tokens"] == 512 and body["temperature"] == 0 and body["top_k"] == 1
    oai.push(FakeOpenAI.completion('{"choice": "C"}'))
    second = b.chat([user("Who wrote the letter?"), assistant("", first.tool_calls),
                     tool_result(first.tool_calls[0].id, "Rick wrote it at 0:41:10")],
                    tools=[SEARCH], json_schema=SCHEMA)
    assert second.data == {"choice": "C"} and second.usage.cost_usd is None  # no price for a private server
    msgs = oai.requests[-1].json["messages"]
    assert msgs[1]["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"q": "the letter"}'}
    assert msgs[2] == {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "Rick wrote it at 0:41:10"}
    assert oai.requests[-1].json["response_format"]["json_schema"]["schema"] == SCHEMA


def test_openai_429_honours_retry_after(oai):
    b = load(f"openai-compatible:{oai.base_url}#m", **FAST)
    oai.push(FakeResponse(429, {"error": {"message": "rate limited"}}, headers={"retry-after": "1"}),
             FakeOpenAI.completion("done"))
    started = time.monotonic()
    reply = b.chat("hello")
    assert reply.text == "done" and time.monotonic() - started >= 1.0  # backoff alone would wait ~0.05 s
    assert len(oai.calls("/chat/completions")) == 2


def test_openai_500_then_timeout_then_success(oai):
    b = load(f"openai-compatible:{oai.base_url}#m", **FAST)
    oai.push(FakeResponse(500, {"error": {"message": "boom"}}), FakeResponse(body=FakeOpenAI.completion("late"), delay=1.5),
             FakeOpenAI.completion("third time"))
    reply = b.chat("hello", timeout=0.4)
    assert reply.text == "third time" and len(oai.calls("/chat/completions")) == 3


def test_a_timed_out_call_says_what_it_waited_for_and_which_setting_sets_it(oai):
    """Issue 48: "gave no reply ... ask again" never named the limit or how to change it."""
    b = load(f"openai-compatible:{oai.base_url}#m", timeout=1.0, max_attempts=2, **FAST)
    oai.push(*[FakeResponse(body=FakeOpenAI.completion("late"), delay=2.5) for _ in range(2)])
    reply = b.chat("hello")
    assert reply.invalid and reply.transient and reply.error.startswith("failed after 2 attempt(s)")
    assert reply.error.endswith("each attempt waited 1 s for the whole reply; raise backbone_timeout_s "
                                "($MOVIEMEM_BACKBONE_TIMEOUT_S) to wait longer"), reply.error


def test_connection_resets_are_retried(oai, gem):
    oai.push(FakeResponse(drop=True), FakeOpenAI.completion("after reset"))
    assert load(f"openai-compatible:{oai.base_url}#m", **FAST).chat("hello").text == "after reset"
    gem.push(FakeResponse(drop=True), FakeGemini.content("after reset"))
    assert load("gemini:gemini-2.5-flash", base_url=gem.url, **FAST).chat("hello").text == "after reset"
    assert len(oai.calls("/chat/completions")) == 2 and len(gem.calls(":generateContent")) == 2


def test_openai_exhausted_retries_and_malformed_bodies_give_invalid_replies(oai):
    b = load(f"openai-compatible:{oai.base_url}#m", max_attempts=2, **FAST)
    oai.push(FakeResponse(503, {"error": {"message": "down"}}), FakeResponse(503, {"error": {"message": "down"}}))
    down = b.chat("hello")
    assert down.invalid and down.transient and "503" in down.error and down.text == ""
    oai.push(FakeResponse(200, "this is { not json"))
    bad = b.chat("hello")
    assert bad.invalid and bad.transient and bad.raw == "this is { not json"  # a transport fault: asked again, never cached
    oai.push(FakeOpenAI.completion(None, [("search", "{not json at all")]))
    args = b.chat("hello", tools=[SEARCH])
    assert args.invalid and "arguments" in args.error and "not json at all" in args.raw
    oai.push(FakeOpenAI.completion("", finish_reason="length"))
    empty = b.chat("hello")
    assert empty.invalid and "length" in empty.error
    oai.push(FakeResponse(400, {"error": {"message": "context too long"}}))
    rejected = b.chat("hello")
    assert rejected.invalid and "400" in rejected.error


def test_openai_credentials_errors_are_user_errors(oai, monkeypatch):
    b = load(f"openai-compatible:{oai.base_url}#m", **FAST)
    oai.push(FakeResponse(401, {"error": {"message": "bad key"}}))
    with pytest.raises(MovieMemError, match="401"):
        b.chat("hello")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MovieMemError, match="OPENAI_API_KEY"):
        load("openai:gpt-5-mini", base_url=oai.base_url).chat("hello")


# ----------------------------------------------------------------------------- Gemini


def test_gemini_text_image_json_and_usage(gem):
    b = load("gemini:gemini-2.5-flash", base_url=gem.url, **FAST)
    gem.push(FakeGemini.content('{"choice": "A"}', prompt_tokens=2000, output_tokens=4, thoughts_tokens=6))
    reply = b.chat([system("Be brief."), user("Which option?", images=[PNG])], json_schema=SCHEMA, max_tokens=32)
    assert reply.data == {"choice": "A"} and reply.usage.output_tokens == 10  # thinking is billed as output
    assert reply.usage.cost_usd == pytest.approx((2000 * 0.30 + 10 * 2.50) / 1e6)
    req = gem.requests[-1]
    assert req.path.endswith("/models/gemini-2.5-flash:generateContent") and req.headers["x-goog-api-key"] == GEMINI_KEY
    body = snake(req.json)
    assert body["system_instruction"]["parts"][0]["text"] == "Be brief."
    image = body["contents"][0]["parts"][0]["inline_data"]
    assert unb64(image["data"]) == PNG and image["mime_type"] == "image/png"
    config = body["generation_config"]
    assert config["response_mime_type"] == "application/json" and config["response_json_schema"] == SCHEMA
    assert config["max_output_tokens"] == 32 and config["temperature"] == 0


def test_gemini_tool_calls_keep_thought_signatures(gem):
    b = load("gemini:gemini-3-flash", base_url=gem.url, **FAST)
    gem.push(FakeGemini.content(None, [("search", {"q": "letter"})], signature=base64.b64encode(b"sig").decode()))
    first = b.chat([user("Who wrote the letter?")], tools=[SEARCH])
    call = first.tool_calls[0]
    assert (call.name, call.arguments, call.signature) == ("search", {"q": "letter"}, base64.b64encode(b"sig").decode())
    gem.push(FakeGemini.content("Rick"))
    final = b.chat([user("Who wrote the letter?"), assistant("", first.tool_calls),
                    tool_result(call.id, {"hits": ["Rick wrote it"]})], tools=[SEARCH], tool_choice="search")
    assert final.text == "Rick"
    body = snake(gem.requests[-1].json)
    sent_call = body["contents"][1]["parts"][0]
    assert sent_call["function_call"]["name"] == "search" and sent_call["thought_signature"] == call.signature
    response = body["contents"][2]["parts"][0]["function_response"]
    assert response["name"] == "search" and response["response"] == {"result": {"hits": ["Rick wrote it"]}}
    assert body["tool_config"]["function_calling_config"] == {"mode": "ANY", "allowed_function_names": ["search"]}


def test_gemini_retries_and_invalid_replies(gem):
    b = load("gemini:gemini-2.5-flash", base_url=gem.url, max_attempts=3, **FAST)
    gem.push(FakeResponse(429, {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}},
                          headers={"retry-after": "1"}),
             FakeResponse(500, {"error": {"code": 500, "message": "oops", "status": "INTERNAL"}}),
             FakeGemini.content("ok"))
    started = time.monotonic()
    assert b.chat("hi").text == "ok" and time.monotonic() - started >= 1.0
    gem.push(FakeResponse(body=FakeGemini.content("slow"), delay=1.5), FakeGemini.content("fast"))
    assert b.chat("hi", timeout=0.4).text == "fast"
    gem.push(FakeResponse(200, "<html>gateway error</html>"))
    bad = b.chat("hi")
    assert bad.invalid and bad.raw == "<html>gateway error</html>" and bad.transient  # a transport fault: asked again, never cached
    gem.push({"candidates": [{"content": {"parts": []}, "finishReason": "SAFETY"}]})
    blocked = b.chat("hi")
    assert blocked.invalid and "SAFETY" in blocked.error


def test_gemini_video_inline_with_offsets(gem, video):
    b = load("gemini:gemini-2.5-flash", base_url=gem.url, **FAST)
    reply = b.chat([user("What happens?", video=Clip(video, 1.0, 3.5))])
    assert reply.usage.video_s == pytest.approx(2.5) and gem.uploads == 0
    part = snake(gem.requests[-1].json)["contents"][0]["parts"][0]
    assert unb64(part["inline_data"]["data"]) == video.read_bytes()
    assert part["inline_data"]["mime_type"] == "video/mp4"
    assert part["video_metadata"] == {"start_offset": "1.000s", "end_offset": "3.500s"}


def test_gemini_long_video_is_uploaded_once_and_reused(gem, video, monkeypatch):
    monkeypatch.setenv("MOVIEMEM_GEMINI_INLINE_MAX_BYTES", "1000")  # the test film counts as long
    monkeypatch.setenv("MOVIEMEM_GEMINI_INLINE_CLIP_MAX_S", "0")
    b = load("gemini:gemini-2.5-flash", base_url=gem.url, **FAST)
    b.chat([user("First clip?", video=Clip(video, 0.0, 2.0))])
    b.chat([user("Second clip?", video=Clip(video, 2.0, 4.0))])
    load("gemini:gemini-2.5-flash", base_url=gem.url).chat([user("Another backbone?", video=Clip(video, 1.0, 2.0))])
    assert gem.uploads == 1
    assert gem.files["s1"]["data"] == video.read_bytes()
    parts = [snake(r.json)["contents"][0]["parts"][0] for r in gem.calls(":generateContent")]
    assert {p["file_data"]["file_uri"] for p in parts} == {f"{gem.url}/v1beta/files/s1"}
    assert [p["video_metadata"]["start_offset"] for p in parts] == ["0.000s", "2.000s", "1.000s"]


def test_gemini_short_clip_of_a_long_film_is_cut_and_sent_inline(gem, video, monkeypatch):
    monkeypatch.setenv("MOVIEMEM_GEMINI_INLINE_MAX_BYTES", str(video.stat().st_size - 1))
    b = load("gemini:gemini-2.5-flash", base_url=gem.url, **FAST)
    b.chat([user("What happens?", video=Clip(video, 1.0, 2.0))])
    part = snake(gem.requests[-1].json)["contents"][0]["parts"][0]
    data = unb64(part["inline_data"]["data"])
    assert gem.uploads == 0 and 0 < len(data) < video.stat().st_size and "video_metadata" not in part


def test_gemini_needs_a_key(gem, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(MovieMemError, match="GEMINI_API_KEY"):
        load("gemini:gemini-2.5-flash", base_url=gem.url).chat("hi")


# ----------------------------------------------------------------------------- secrets


def test_no_api_key_in_cache_database_or_logs(oai, gem, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    o = load("openai:gpt-5-mini", base_url=oai.base_url, cache=cache, **FAST)
    g = load("gemini:gemini-2.5-flash", base_url=gem.url, cache=cache, **FAST)
    oai.push(FakeResponse(429, {"error": {"message": f"key {OPENAI_KEY} is rate limited"}}, headers={"retry-after": "0"}),
             FakeOpenAI.completion("hello"))
    gem.push(FakeResponse(500, {"error": {"code": 500, "message": "oops", "status": "INTERNAL"}}))
    assert o.chat("q").text == "hello" and g.chat("q").text == "q"
    assert o.chat("q").cached and g.chat("q").cached
    assert oai.requests[-1].headers["authorization"].endswith(OPENAI_KEY)  # the key was used ...
    blobs = b"".join(p.read_bytes() for p in cache.iterdir() if p.is_file())
    logs = caplog.text + "".join(str(r.args) for r in caplog.records)
    for key in (OPENAI_KEY, GEMINI_KEY):  # ... and is nowhere we write
        assert key.encode() not in blobs and key not in logs
    assert "rate limited" in caplog.text  # the retry was logged, with the key redacted
