"""Why a restored prefix used to move log-probabilities (issue 65): llama.cpp's sums depend on batch cuts.

    python bench/batch_split.py [--chars 6000] [--threads 2]

One `local` model, a transcript prefix (mf2-8's first lines) and two statements after it. Prints the next
token's five best log-probabilities for the second statement read four ways:
  whole     the prompt read from scratch in one go (batches of n_batch from the start);
  reused    after the first statement's prompt, its shared tokens kept (what llama.cpp does by default);
  alone     the prefix read as a unit, then the statement as its own batch (what moviemem does now);
  held      the same prefix, held after the first statement's tail was read and dropped;
  restored  the prefix's saved state loaded back after another read.
"whole" and "reused" differ; "alone", "held" and "restored" are the same floats.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SRT = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "mf2" / "transcripts" / "8.srt"
S1 = "\n\nStatement: Mark is a detective.\nIs the statement true? Answer:"
S2 = "\n\nStatement: Lona lives in an apartment.\nIs the statement true? Answer:"


def top5(llm) -> list[tuple[int, float]]:
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)  # noqa: SLF001
    logp = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
    return [(int(t), round(float(logp[t]), 6)) for t in np.argsort(-logp)[:5]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chars", type=int, default=6000, help="characters of transcript in the prefix")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from llama_cpp import Llama

    from moviemem.models import model_path

    lines = [x for x in SRT.read_text(encoding="utf-8", errors="ignore").splitlines() if x and not x[0].isdigit()]
    prefix = "Transcript:\n" + "\n".join(lines)[: args.chars]
    llm = Llama(str(model_path("local")), n_ctx=8192, n_threads=args.threads, n_threads_batch=args.threads,
                flash_attn=True, seed=0, verbose=False)
    t1 = llm.tokenize((prefix + S1).encode(), add_bos=True)
    t2 = llm.tokenize((prefix + S2).encode(), add_bos=True)
    cut = Llama.longest_token_prefix(t1, t2) - 3  # the prefix ends a little before the statements part
    got = {}
    llm.eval(t2)
    got["whole"] = top5(llm)
    llm.n_tokens = 0
    llm.eval(t1)
    llm.n_tokens = Llama.longest_token_prefix(t1, t2)
    llm.eval(t2[llm.n_tokens:])
    got["reused"] = top5(llm)
    llm.n_tokens = 0
    llm.eval(t2[:cut])
    state = llm.save_state()
    llm.eval(t2[cut:])
    got["alone"] = top5(llm)
    llm.n_tokens = cut
    llm.eval(t1[cut:])
    llm.n_tokens = cut
    llm.eval(t2[cut:])
    got["held"] = top5(llm)
    llm.n_tokens = 0
    llm.eval(t1)
    llm.load_state(state)
    llm.eval(t2[cut:])
    got["restored"] = top5(llm)
    print(f"prompt {len(t2)} tokens, prefix {cut}, n_batch {llm.n_batch}, threads {args.threads}")
    for name, row in got.items():
        print(f"{name:9s} " + "  ".join(f"{t}:{lp:.6f}" for t, lp in row))
    spread = max(abs(a[1] - b[1]) for a, b in zip(got["whole"], got["reused"]) if a[0] == b[0])
    same = got["alone"] == got["held"] == got["restored"]
    print(f"whole vs reused: up to {spread:.4f} apart; alone = held = restored: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
