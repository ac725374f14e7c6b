"""Hybrid text search latency within one film of a large library.

Builds (once; reused on later runs) a library of N synthetic films with realistic row counts
per film: 2,700 strip frames, 256 CLIP vectors, 1,500 utterances, 100 captions, 50 on-screen
texts and 100 events, with random unit vectors and random sentences from a Zipf vocabulary.
Then writes every film's search packs (memory/vector_pack.py; what each film's ingest writes),
times `TextRetriever("hybrid")` (vector + BM25 over all four kinds, RRF) on random films and
queries, and prints build time, size on disk (packs apart) and latency percentiles: overall, warm,
a film's first query in the process (served from its packs) and a first query without packs.

    python -m moviemem.bench.retrieval_latency --films 1000 --dir /tmp/mm-bench
    python bench/retrieval_latency.py --films 100 --queries 200 --json

Query embeddings are computed once up front (the MiniLM query encoder is timed separately):
the figures are the search itself.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import string
import sys
import time
import uuid
import warnings
from pathlib import Path

import numpy as np

from moviemem.memory.schema import (
    CaptionRow,
    ClipRow,
    EventRow,
    FilmRow,
    FrameRow,
    OnscreenRow,
    StageRow,
    UtteranceRow,
)
from moviemem.memory.store import MemoryStore, now

PER_FILM = {"frames": 2700, "clip": 256, "utterances": 1500, "captions": 100, "onscreen": 50, "events": 100}
DIM = 384  # MiniLM
CLIP_DIM = 512
DURATION = 5400.0  # 90 minutes: 2,700 strip frames at 0.5 fps


def vocabulary(rng: random.Random, n: int = 6000) -> list[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))))
    return sorted(words)


class Texts:
    """Random sentences whose word frequencies follow a Zipf law, like dialogue."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.words = np.array(vocabulary(random.Random(seed)))
        p = 1.0 / np.arange(1, len(self.words) + 1)
        self.p = p / p.sum()

    def make(self, n: int, lo: int, hi: int) -> list[str]:
        lengths = self.rng.integers(lo, hi + 1, n)
        flat = self.rng.choice(len(self.words), int(lengths.sum()), p=self.p)
        out, i = [], 0
        for m in lengths:
            out.append(" ".join(self.words[flat[i:i + m]]).capitalize() + ".")
            i += m
        return out


def unit(rng: np.random.Generator, n: int, dim: int) -> list[list[float]]:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return list(v)


