"""Letta sidecar and policy figures on the synthetic film.

    .venv/bin/python bench/letta.py [--questions 3] [--backbone local] [--cold-venv] [--json]

- up: `letta up` cold (a fresh home: initdb, Letta's schema, gateway, server; with
  --cold-venv also the sidecar environment, built into a temporary folder with pip's cache),
  warm (after `down`, same home) and idempotent (everything already running);
- insert: passages per second into a Letta archive (`create_many`, embedded through the
  gateway with the configured embedder), the film's passages repeated to --passages;
- search: p50/p95 of `agents.passages.search` over the film's archive;
- questions: per-question wall time and tokens of `letta` vs `archival` (search='vector',
  the same backbone object, the same questions from the synthetic film's mcq.jsonl).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def synth(root: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import truth_srt

    from moviemem import Library
    from moviemem.config import get_settings
    from moviemem.eval.synth import render

    d = render(root / "film", minutes=3.0, seed=7)["film.mp4"].parent
    srt = truth_srt(json.loads((d / "truth.json").read_text()), d / "subtitles.srt")
    lib = Library(root / "lib", get_settings(library=root / "lib", clip_pretrained="random"))
    film = lib.ingest(d / "film.mp4", film_id="synth", title="Synthetic", year=2026, subtitles=srt,
                      captions=d / "captions.srt")
    return lib, film, d


def bench_up(home: Path, library: Path, venv: Path) -> tuple[Any, dict[str, float]]:
    from moviemem.letta import Sidecar

    sc = Sidecar(home, library, venv=venv, backbone="local-small")
    t = time.perf_counter()
    sc.up(progress=lambda m: print("  " + m, file=sys.stderr))
    cold = time.perf_counter() - t
    t = time.perf_counter()
    sc.up()
    idempotent = time.perf_counter() - t
    sc.down()
    t = time.perf_counter()
    sc.up()
    warm = time.perf_counter() - t
    return sc, {"cold_s": round(cold, 1), "warm_s": round(warm, 1), "already_running_s": round(idempotent, 2)}


def bench_archive(url: str, film: Any, n: int, queries: list[str]) -> dict[str, float]:
    from letta_client import Letta

    from moviemem.agents.archival import archival_passages
    from moviemem.agents.letta import passage_tags, passage_time
    from moviemem.backbones import ScriptedBackbone, start_gateway
    from moviemem.models.embedder import get_embedder

    emb = get_embedder()
    gw = start_gateway(ScriptedBackbone([]), emb)
    try:
        c = Letta(base_url=url, timeout=900, max_retries=0)
        cfg = {"embedding_endpoint_type": "openai", "embedding_endpoint": gw.base_url, "embedding_model": emb.name,
               "embedding_dim": int(emb.dim), "embedding_chunk_size": 100000, "batch_size": 64}
        rows = archival_passages(film)
        rows = (rows * (n // len(rows) + 1))[:n]
        archive = c.archives.create(name=f"bench-{time.time_ns()}", embedding_config=cfg)  # type: ignore[arg-type]
        t = time.perf_counter()
        for i in range(0, n, 128):
            c.archives.passages.create_many(archive.id, passages=[
                {"text": e.text, "tags": passage_tags(e), "created_at": passage_time(e)} for e in rows[i:i + 128]])
        insert_s = time.perf_counter() - t
        agent = c.agents.create(name=f"bench-{time.time_ns()}", agent_type="letta_v1_agent", include_base_tools=False,
                                llm_config={"model": "scripted", "model_endpoint_type": "openai",  # type: ignore[arg-type]
                                            "model_endpoint": gw.base_url, "context_window": 8192},
                                embedding_config=cfg, memory_blocks=[], timezone="UTC")  # type: ignore[arg-type]
        c.agents.archives.attach(archive.id, agent_id=agent.id)
        times = []
        for q in queries * 4:
            t = time.perf_counter()
            c.agents.passages.search(agent.id, query=q, top_k=5)
            times.append(time.perf_counter() - t)
        c.agents.delete(agent.id)
        c.archives.delete(archive.id)
        return {"passages": n, "insert_s": round(insert_s, 2), "insert_per_s": round(n / insert_s, 1),
                "search_p50_ms": round(1000 * pct(times, 0.5), 1), "search_p95_ms": round(1000 * pct(times, 0.95), 1),
                "searches": len(times)}
    finally:
        gw.stop()


def bench_questions(url: str, film: Any, items: list[dict[str, Any]], backbone_spec: str) -> dict[str, Any]:
    from moviemem.agents import get_policy
    from moviemem.agents.base import Question
    from moviemem.backbones import load

    backbone = load(backbone_spec)
    out: dict[str, Any] = {}
    for name, pol in (("archival", get_policy("archival", search="vector")),
                      ("letta", get_policy("letta", url=url))):
        rows = []
        for it in items:
            t = time.perf_counter()
            a = pol.answer(film, Question.make(it["question"], it["options"]), backbone)
            rows.append({"s": time.perf_counter() - t, "in": a.usage.input_tokens, "out": a.usage.output_tokens,
                         "correct": a.choice == it["answer"], "invalid": a.invalid,
                         "searches": sum(1 for s in a.trace if s.kind == "tool"), "evidence": len(a.evidence)})
        if hasattr(pol, "close"):
            pol.close()
        out[name] = {"questions": len(rows), "mean_s": round(statistics.mean(r["s"] for r in rows), 1),
                     "mean_input_tokens": round(statistics.mean(r["in"] for r in rows)),
                     "mean_output_tokens": round(statistics.mean(r["out"] for r in rows)),
                     "searches": sum(r["searches"] for r in rows), "correct": sum(r["correct"] for r in rows),
                     "invalid": sum(r["invalid"] for r in rows), "per_question": rows}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--passages", type=int, default=512)
    ap.add_argument("--cold-venv", action="store_true", help="also time building the sidecar environment")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("rendering and ingesting the synthetic film", file=sys.stderr)
        lib, film, d = synth(root / "synth")
        venv = root / "venv" if args.cold_venv else Path.home() / ".moviemem" / "letta" / "venv"
        sc, results["up"] = bench_up(root / "home", lib.path, venv)
        try:
            url = sc.status()["url"]
            results["archive"] = bench_archive(url, film, args.passages,
                                               ["the letter", "who takes the ring", "the lighthouse at night", "Anna"])
            items = [json.loads(line) for line in (d / "mcq.jsonl").read_text().splitlines()[: args.questions]]
            results["questions"] = bench_questions(url, film, items, args.backbone)
        finally:
            sc.down()
    if args.json:
        print(json.dumps(results))
    else:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
