"""Letta sidecar and policy figures on the synthetic film.

    .venv/bin/python bench/letta.py [--questions 3] [--backbone local] [--cold-venv] [--json]
                                    [--max-steps 2] [--step-max-tokens 64] [--top-k 3] [--search-first]

- up: `letta up` with the sidecar environment missing (--cold-venv: built into a temporary
  folder with an empty pip cache, so everything is downloaded, as on a clean CI machine), with
  the environment present but a fresh home (initdb, Letta's schema, gateway, server), after
  `down` (same home: data and schema exist) and when everything already runs; each with the
  seconds per step that `up` records (`up_phases`);
- insert: passages per second into a Letta archive (`create_many`, embedded through the
  gateway with the configured embedder), the film's passages repeated to --passages;
- search: p50/p95 of `agents.passages.search` over that archive (REST, query embedding included);
- questions: per-question wall time, LLM calls and tokens of `archival` (search='vector') and
  `letta` with the same settings (--max-steps, --step-max-tokens, --top-k), the same backbone
  object and the same questions from the synthetic film's mcq.jsonl; letta without and (with
  --search-first) also with the forced first search.

The machine's load average is recorded at the start and end: on a shared machine the
timings say as much about the neighbours as about Letta.
"""

from __future__ import annotations

import argparse
import json
import os
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
    from moviemem.foundation.config import get_settings
    from moviemem.synth import render

    d = render(root / "film", minutes=3.0, seed=7)["film.mp4"].parent
    srt = truth_srt(json.loads((d / "truth.json").read_text()), d / "subtitles.srt")
    lib = Library(root / "lib", get_settings(library=root / "lib", clip_pretrained="random"))
    film = lib.ingest(d / "film.mp4", film_id="synth", title="Synthetic", year=2026, subtitles=srt,
                      captions=d / "captions.srt")
    return lib, film, d


def _timed_up(sc: Any) -> dict[str, Any]:
    t = time.perf_counter()
    st = sc.up(progress=lambda m: print("  " + m, file=sys.stderr))
    return {"s": round(time.perf_counter() - t, 1), "phases": st.get("up_phases")}


def bench_up(root: Path, library: Path, cold_venv: bool) -> tuple[Any, dict[str, Any]]:
    from moviemem.letta import Sidecar

    out: dict[str, Any] = {}
    venv = Path.home() / ".moviemem" / "letta" / "venv"
    if cold_venv:
        venv = root / "venv"
        os.environ["PIP_CACHE_DIR"] = str(root / "pip-cache")  # empty: download everything
        sc = Sidecar(root / "home-cold", library, venv=venv, backbone="local-small")
        out["no_venv"] = _timed_up(sc)
        sc.down()
        os.environ.pop("PIP_CACHE_DIR")
    sc = Sidecar(root / "home", library, venv=venv, backbone="local-small")
    out["venv_fresh_home"] = _timed_up(sc)
    out["already_running"] = _timed_up(sc)
    t = time.perf_counter()
    sc.down()
    out["down_s"] = round(time.perf_counter() - t, 1)
    out["after_down"] = _timed_up(sc)
    return sc, out


def bench_archive(url: str, film: Any, n: int, queries: list[str]) -> dict[str, float]:
    from letta_client import Letta

    from moviemem.agents.policies.archival import archival_passages
    from moviemem.agents.policies.letta import passage_tags, passage_time
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
        for q in queries * 5:
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


def bench_questions(url: str, film: Any, items: list[dict[str, Any]], backbone_spec: str,
                    shared: dict[str, Any], search_first: bool) -> dict[str, Any]:
    from moviemem.agents import get_policy
    from moviemem.agents.types import Question
    from moviemem.backbones import load

    backbone = load(backbone_spec)
    runs = [("archival", get_policy("archival", search="vector", **shared)),
            ("letta", get_policy("letta", url=url, insert_tool=False, **shared))]
    if search_first:
        runs.append(("letta+search_first",
                     get_policy("letta", url=url, insert_tool=False, search_first=True, **shared)))
    out: dict[str, Any] = {"settings": {**shared, "insert_tool": False}}
    for name, pol in runs:
        rows = []
        for it in items:
            t = time.perf_counter()
            a = pol.answer(film, Question.make(it["question"], it["options"]), backbone)
            # LLM calls: Letta reports its agent steps per request; archival traces each model call
            requests = [s.data for s in a.trace if s.kind == "prompt"]
            calls = sum(int(r.get("steps") or 0) if r.get("server") == "letta" else 1 for r in requests)
            rows.append({"s": round(time.perf_counter() - t, 1), "in": a.usage.input_tokens,
                         "cached": a.usage.cached_input_tokens, "out": a.usage.output_tokens, "llm_calls": calls,
                         "correct": a.choice == it["answer"], "invalid": a.invalid,
                         "searches": sum(1 for s in a.trace if s.kind == "tool"), "evidence": len(a.evidence)})
            print(f"  {name} {it['id']}: {rows[-1]}", file=sys.stderr)
        if hasattr(pol, "close"):
            pol.close()
        out[name] = {"questions": len(rows), "mean_s": round(statistics.mean(r["s"] for r in rows), 1),
                     "mean_input_tokens": round(statistics.mean(r["in"] for r in rows)),
                     "mean_cached_input_tokens": round(statistics.mean(r["cached"] for r in rows)),
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
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--step-max-tokens", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--search-first", action="store_true", help="also run letta with a forced first search")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.questions < 1 or args.passages < 1:
        print("error: --questions and --passages must be at least 1", file=sys.stderr)
        sys.exit(2)
    results: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="moviemem-bench-letta-") as tmp:
        root = Path(tmp)
        print("rendering and ingesting the synthetic film", file=sys.stderr)
        lib, film, d = synth(root / "synth")
        sc, results["up"] = bench_up(root, lib.path, args.cold_venv)
        try:
            url = sc.status()["url"]
            results["archive"] = bench_archive(url, film, args.passages,
                                               ["the letter", "who takes the ring", "the lighthouse at night", "Anna"])
            items = [json.loads(line) for line in (d / "mcq.jsonl").read_text().splitlines()[: args.questions]]
            shared = {"max_steps": args.max_steps, "step_max_tokens": args.step_max_tokens, "top_k": args.top_k}
            results["questions"] = bench_questions(url, film, items, args.backbone, shared, args.search_first)
        finally:
            sc.down()
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(results) if args.json else json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
