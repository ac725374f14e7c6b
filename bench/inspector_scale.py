"""The inspector on a large run: how big the index page is and how long headless Chromium takes
to open it (its filter script included), against a blank page.

Builds a run of N synthetic MCQ items x 2 policies (a scripted answerer, no model), writes the
inspector and times it, then loads index.html with `chromium --headless --dump-dom`.

    python -m moviemem.bench.inspector_scale --items 5000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from moviemem.agents.base import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.inspector import write_inspector
from moviemem.eval.runner import run_bench
from moviemem.retrievers.types import Evidence

CATEGORIES = ("plot", "setting", "character", "temporal", "causal")


def build(root: Path, n: int) -> Path:
    rows = [(i + 1, {"id": f"q{i}", "film_id": f"f{i % 50}", "question": f"Question {i} <b>x</b>?",
                     "options": ["a", "b", "c", "d"], "answer": "ABCD"[i % 4], "category": CATEGORIES[i % 5],
                     "evidence": [[100.0 + i % 300, 130.0 + i % 300]]}) for i in range(n)]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "scale.jsonl"), "scale.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        ev = [Evidence("utterance", film_id, 90.0 + k * 40, 95.0 + k * 40, f"line {k}", id=f"utterance:{k}",
                       cited=k == 0) for k in range(6)]
        return Answer(choice="AB"[len(query.question) % 2] if policy == "a" else "C", text="", confidence=None,
                      invalid=False, policy=policy, backbone=backbone.name, usage=reply.usage, evidence=ev)

    run = root / "run"
    run_bench(bench, ["a", "b"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer, concurrency=4)
    return run


def open_s(chromium: str, url: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--dump-dom",
                    url], capture_output=True, timeout=300, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        run = build(root, args.items)
        bench_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = write_inspector(run)
        write_s = time.perf_counter() - t0
        result = {"items": args.items, "configs": 2, "bench_s": round(bench_s, 1), "write_inspector_s": round(write_s, 1),
                  "index_bytes": index.stat().st_size,
                  "item_pages": len(list((index.parent / "items").glob("*.html")))}
        if chromium:
            blank = root / "blank.html"
            blank.write_text("<!doctype html><title>x</title>")
            base = min(open_s(chromium, blank.as_uri()) for _ in range(2))
            full = min(open_s(chromium, index.as_uri()) for _ in range(2))
            result.update(chromium_blank_s=round(base, 2), chromium_index_s=round(full, 2),
                          index_open_s=round(full - base, 2))
        else:
            print("headless Chromium is not installed: open time not measured", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"inspector of {args.items} items x 2 configurations: index.html {result['index_bytes'] / 1e6:.1f} MB, "
              f"written in {result['write_inspector_s']} s ({result['item_pages']} item pages)")
        if "index_open_s" in result:
            print(f"  headless Chromium opens it in {result['chromium_index_s']} s (blank page {result['chromium_blank_s']} s:"
                  f" {result['index_open_s']} s for the page and its filter script)")
    return result


if __name__ == "__main__":
    main()
