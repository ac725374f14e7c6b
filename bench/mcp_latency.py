"""MCP tool-call latency and server start time on a large library.

Starts `moviemem mcp` as a client would (a subprocess, over stdio, or over HTTP on 127.0.0.1)
on the retrieval-latency bench's library (1,000 synthetic films of realistic size; built once
by bench/retrieval_latency.py and reused), then times, through the official SDK client:
server start (spawn to the first answered list_tools), the first search (opens the tables and
loads the query encoder), and p50/p95 of list_films, film_overview, search and read_range on
random films (search_warm: 20 films over and over, whose vectors the server has cached). `frames` is not timed: that library's frame rows name no image files.

    python -m moviemem.bench.mcp_latency --films 1000 --transport stdio
    python bench/mcp_latency.py --transport http --calls 100 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import Client, StdioServerParameters

from moviemem.bench.retrieval_latency import DURATION, Texts, build


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(library: Path, http_port: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "moviemem.cli", "mcp", "--library", str(library), "--no-ask"]
    return cmd + (["--http", str(http_port)] if http_port is not None else [])


async def wait_http(url: str, proc: subprocess.Popen, deadline: float) -> None:
    """Until the server accepts a connection (the client's first request then succeeds)."""
    port = int(url.split(":")[2].split("/")[0])
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            await anyio.sleep(0.01)
    raise RuntimeError("the HTTP server did not start")


async def run(args: argparse.Namespace, library: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    texts = Texts(99)
    queries = texts.make(args.calls, 4, 12)
    films = [f"film{rng.randrange(args.films):05d}" for _ in range(args.calls)]
    proc = None
    t0 = time.perf_counter()
    if args.transport == "stdio":
        server: Any = StdioServerParameters(command=sys.executable, args=server_command(library, None)[1:],
                                            env=dict(os.environ))
    else:
        port = free_port()
        proc = subprocess.Popen(server_command(library, port), stderr=subprocess.DEVNULL)
        server = f"http://127.0.0.1:{port}/mcp"
        await wait_http(server, proc, time.monotonic() + 60)
    lat: dict[str, list[float]] = {"list_films": [], "film_overview": [], "search": [], "search_warm": [],
                                   "read_range": []}
    try:
        async with Client(server) as client:
            await client.list_tools()
            start_s = time.perf_counter() - t0
            s = time.perf_counter()
            first = await client.call_tool("search", {"film_id": films[0], "query": queries[0], "k": args.k})
            first_search_s = time.perf_counter() - s
            assert not first.is_error, first.content

            async def timed(name: str, arguments: dict[str, Any], label: str | None = None) -> None:
                s = time.perf_counter()
                r = await client.call_tool(name, arguments)
                lat[label or name].append((time.perf_counter() - s) * 1000)
                assert not r.is_error, r.content

            for i in range(args.calls):  # random films: mostly the first query on a film (its vectors are read)
                await timed("search", {"film_id": films[i], "query": queries[i], "k": args.k})
            for i in range(args.calls):  # 20 films again and again: their vectors are cached
                await timed("search", {"film_id": films[i % 20], "query": queries[-1 - i], "k": args.k}, "search_warm")
            for i in range(max(1, args.calls // 4)):
                t = rng.uniform(0, DURATION - 60)
                await timed("read_range", {"film_id": films[i], "start": t, "end": t + 60})
                await timed("film_overview", {"film_id": films[i]})
            for _ in range(max(1, args.calls // 10)):
                await timed("list_films", {})
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    out: dict[str, Any] = {"films": args.films, "transport": args.transport, "server_start_s": round(start_s, 3),
                           "first_search_s": round(first_search_s, 3), "k": args.k,
                           "load_avg": round(os.getloadavg()[0], 2), "cores": os.cpu_count()}
    for name, ms in lat.items():
        p50, p95 = np.percentile(ms, [50, 95])
        out[name] = {"calls": len(ms), "p50_ms": round(float(p50), 1), "p95_ms": round(float(p95), 1)}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--films", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/moviemem-retrieval-bench"))
    ap.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    ap.add_argument("--calls", type=int, default=200, help="search calls (read_range/film_overview: a quarter, list_films: a tenth)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    library = args.dir / f"films-{args.films}"
    if not (library / "BENCH_DONE").exists():
        print(f"building a library of {args.films} films in {library}", file=sys.stderr)
        build(library, args.films)
    result = anyio.run(run, args, library)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"moviemem mcp over {args.transport} on {args.films} films: server start {result['server_start_s']:.2f} s "
              f"(spawn to first list_tools), first search {result['first_search_s']:.2f} s (tables, query encoder)")
        for name in ("search", "search_warm", "read_range", "film_overview", "list_films"):
            r = result[name]
            print(f"  {name:<14} {r['calls']:>4} calls: p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms")
        print(f"  load average {result['load_avg']} on {result['cores']} cores")
    return result


if __name__ == "__main__":
    main()