def spans(rng: np.random.Generator, n: int, length: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    start = np.sort(rng.uniform(0, DURATION - length[1], n))
    return start.round(3), (start + rng.uniform(*length, n)).round(3)


def film_rows(i: int, texts: Texts, rng: np.random.Generator) -> dict[str, list]:
    fid = f"film{i:05d}"
    run = {s: uuid.uuid4().hex[:16] for s in ("probe", "frames", "clip", "transcript", "captions", "ocr", "events")}
    rows: dict[str, list] = {k: [] for k in ("films", "stages", "frames", "clip", "utterances", "captions", "onscreen", "events")}
    rows["films"].append(FilmRow(film_id=fid, run_id=run["probe"], title=f"Film {i}", duration_s=DURATION, fps=24.0,
                                 n_frames=int(DURATION * 24), has_audio=True))
    for stage, rid in run.items():
        params = {"embedder": "minilm"} if stage in ("transcript", "captions", "ocr", "events") else {}
        rows["stages"].append(StageRow(film_id=fid, run_id=rid, stage=stage, params=json.dumps(params), status="done",
                                       started_at=now(), finished_at=now()))
    step = DURATION / PER_FILM["frames"]
    clip_every = PER_FILM["frames"] // PER_FILM["clip"]
    for j in range(PER_FILM["frames"]):
        pools = [256] if j % clip_every == 0 and j // clip_every < PER_FILM["clip"] else []
        rows["frames"].append(FrameRow(film_id=fid, run_id=run["frames"], frame_idx=j * 48, t=round(j * step, 3),
                                       pools=pools, strip=True, image=f"media/{fid}/frames/{j:05d}.jpg"))
    for j, v in enumerate(unit(rng, PER_FILM["clip"], CLIP_DIM)):
        rows["clip"].append(ClipRow(film_id=fid, run_id=run["clip"], frame_idx=j * clip_every * 48,
                                    t=round(j * clip_every * step, 3), model="open_clip:ViT-B-32/random", vector=v))
    for table, model, key, n, words, length in (
        ("utterances", UtteranceRow, "transcript", PER_FILM["utterances"], (3, 14), (1.0, 5.0)),
        ("captions", CaptionRow, "captions", PER_FILM["captions"], (25, 60), (40.0, 60.0)),
        ("onscreen", OnscreenRow, "ocr", PER_FILM["onscreen"], (1, 6), (2.0, 8.0)),
    ):
        s, e = spans(rng, n, length)
        for j, (text, v) in enumerate(zip(texts.make(n, *words), unit(rng, n, DIM))):
            rows[table].append(model(film_id=fid, run_id=run[key], idx=j, start=s[j], end=e[j], text=text, vector=v))
    s, e = spans(rng, PER_FILM["events"], (5.0, 40.0))
    for j, (text, v) in enumerate(zip(texts.make(PER_FILM["events"], 6, 16), unit(rng, PER_FILM["events"], DIM))):
        rows["events"].append(EventRow(film_id=fid, run_id=run["events"], event_id=f"e{j:03d}", description=text,
                                       start=s[j], end=e[j], story_order=j, vector=v))
    return rows


def build(path: Path, films: int, batch: int = 20, seed: int = 0) -> float:
    started = time.perf_counter()
    store = MemoryStore(path)
    texts = Texts(seed)
    rng = np.random.default_rng(seed)
    for b in range(0, films, batch):
        acc: dict[str, list] = {}
        for i in range(b, min(films, b + batch)):
            for table, rows in film_rows(i, texts, rng).items():
                acc.setdefault(table, []).extend(rows)
        for rows in acc.values():
            store.append(rows)
        print(f"\r  built {min(films, b + batch)}/{films} films ({time.perf_counter() - started:.0f} s)", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)
    with warnings.catch_warnings():  # LanceDB warns that readers of older versions would fail: there are none
        warnings.simplefilter("ignore", UserWarning)
        store.optimize(keep_versions=dt.timedelta(0))  # sizes are of the tables as read, not of old versions
    from moviemem.memory.search import ensure_indexes
    from moviemem.retrievers.text import SOURCES

    for src in SOURCES.values():
        ensure_indexes(store, src.where)
    (path / "BENCH_DONE").write_text(json.dumps({"films": films}))
    return time.perf_counter() - started


def disk_size(path: Path, pattern: str = "*") -> int:
    return sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file())


