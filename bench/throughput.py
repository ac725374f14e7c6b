"""How fast the offline models run on this machine, each figure beside the limit it could reach.

    python bench/throughput.py [--threads 1,2] [--prompt-tokens 1000] [--skip-whisper]

Prints, for the `local` backbone (llama.cpp): prompt tokens/s at 1..N threads and at the chosen
default, with a cold prompt and with a prompt whose prefix is already in the KV cache, and
generation tokens/s; faster-whisper's real-time factor; the MiniLM embedder's texts/s. Bounds
are measured here: peak float32 FLOP/s (a numpy matmul) for compute-bound work (reading a prompt:
~2 FLOP per weight per token; embedding; the whisper encoder) and memory bandwidth (a numpy
copy) for generation, which reads every weight once per token. Read each figure as a share of its
bound: a low share is headroom, not a ceiling of the machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def peak_flops(threads: int) -> float:
    """float32 GFLOP/s of a large matmul with `threads` BLAS threads (best of 3)."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)
    with threadpool_limits(threads):
        a @ a
        best = min(_timed(lambda: a @ a) for _ in range(3))
    return 2 * 2048**3 / best / 1e9


def bandwidth() -> float:
    """GB/s of a 512 MiB copy (read + write counted), best of 3."""
    src = np.ones(64 * 2**20, dtype=np.float64)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(3))
    return 2 * src.nbytes / best / 1e9


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def transcript_text(n_words: int) -> str:
    """Real dialogue (the Sintel subtitles in ../shared/media), repeated to length; lorem-like filler without it."""
    srt = SHARED / "media" / "sintel_en.srt"
    if srt.exists():
        import pysubs2

        lines = [e.plaintext.replace("\n", " ") for e in pysubs2.load(str(srt)) if e.plaintext.strip()]
    else:
        print("note: ../shared/media/sintel_en.srt not found; timing a generated transcript", file=sys.stderr)
        lines = [f"Line {i}: the keeper walks to the lighthouse and reads the letter again." for i in range(50)]
    words: list[str] = []
    i = 0
    while len(words) < n_words:
        words += f"[{i // 60:02d}:{i % 60:02d}] {lines[i % len(lines)]}".split()
        i += 1
    return " ".join(words[:n_words])


def llama_figures(threads: list[int], prompt_tokens: int, gen_tokens: int) -> list[dict]:
    import llama_cpp

    from moviemem.models import model_path

    path = model_path("local")
    size_gb = path.stat().st_size / 1e9
    out = []
    for t in threads:
        llm = llama_cpp.Llama(str(path), n_ctx=4096, n_threads=t, n_threads_batch=t, verbose=False)
        n_params = llama_cpp.llama_model_n_params(llm.model)
        text = transcript_text(int(prompt_tokens * 0.8))
        tokens = llm.tokenize(text.encode())[:prompt_tokens]
        suffix = llm.tokenize(b" Question: who is speaking at the start? Answer:", add_bos=False)
        llm.reset()
        cold = _timed(functools.partial(llm.eval, tokens))
        # a question after the same film text: the prefix stays in the KV cache, only the suffix is read
        warm = _timed(functools.partial(llm.eval, suffix))
        gen_start = time.perf_counter()
        for i in range(gen_tokens):  # one token a step, as generation runs (which token does not change the cost)
            llm.eval([suffix[i % len(suffix)]])
        gen = time.perf_counter() - gen_start
        out.append({"threads": t, "prompt_tokens": len(tokens), "prompt_tok_s": len(tokens) / cold,
                    "cached_prefix_question_s": warm, "suffix_tokens": len(suffix),
                    "gen_tok_s": gen_tokens / gen, "params": int(n_params), "weights_gb": size_gb})
        llm.close()
    return out


