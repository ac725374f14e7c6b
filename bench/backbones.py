"""Backbone figures: replay-cache lookup latency, local model throughput, gateway overhead.

    .venv/bin/python bench/backbones.py [--skip-local] [--models local-small,local] [--json]

- cache: p50/p95 of a cache hit through ReplayCache.chat (normalise, key, SQLite read,
  decode) for requests carrying a 20 kB transcript, with 5,000 entries in the database.
- local models: prompt and generation tokens/s from llama.cpp's own counters (fresh
  prompt, no reuse), and the wall time of a second question over the same context.
- gateway: median time of a chat through the gateway (openai SDK over loopback HTTP)
  minus a direct call to the same (scripted) backbone.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_cache(entries: int = 5000, lookups: int = 2000) -> dict[str, float]:
    from moviemem.backbones import ReplayCache, ScriptedBackbone, system, user

    transcript = " ".join(f"[{i // 60}:{i % 60:02d}] line {i} of dialogue about the letter." for i in range(400))
    with tempfile.TemporaryDirectory() as tmp:
        cache = ReplayCache(ScriptedBackbone(lambda r: '{"choice": "B"}'), Path(tmp) / "c", "readwrite")
        for i in range(entries):
            cache.chat([system(transcript), user(f"Question {i}: who wrote the letter?")], max_tokens=32)
        times = []
        for i in range(lookups):
            msgs = [system(transcript), user(f"Question {i % entries}: who wrote the letter?")]
            t = time.perf_counter()
            reply = cache.chat(msgs, max_tokens=32)
            times.append(time.perf_counter() - t)
            assert reply.cached
        size = sum(p.stat().st_size for p in Path(tmp, "c").iterdir())
    return {"entries": entries, "lookups": lookups, "request_chars": len(transcript),
            "p50_ms": pct(times, 0.5) * 1e3, "p95_ms": pct(times, 0.95) * 1e3, "db_mb": size / 1e6}


def bench_local(spec: str, prompt_words: int, gen_tokens: int, repeats: int) -> dict[str, object]:
    from moviemem.backbones import load, system, user

    t = time.perf_counter()
    b = load(spec)
    b.model()  # type: ignore[attr-defined]
    load_s = time.perf_counter() - t
    context = " ".join(f"Scene {i}: Rick hands Ilsa the letter and walks to the plane." for i in range(prompt_words // 11))
    prompt_tps, gen_tps, first_s = [], [], []
    for r in range(repeats):  # a nonce first: nothing of the prompt is in the KV cache
        reply = b.chat([system(f"Run {r}-{time.time()}. You summarise films.\n{context}"),
                        user("Count from 1 to 200, separated by commas.")], max_tokens=gen_tokens)
        perf = b.last_perf  # type: ignore[attr-defined]
        prompt_tps.append(perf["prompt_eval_tokens"] / perf["prompt_eval_s"])
        gen_tps.append(perf["gen_tokens"] / perf["gen_s"])
        first_s.append(reply.usage.latency_s)
        prompt_tokens = reply.usage.input_tokens
    t = time.perf_counter()
    again = b.chat([system(f"Run {repeats - 1}-x. You summarise films.\n{context}"), user("Who holds the letter?")],
                   max_tokens=8)
    cold_s = time.perf_counter() - t
    t = time.perf_counter()
    warm = b.chat([system(f"Run {repeats - 1}-x. You summarise films.\n{context}"), user("Where does Rick walk?")],
                  max_tokens=8)
    warm_s = time.perf_counter() - t
    return {"backbone": spec, "load_s": load_s, "prompt_tokens": prompt_tokens,
            "prompt_tok_s": statistics.median(prompt_tps), "gen_tok_s": statistics.median(gen_tps),
            "question_cold_s": cold_s, "question_same_context_s": warm_s,
            "reused_tokens": warm.usage.cached_input_tokens, "of_tokens": warm.usage.input_tokens,
            "cold_reused_tokens": again.usage.cached_input_tokens, "threads": b.n_threads}  # type: ignore[attr-defined]


def bench_gateway(n: int = 300) -> dict[str, float]:
    import openai

    from moviemem.backbones import ScriptedBackbone, start_gateway

    backbone = ScriptedBackbone(lambda r: "B")
    msgs = [{"role": "system", "content": "Answer with a letter."}, {"role": "user", "content": "Which option? A B C D"}]
    direct = []
    for _ in range(n):
        t = time.perf_counter()
        backbone.chat(msgs, max_tokens=4)
        direct.append(time.perf_counter() - t)
    body = json.dumps({"model": "scripted", "messages": msgs, "max_tokens": 4})
    with start_gateway(backbone, None) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)
        client.chat.completions.create(model="scripted", messages=msgs, max_tokens=4)  # warm the connection
        via = []
        for _ in range(n):
            t = time.perf_counter()
            client.chat.completions.create(model="scripted", messages=msgs, max_tokens=4)
            via.append(time.perf_counter() - t)
        host, port = gw.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port))
        raw = []
        for _ in range(n):  # the server's share alone: a bare keep-alive HTTP client
            t = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
            conn.getresponse().read()
            raw.append(time.perf_counter() - t)
    return {"requests": n, "direct_p50_ms": pct(direct, 0.5) * 1e3, "gateway_p50_ms": pct(via, 0.5) * 1e3,
            "gateway_p95_ms": pct(via, 0.95) * 1e3,
            "overhead_p50_ms": (pct(via, 0.5) - pct(direct, 0.5)) * 1e3,
            "raw_http_overhead_p50_ms": (pct(raw, 0.5) - pct(direct, 0.5)) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--models", default="local-small,local")
    ap.add_argument("--prompt-words", type=int, default=330)
    ap.add_argument("--gen-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    out: dict[str, object] = {"cache": bench_cache(), "gateway": bench_gateway()}
    if not args.skip_local:
        out["local"] = [bench_local(m, args.prompt_words, args.gen_tokens, args.repeats) for m in args.models.split(",")]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    c, g = out["cache"], out["gateway"]
    print(f"replay cache hit ({c['entries']} entries, {c['request_chars']} char requests): "  # type: ignore[index]
          f"p50 {c['p50_ms']:.3f} ms, p95 {c['p95_ms']:.3f} ms")  # type: ignore[index]
    print(f"gateway: direct p50 {g['direct_p50_ms']:.3f} ms, via HTTP p50 {g['gateway_p50_ms']:.3f} ms "  # type: ignore[index]
          f"(p95 {g['gateway_p95_ms']:.3f}); overhead p50 {g['overhead_p50_ms']:.3f} ms/request with the openai SDK, "  # type: ignore[index]
          f"{g['raw_http_overhead_p50_ms']:.3f} ms with a bare HTTP client")  # type: ignore[index]
    for r in out.get("local", []):  # type: ignore[union-attr]
        print(f"{r['backbone']}: load {r['load_s']:.1f}s, {r['threads']} thread(s); prompt {r['prompt_tok_s']:.1f} tok/s "
              f"({r['prompt_tokens']} tokens), generation {r['gen_tok_s']:.1f} tok/s; question on a new context "
              f"{r['question_cold_s']:.2f}s, next question on the same context {r['question_same_context_s']:.2f}s "
              f"({r['reused_tokens']}/{r['of_tokens']} prompt tokens reused)")


if __name__ == "__main__":
    main()
