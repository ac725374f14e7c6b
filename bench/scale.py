"""Films per hour, serial versus Ray, on this machine; memory per film; a NEST-scale projection.

Usage: python bench/scale.py [--films 4] [--minutes 2.2] [--work DIR] [--machines 1,10,25,50,100]
                             [--cores 16] [--usd-per-machine-hour X] [--ratio R] [--reuse] [--json]

Renders `--films` synthetic films (with speech), ingests them one after another in this
process, then again on a local Ray cluster with all of this machine's cores (frames, shots,
segments, ASR with whisper base, CLIP with random weights, OCR; no captioner, no events: no
model server here). Prints films per hour both ways, the memory size per film on disk, and the
projection for NEST (1,005 films of about 98 minutes) on N machines:

  per-film compute  = ratio x 98 min, ratio = seconds of ingest per second of a 98-minute film
                      on one of these 2-core machines, from the serial stage timings: CLIP of the
                      largest pool is a fixed cost per film, the other stages grow with length
                      (--ratio overrides; the 10-minute bench/ingest_speed.py run measured 0.202)
  films per machine-hour = (Ray speedup measured here) x (cores / this machine's cores) / per-film compute
  wall time on N machines = 1,005 / (N x films per machine-hour); machine-hours and cost follow.
Scaling by cores is an assumption (the stages are CPU-bound and films are independent);
the Ray speedup measured on this machine already includes Ray's own overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the local cluster stays on 127.0.0.1

from moviemem import Library  # noqa: E402
from moviemem.foundation.config import cpu_cores, get_settings  # noqa: E402
from moviemem.memory.store import MemoryStore  # noqa: E402
from moviemem.synth import render  # noqa: E402

NEST_FILMS = 1005
NEST_MINUTES = 98.0
REFERENCE_RATIO = 0.202  # bench/ingest_speed.py, 10-minute synthetic film, whisper base + random CLIP + OCR


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def memory_size(lib: Path, film_ids: list[str]) -> dict[str, Any]:
    """Bytes on disk per film: tables, pool frames (a fixed count per film) and strip frames
    (0.5 fps, so proportional to length); and the same scaled to a 98-minute film."""
    store = MemoryStore(lib)
    tables = sum(_du(p) for p in lib.glob("*.lance"))
    pool_bytes = strip_bytes = 0
    minutes = 0.0
    for fid in film_ids:
        minutes += store.film_row(fid).duration_s / 60
        for r in store.query("frames", f"film_id = '{fid}'", ["image", "pools"]).to_pylist():
            size = (lib / r["image"]).stat().st_size
            if r["pools"]:
                pool_bytes += size
            else:
                strip_bytes += size
    n = len(film_ids)
    per_min_variable = (tables + strip_bytes) / minutes
    return {"films": n, "minutes": round(minutes, 2), "tables_bytes": tables, "pool_frames_bytes": pool_bytes,
            "strip_frames_bytes": strip_bytes, "per_film_bytes": round((tables + pool_bytes + strip_bytes) / n),
            "per_98min_film_bytes": round(pool_bytes / n + per_min_variable * NEST_MINUTES)}


FIXED_STAGES = ("clip",)  # the CLIP pool is a fixed number of frames whatever the film's length


def _secs(a: str, b: str) -> float:
    import datetime as dt

    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def per_film_model(lib: Path, film_ids: list[str]) -> dict[str, float]:
    """Serial stage timings split into a fixed part per film (CLIP of the largest pool) and a
    part proportional to length (frames, shots, ASR, OCR, ...): short test films would
    otherwise make the fixed part look like a rate."""
    store = MemoryStore(lib)
    fixed = variable = minutes = 0.0
    for fid in film_ids:
        minutes += store.film_row(fid).duration_s / 60
        for r in store.stage_rows(fid):
            if r.status == "done" and r.finished_at:
                took = _secs(r.started_at, r.finished_at)
                if r.stage in FIXED_STAGES:
                    fixed += took
                else:
                    variable += took
    n = len(film_ids)
    per_min = variable / minutes
    at_98 = fixed / n + per_min * NEST_MINUTES
    return {"fixed_s_per_film": round(fixed / n, 1), "variable_s_per_film_minute": round(per_min, 2),
            "s_per_98min_film": round(at_98, 1), "ratio_98min": round(at_98 / (NEST_MINUTES * 60), 3)}


def ingest_serial(lib_dir: Path, films: list[tuple[str, Path]], settings: Any) -> float:
    lib = Library(lib_dir, settings)
    t = time.perf_counter()
    for fid, path in films:
        lib.ingest(path, film_id=fid)
    return time.perf_counter() - t


def ingest_ray(lib_dir: Path, films: list[tuple[str, Path]], settings: Any, cores: int) -> tuple[float, float]:
    """(seconds for the films, seconds to start the cluster)."""
    import ray

    from moviemem.scale.ray_ingest import FilmJob, ingest_films

    t = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    started = time.perf_counter() - t
    try:
        t = time.perf_counter()
        out = ingest_films(lib_dir, [FilmJob(p, film_id=f) for f, p in films], settings=settings)
        took = time.perf_counter() - t
    finally:
        ray.shutdown()
    failed = [f"{o.film_id}: {o.error}" for o in out if not o.ok]
    if failed:
        sys.exit("Ray ingest failed: " + "; ".join(failed))
    return took, started


def projection(ratio: float, speedup: float, here_cores: int, cores: int, machines: list[int],
               usd_per_hour: float | None) -> list[dict[str, Any]]:
    per_film_s = ratio * NEST_MINUTES * 60  # on one machine like this one, one film at a time
    per_machine_hour = speedup * (cores / here_cores) * 3600 / per_film_s
    rows = []
    for n in machines:
        wall_h = NEST_FILMS / (n * per_machine_hour)
        row = {"machines": n, "cores_each": cores, "films_per_hour": round(n * per_machine_hour, 1),
               "wall_hours": round(wall_h, 2), "machine_hours": round(wall_h * n, 1)}
        if usd_per_hour is not None:
            row["usd"] = round(wall_h * n * usd_per_hour, 2)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--films", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=2.2, help="length of each synthetic film (at least 2.17)")
    ap.add_argument("--work", type=Path, default=Path("out/bench-scale"))
    ap.add_argument("--machines", default="1,10,25,50,100")
    ap.add_argument("--cores", type=int, default=16, help="cores per machine in the projection")
    ap.add_argument("--usd-per-machine-hour", type=float, default=None, help="price of one machine-hour (your provider's)")
    ap.add_argument("--ratio", type=float, default=None, help="ingest seconds per film second (default: measured here)")
    ap.add_argument("--reuse", action="store_true", help="reuse the last run's libraries and timings (analysis only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    here = cpu_cores()
    films = []
    for i in range(args.films):
        fid = f"scale-{i}"
        d = args.work / "films" / fid
        if not (d / "film.mp4").exists():
            render(d, minutes=args.minutes, seed=100 + i, film_id=fid)
        films.append((fid, d / "film.mp4"))
    settings = dict(clip_pretrained="random")
    serial_lib, ray_lib = args.work / "serial-lib", args.work / "ray-lib"
    timings = args.work / "timings.json"
    if args.reuse and timings.exists():
        serial_s, ray_s, ray_start_s, load_before, load_after = json.loads(timings.read_text())
    else:
        for lib in (serial_lib, ray_lib):
            shutil.rmtree(lib, ignore_errors=True)
        load_before = os.getloadavg()[0]
        serial_s = ingest_serial(serial_lib, films, get_settings(library=serial_lib, **settings))
        ray_s, ray_start_s = ingest_ray(ray_lib, films, get_settings(library=ray_lib, **settings), here)
        load_after = os.getloadavg()[0]
        timings.write_text(json.dumps([serial_s, ray_s, ray_start_s, load_before, load_after]))

    counts = {f: (Library(serial_lib).film(f).summary()["counts"], Library(ray_lib).film(f).summary()["counts"])
              for f, _ in films}
    same = all(x == y for x, y in counts.values())
    film_s = sum(MemoryStore(serial_lib).film_row(f).duration_s for f, _ in films)
    size = memory_size(ray_lib, [f for f, _ in films])
    ratio_here = serial_s / film_s
    speedup = serial_s / ray_s
    model = per_film_model(serial_lib, [f for f, _ in films])
    ratio = args.ratio if args.ratio is not None else model["ratio_98min"]
    machines = [int(x) for x in args.machines.split(",") if x.strip()]
    result = {
        "machine": {"cores": here, "load_average_before": round(load_before, 2), "load_average_after": round(load_after, 2)},
        "films": args.films, "film_minutes_each": round(film_s / args.films / 60, 2),
        "serial": {"seconds": round(serial_s, 1), "films_per_hour": round(3600 * args.films / serial_s, 1),
                   "ratio": round(ratio_here, 3)},
        "ray": {"seconds": round(ray_s, 1), "films_per_hour": round(3600 * args.films / ray_s, 1),
                "cluster_start_s": round(ray_start_s, 1), "speedup": round(speedup, 2)},
        "same_rows_serial_and_ray": same,
        "per_film_model": model,
        "memory": size,
        "projection": {"films": NEST_FILMS, "minutes_each": NEST_MINUTES, "ratio_used": round(ratio, 3),
                       "reference_ratio": REFERENCE_RATIO,
                       "storage_gb": round(size["per_98min_film_bytes"] * NEST_FILMS / 1e9, 1),
                       "rows": projection(ratio, speedup, here, args.cores, machines, args.usd_per_machine_hour),
                       "rows_at_reference_ratio": projection(REFERENCE_RATIO, speedup, here, args.cores, machines,
                                                             args.usd_per_machine_hour)},
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"machine: {here} cores, load average {load_before:.1f} before, {load_after:.1f} after")
    print(f"{args.films} synthetic films of {film_s / args.films / 60:.2f} min (ASR whisper base, random CLIP, OCR)")
    print(f"serial: {serial_s:7.1f} s = {result['serial']['films_per_hour']:6.1f} films/h  (ratio {ratio_here:.3f}x real time)")
    print(f"ray:    {ray_s:7.1f} s = {result['ray']['films_per_hour']:6.1f} films/h  (speedup {speedup:.2f}x; "
          f"cluster start {ray_start_s:.1f} s not counted)")
    print(f"rows identical serial vs Ray: {same}")
    print(f"serial stage time: {model['fixed_s_per_film']} s fixed per film (CLIP pool) + "
          f"{model['variable_s_per_film_minute']} s per film minute -> {model['s_per_98min_film']} s for a 98-min film "
          f"(ratio {model['ratio_98min']})")
    print(f"memory per film: {size['per_film_bytes'] / 1e6:.1f} MB here; {size['per_98min_film_bytes'] / 1e6:.1f} MB "
          f"for a 98-min film; {result['projection']['storage_gb']} GB for {NEST_FILMS} films")
    for label, key, r in (("measured", "rows", ratio), ("reference", "rows_at_reference_ratio", REFERENCE_RATIO)):
        print(f"NEST projection, ratio {r:.3f} ({label}), {args.cores}-core machines:")
        for row in result["projection"][key]:
            cost = f", ${row['usd']:.2f}" if "usd" in row else ""
            print(f"  {row['machines']:>4} machines: {row['films_per_hour']:8.1f} films/h, wall {row['wall_hours']:7.2f} h, "
                  f"{row['machine_hours']:8.1f} machine-h{cost}")


if __name__ == "__main__":
    main()
