"""Full context on feature films with the offline `local` backbone: does the whole transcript fit, and how long
does a film's first question and each later one take (the subtitles policy, CHNB's full-context baseline).

    python bench/full_context.py --fit [--mf2 ../shared/datasets/mf2]            # every MF² film: tokens, fits?
    python bench/full_context.py --films mf2-6 --questions 6 [--library L]       # timings on real films
    python bench/full_context.py --kernels 4000 [--film 5]                         # flash attention on and off

`--fit` tokenises every MF² transcript as the subtitles policy sends it (compact: a line a row, a time mark a
minute) and as it was sent before (two times on every line), and says which films fit the model's context.
`--films` imports those films (text only) if the library lacks them, then asks the subtitles policy each
film's first N statements of the official MF² dev pairs (`../shared/datasets/dev/mf2_official_dev.csv`,
true and false claims in file order) in a fresh process, one after another as a bench does: the first
question reads the transcript, later ones reuse it from llama.cpp's prompt cache. Prints per film: prompt
tokens, first-question seconds, median later-question seconds, tokens read against tokens billed, and the
process's peak memory. The statements serve as timing material only; nothing is tuned to them.
`--kernels N` reads the first N tokens of a film's compact transcript with llama.cpp's flash attention off and
on, alternating (off, on, off, on: the machine's other load falls on both alike), and prints each reading's speed.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from mf2_films import import_mf2_films  # beside this script

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"


def fit(mf2: Path) -> None:
    """Every MF² transcript: words, tokens compact and as before, whether the subtitles prompt fits."""
    import llama_cpp
    import pysubs2

    from moviemem.agents.calls import compact_text, world_state
    from moviemem.backbones.llamacpp_backend import trained_context
    from moviemem.models import model_path
    from moviemem.retrievers.types import Evidence

    path = model_path("local")
    vocab = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    ctx = trained_context(path)
    reserve = 600  # system prompt, instructions, the statement and the reply
    print(f"context {ctx} tokens; {reserve} kept for the instructions, the statement and the reply")
    print(f"{'film':>6} {'words':>7} {'before':>7} {'t/w':>5} {'compact':>8} {'t/w':>5}  fits")
    rows = []
    for srt in sorted((mf2 / "transcripts").glob("*.srt"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
        subs = pysubs2.load(str(srt))
        ev = [Evidence("utterance", "x", e.start / 1000, e.end / 1000, " ".join(e.plaintext.split())) for e in subs]
        ev = [e for e in ev if e.text]
        words = sum(len(e.text.split()) for e in ev)
        n_old = len(vocab.tokenize(world_state(ev).encode(), add_bos=False))
        n_new = len(vocab.tokenize(compact_text(ev).encode(), add_bos=False))
        ok = n_new + reserve <= ctx
        rows.append((srt.stem, words, n_old, n_new, ok))
        print(f"{srt.stem:>6} {words:7d} {n_old:7d} {n_old / words:5.2f} {n_new:8d} {n_new / words:5.2f}  {'yes' if ok else 'NO'}")
    total_w = sum(r[1] for r in rows)
    print(f"all {len(rows)} films: {sum(r[2] for r in rows) / total_w:.2f} tokens a word before, "
          f"{sum(r[3] for r in rows) / total_w:.2f} compact; {sum(not r[4] for r in rows)} do not fit "
          f"({', '.join(r[0] for r in rows if not r[4]) or 'none'}); longest {max(r[3] for r in rows)} tokens")


def kernels(mf2: Path, film: str, n: int) -> None:
    """Prompt reading with flash attention off and on, alternating, on the same tokens."""
    import llama_cpp
    import pysubs2

    from moviemem.agents.calls import compact_text
    from moviemem.models import model_path
    from moviemem.retrievers.types import Evidence

    path = model_path("local")
    subs = pysubs2.load(str(mf2 / "transcripts" / f"{film}.srt"))
    text = compact_text([Evidence("utterance", "x", e.start / 1000, e.end / 1000, " ".join(e.plaintext.split()))
                         for e in subs if e.plaintext.strip()])
    threads = int(os.environ.get("MOVIEMEM_LLM_THREADS", "0")) or (os.cpu_count() or 1)
    for flash in (False, True, False, True):
        llm = llama_cpp.Llama(str(path), n_ctx=n + 64, n_threads=threads, n_threads_batch=threads, verbose=False,
                              flash_attn=flash)
        tokens = llm.tokenize(text.encode(), add_bos=True)[:n]
        started = time.perf_counter()
        llm.eval(tokens)
        took = time.perf_counter() - started
        print(f"flash attention {'on ' if flash else 'off'}: {len(tokens)} tokens of mf2-{film} read in {took:.1f} s "
              f"({len(tokens) / took:.0f} tokens/s), {threads} threads, load {os.getloadavg()[0]:.1f}", flush=True)
        del llm


def statements(dev: Path, film_id: str, n: int) -> list[str]:
    rows = list(csv.DictReader((dev / "mf2_official_dev.csv").open(encoding="utf-8")))
    out: list[str] = []
    for r in rows:
        if f"mf2-{r['movie_id']}" == film_id:
            out += [r["true_claim"], r["false_claim"]]
    return out[:n]


def timings(lib_path: Path, films: list[str], n: int, mf2: Path, dev: Path) -> None:
    from moviemem import Library
    from moviemem.backbones import load

    lib = Library(lib_path)
    import_mf2_films(lib, mf2, films)
    backbone = load("local")  # no replay cache: every call is computed
    print(f"backbone local, context {backbone.n_ctx} tokens, KV cache {backbone.kv_type}, flash attention "
          f"{'on' if backbone.flash else 'off'}, {backbone.n_threads} threads")
    for fid in films:
        film = lib.film(fid)
        qs = statements(dev, fid, n)
        secs, read, billed = [], [], []
        for q in qs:
            started = time.perf_counter()
            ans = film.ask(q, kind="claim", policy="subtitles", backbone=backbone)
            secs.append(time.perf_counter() - started)
            read.append(ans.usage.input_tokens - ans.usage.cached_input_tokens)
            billed.append(ans.usage.input_tokens)
            print(f"  {fid} q{len(secs)}: {secs[-1]:6.1f} s, {billed[-1]} tokens billed, {read[-1]} read, "
                  f"{'invalid: ' + str(ans.error) if ans.invalid else ans.choice}", flush=True)
        later = secs[1:]
        print(f"{fid}: prompt {billed[0]} tokens; first question {secs[0]:.1f} s; later questions median "
              f"{statistics.median(later) if later else float('nan'):.1f} s (max {max(later) if later else float('nan'):.1f}); "
              f"tokens read {sum(read)} of {sum(billed)} billed", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak memory (max RSS) {peak:.2f} GiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit", action="store_true", help="token counts of every MF² transcript, no model run")
    ap.add_argument("--films", default="", help="comma-separated MF² film ids to time (mf2-N)")
    ap.add_argument("--questions", type=int, default=6, help="statements asked per film")
    ap.add_argument("--library", type=Path, default=ROOT / "out" / "full-context-lib")
    ap.add_argument("--mf2", type=Path, default=SHARED / "mf2")
    ap.add_argument("--dev", type=Path, default=SHARED / "dev")
    ap.add_argument("--kernels", type=int, default=0, help="tokens to read with flash attention off and on")
    ap.add_argument("--film", default="5", help="with --kernels: the MF² film number whose transcript is read")
    a = ap.parse_args()
    if not a.fit and not a.films and not a.kernels:
        ap.error("give --fit, --films, --kernels or several")
    os.environ.setdefault("MOVIEMEM_BACKBONE_TIMEOUT_S", "3600")  # a first question reads a whole film
    if a.fit:
        fit(a.mf2)
    if a.kernels:
        kernels(a.mf2, a.film, a.kernels)
    if a.films:
        timings(a.library, [f.strip() for f in a.films.split(",") if f.strip()], a.questions, a.mf2, a.dev)


if __name__ == "__main__":
    sys.exit(main())