def build_packs(store: MemoryStore, films: int) -> float:
    """Every film's search packs (memory/vector_pack.py), as each film's ingest writes them."""
    from moviemem.memory.search import write_packs

    started = time.perf_counter()
    for i in range(films):
        write_packs(store, f"film{i:05d}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--films", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/moviemem-retrieval-bench"))
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    path = args.dir / f"films-{args.films}"
    done = path / "BENCH_DONE"
    build_s = None
    if args.rebuild or not done.exists():
        shutil.rmtree(path, ignore_errors=True)
        print(f"building a library of {args.films} films in {path}", file=sys.stderr)
        build_s = build(path, args.films)
    store = MemoryStore(path)
    packs_s = None
    if not (path / "BENCH_PACKS").exists():
        print("writing every film's search packs", file=sys.stderr)
        packs_s = build_packs(store, args.films)
        (path / "BENCH_PACKS").write_text(json.dumps({"seconds": packs_s}))
    size = disk_size(path)
    pack_bytes = disk_size(path / "media", "*.arrow")

    from moviemem.memory import vector_pack
    from moviemem.memory.view import FilmMemory
    from moviemem.retrievers.text import TextRetriever, embed_query

    rng = random.Random(1)
    texts = Texts(99)
    queries = texts.make(args.queries, 4, 12)
    embed_query("minilm", "warm up the encoder")  # model load is not query time
    t0 = time.perf_counter()
    for q in queries:
        embed_query("minilm", q)
    embed_ms = (time.perf_counter() - t0) / len(queries) * 1000
    retriever = TextRetriever("hybrid")
    films = [FilmMemory(store, f"film{rng.randrange(args.films):05d}") for _ in range(min(20, args.films))]
    for f in films[:3]:  # warm-up: open tables, load index metadata
        retriever.retrieve(f, queries[0], k=args.k)
    lat, cold = [], []
    hits = 0
    seen = {f.film_id for f in films[:3]}
    load_before = os.getloadavg()[0]
    for i, q in enumerate(queries):
        film = films[i % len(films)]
        s = time.perf_counter()
        found = retriever.retrieve(film, q, k=args.k)
        ms = (time.perf_counter() - s) * 1000
        (lat if film.film_id in seen else cold).append(ms)  # cold: the film's vectors are read first
        seen.add(film.film_id)
        hits += len(found)
        assert all(e.film_id == film.film_id for e in found)
    # a film whose packs are gone (or never written): its first query reads LanceDB, then packs
    unpacked = []
    for i in range(5):
        fid = f"film{(rng.randrange(args.films) + i) % args.films:05d}"
        if fid in seen:
            continue
        shutil.rmtree(store.media_dir(fid) / vector_pack.FOLDER, ignore_errors=True)
        s = time.perf_counter()
        retriever.retrieve(FilmMemory(store, fid), queries[i], k=args.k)
        unpacked.append((time.perf_counter() - s) * 1000)
    everything = lat + cold
    p50, p95, p99 = np.percentile(everything, [50, 95, 99])
    warm50, warm95 = np.percentile(lat, [50, 95])
    cold50 = float(np.median(cold)) if cold else float("nan")
    result = {"films": args.films, "rows_per_film": PER_FILM, "build_s": None if build_s is None else round(build_s, 1),
              "size_gb": round(size / 1e9, 3), "queries": len(lat), "k": args.k, "mean_hits": round(hits / len(lat), 1),
              "p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2), "p99_ms": round(float(p99), 2),
              "warm_p50_ms": round(float(warm50), 2), "warm_p95_ms": round(float(warm95), 2),
              "cold_queries": len(cold), "cold_p50_ms": round(cold50, 2),
              "unpacked_first_query_p50_ms": round(float(np.median(unpacked)), 2) if unpacked else None,
              "pack_gb": round(pack_bytes / 1e9, 3), "pack_share_of_library": round(pack_bytes / max(1, size - pack_bytes), 4),
              "packs_build_s": None if packs_s is None else round(packs_s, 1),
              "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
              "query_embedding_ms": round(embed_ms, 2)}
    if args.json:
        print(json.dumps(result))
    else:
        built = f"{build_s:.0f} s" if build_s is not None else "reused"
        print(f"library: {args.films} films, {result['size_gb']} GB on disk, build {built}; search packs "
              f"{result['pack_gb']} GB (+{100 * result['pack_share_of_library']:.1f}% of the rest)")
        print(f"hybrid search in one film (k={args.k}, {len(everything)} queries): p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
              f"p99 {p99:.1f} ms; query embedding {embed_ms:.1f} ms (not included)")
        print(f"  warm (film's vectors cached): p50 {warm50:.1f} ms, p95 {warm95:.1f} ms; first query on a film "
              f"({len(cold)}, from its packs): median {cold50:.1f} ms; load average {load_before:.1f} -> "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if unpacked:
            print(f"  first query on a film without packs ({len(unpacked)}, reads LanceDB and writes them): median "
                  f"{np.median(unpacked):.1f} ms")
    return result


if __name__ == "__main__":
    main()