def whisper_figure(threads: int) -> dict | None:
    from moviemem.ingest.asr import load_model
    from moviemem.models import model_path

    clip = SHARED / "media" / "sintel_trailer.mp4"
    if not clip.exists():
        print("note: ../shared/media/sintel_trailer.mp4 not found; whisper skipped", file=sys.stderr)
        return None
    from faster_whisper.audio import decode_audio

    audio = decode_audio(str(clip), sampling_rate=16000)
    model = load_model(str(model_path("whisper-base")), "int8", threads)
    start = time.perf_counter()
    segments, _ = model.transcribe(audio, language="en", beam_size=1, vad_filter=False)
    words = sum(len(s.text.split()) for s in segments)
    took = time.perf_counter() - start
    seconds = len(audio) / 16000
    return {"threads": threads, "audio_s": seconds, "took_s": took, "rtf": took / seconds, "words": words}


def embedder_figure() -> dict:
    from moviemem.models.embedder import get_embedder

    emb = get_embedder("minilm")
    words = transcript_text(30000).split()
    texts = [" ".join(words[i * 15: i * 15 + 12 + i % 8]) for i in range(2000)]  # 2,000 distinct lines
    emb.embed(texts[:32])
    took = _timed(lambda: emb.embed(texts))
    # 22.7M parameters, 11.7M of them the token-embedding table (a lookup, no FLOPs): ~11M do the arithmetic
    return {"texts": len(texts), "texts_s": len(texts) / took, "backend": emb.backend, "params": 11.0e6, "tokens_per_text": 24}


def main() -> None:
    from moviemem.foundation.hardware import default_threads

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=None, help="llama.cpp thread counts to try (default 1..cores)")
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--skip-whisper", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cores = default_threads()
    threads = [int(t) for t in args.threads.split(",")] if args.threads else list(range(1, cores + 1))
    load = os.getloadavg()
    peaks = {t: peak_flops(t) for t in sorted(set(threads) | {cores})}
    bw = bandwidth()
    llm = llama_figures(threads, args.prompt_tokens, args.gen_tokens)
    whisper = None if args.skip_whisper else whisper_figure(cores)
    emb = embedder_figure()
    result = {"cores": cores, "default_threads": cores, "load_avg_before": [round(x, 2) for x in load],
              "peak_gflops": {str(k): round(v, 1) for k, v in peaks.items()}, "bandwidth_gb_s": round(bw, 1),
              "llama": llm, "whisper": whisper, "embedder": emb}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"machine: {cores} physical cores, load average before {load[0]:.2f}; default threads {cores}")
    print("bounds:  peak float32 " + ", ".join(f"{v:.0f} GFLOP/s @{k}t" for k, v in peaks.items())
          + f"; memory bandwidth {bw:.1f} GB/s")
    print("\nllama.cpp `local` (Qwen2.5-Coder-1.5B Q4_K_M)")
    print(f"{'threads':>7} {'prompt tok/s':>12} {'share of peak':>13} {'cached-prefix question':>22} {'gen tok/s':>9} {'share of bw':>11}")
    for r in llm:
        flops_per_tok = 2 * r["params"]
        share = r["prompt_tok_s"] * flops_per_tok / (peaks[r["threads"]] * 1e9)
        gen_share = r["gen_tok_s"] * r["weights_gb"] / bw
        mark = " (default)" if r["threads"] == cores else ""
        print(f"{r['threads']:>7} {r['prompt_tok_s']:>12.1f} {share:>12.0%} {r['cached_prefix_question_s'] * 1000:>17.0f} ms "
              f"{r['gen_tok_s']:>9.1f} {gen_share:>10.0%}{mark}")
    print(f"  (prompt of {llm[0]['prompt_tokens']} tokens read cold; the cached-prefix question reads only its "
          f"{llm[0]['suffix_tokens']} new tokens)")
    if whisper:
        print(f"\nfaster-whisper base int8, {whisper['threads']} threads: {whisper['audio_s']:.0f} s of audio in "
              f"{whisper['took_s']:.1f} s, real-time factor {whisper['rtf']:.3f} ({whisper['words']} words)")
    e_flops = 2 * emb["params"] * emb["tokens_per_text"]
    e_share = emb["texts_s"] * e_flops / (peaks[cores] * 1e9)
    print(f"\nembedder MiniLM-L6 ({emb['backend']}): {emb['texts_s']:.0f} texts/s of ~{emb['tokens_per_text']} tokens, "
          f"{e_share:.0%} of peak")


if __name__ == "__main__":
    main()
