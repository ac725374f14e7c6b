"""What running the local model in a child process costs per answer (setting llm_isolate).

    python bench/worker_overhead.py [--backbone local] [--questions 8] [--rounds 2]

Asks the same short multiple-choice questions over one real transcript excerpt (../shared/media/
sintel_en.srt) with the model in this process and in a worker process, alternating round by round,
and prints the median wall time per answer of each, their difference, and the worker's start (spawn,
import, model load). The first question of each round reads the excerpt; the others reuse its
prefix from the KV cache, as a film's questions do in a bench.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    from throughput import transcript_text

    from moviemem.backbones import Request, load, system, user
    from moviemem.backbones.llamacpp_backend import LlamaCppBackbone

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    spec = load(args.backbone)
    assert isinstance(spec, LlamaCppBackbone)
    context = "Transcript of the film:\n" + transcript_text(600)
    questions = [f"Question {i}: which line comes first in the transcript? A) the first B) the second "
                 f"C) the third D) none. Answer with one letter." for i in range(args.questions)]
    started = time.perf_counter()
    isolated = LlamaCppBackbone(spec.path, name=spec.name, isolate=True, n_ctx=4096)
    isolated.worker().call("load")
    start_s = time.perf_counter() - started
    here = LlamaCppBackbone(spec.path, name=spec.name, isolate=False, n_ctx=4096)
    here.model()
    walls: dict[str, list[float]] = {"in process": [], "worker": []}
    for _ in range(args.rounds):
        for label, b in (("in process", here), ("worker", isolated)):
            for q in questions:
                t = time.perf_counter()
                b.chat([system(context), user(q)], max_tokens=2)
                walls[label].append(time.perf_counter() - t)
    print(f"{args.backbone}: {args.questions} questions x {args.rounds} rounds over a "
          f"{here.last_perf.get('prompt_tokens', 0):.0f}-token prompt, alternating")
    for label, ws in walls.items():
        print(f"{label:>11}: median {statistics.median(ws) * 1000:7.1f} ms an answer, mean {statistics.mean(ws) * 1000:7.1f} ms")
    diff = statistics.median(walls["worker"]) - statistics.median(walls["in process"])
    print(f"worker - in process: {diff * 1000:+.1f} ms an answer (median); worker start with model load {start_s:.1f} s, once a process")
    # the pipe itself, apart from the model: a call that does no work, and one that carries a feature film's
    # whole transcript (about 120,000 characters) there and its prompt text back
    worker = isolated.worker()
    trips = [_timed(lambda: worker.call("n_ctx")) for _ in range(200)]
    film = Request.build([system("Transcript:\n" + transcript_text(20000)), user(questions[0])], max_tokens=2)
    big = [_timed(lambda: worker.call("prompt", film)) - _timed(lambda: here.prompt(film)) for _ in range(20)]
    print(f"the pipe alone: {statistics.median(trips) * 1e6:.0f} us a call that does nothing; a whole transcript's "
          f"request sent and its prompt text returned: +{statistics.median(big) * 1000:.1f} ms over building it in process")


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
