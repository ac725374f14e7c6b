"""A film's first question in a fresh process with and without a saved prompt state (issue 65), `local` backbone.

    flock /tmp/moviemem-heavy.lock python bench/prefix_states.py --library /tmp/h7lib --films mf2-22,mf2-6,mf2-51

Per film, each step in a new process (nothing held in memory), the subtitles policy asking statements of the
film's first two pairs in ../shared/datasets/dev/mf2_dev_claims.jsonl (timing material only: nothing is tuned
to them):
  1. saved states on, none saved yet: statement 1 reads the transcript and saves the state (read, save time);
  2. saved states on: statement 1 again (restored: load time, the same answer?);
  3. saved states on: statement 2, never asked before (restored);
  4. saved states off: statement 2 read from scratch (the "without" of step 3).
After each answer the same prompt is sent once more for its next token's five best log-probabilities, printed
to 4 decimals: steps 1 and 2, and steps 3 and 4, must print the same. The state folder is
<library>/cache/prefix-states-bench (cleared for each film), so the library's own saved states are untouched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mf2_films import import_mf2_films  # beside this script

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"


def statements(film: str) -> list[str]:
    pairs = [json.loads(line) for line in (SHARED / "dev" / "mf2_dev_claims.jsonl").read_text().splitlines() if line.strip()]
    mine = [p for p in pairs if p["film_id"] == film]
    return [mine[0]["true_claim"], mine[1]["true_claim"]]


def step(library: str, film: str, statement: str, folder: str, states_on: bool) -> dict[str, Any]:
    """One question in this (fresh) process; its timings, answer and next-token log-probabilities."""
    from moviemem import Library
    from moviemem.backbones import load
    from moviemem.backbones.base import Wrapper

    class Recorder(Wrapper):
        def send(self, request: Any) -> Any:
            self.request = request
            return self.inner.send(request)

    inner: Any = load("local", isolate=False, state_dir=folder, state_max_bytes=(20 << 30) if states_on else 0)
    b = Recorder(inner)
    lib = Library(library, create=False)
    started = time.perf_counter()
    answer = lib.film(film).ask(statement, kind="claim", policy="subtitles", backbone=b)
    wall = time.perf_counter() - started
    perf = dict(inner.last_perf)
    probe = inner.send(replace(b.request, logprobs=5, max_tokens=1, json_schema=None))
    top = {k: round(v, 4) for k, v in (probe.logprobs or [{}])[0].items()}
    return {"wall_s": round(wall, 1), "choice": answer.choice, "text": answer.text, "invalid": answer.invalid,
            "prompt_tokens": answer.usage.input_tokens, "read": answer.usage.read_input_tokens,
            "restored": answer.usage.restored_input_tokens, "restore_s": round(perf.get("restore_s", 0.0), 2),
            "save_s": round(perf.get("save_s", 0.0), 2), "top5": top}


def run_film(library: str, film: str) -> None:
    from moviemem.backbones.prefix_states import PrefixStates

    folder = Path(library) / "cache" / "prefix-states-bench"
    PrefixStates(folder, 1 << 40, 256).clear()
    s1, s2 = statements(film)
    rows = []
    for name, statement, on in (("1 fresh, saves", s1, True), ("2 restored, same", s1, True),
                                ("3 restored, new", s2, True), ("4 without, new", s2, False)):
        done = subprocess.run([sys.executable, __file__, "--child", library, film, statement, str(folder), str(int(on))],
                              capture_output=True, text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        if name.startswith("1"):
            row["state_bytes"] = sum(p.stat().st_size for p in folder.glob("*.state"))
        rows.append((name, row))
        print(f"{film} {name}: {json.dumps(row)}", flush=True)
    same = rows[0][1]["top5"] == rows[1][1]["top5"] and rows[0][1]["text"] == rows[1][1]["text"]
    same_new = rows[2][1]["top5"] == rows[3][1]["top5"] and rows[2][1]["text"] == rows[3][1]["text"]
    r1, r2, r3, r4 = (r for _, r in rows)
    print(f"| {film} | {r1['prompt_tokens']:,} | {r1['wall_s']:.0f} s | {r4['wall_s']:.0f} s | {r2['wall_s']:.0f} s | "
          f"{r3['wall_s']:.0f} s | {r1['state_bytes'] / 2**20:,.0f} MiB | {r1['save_s']:.1f} s | {r3['restore_s']:.1f} s | "
          f"{'yes' if same else 'NO'} / {'yes' if same_new else 'NO'} |", flush=True)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        library, film, statement, folder, on = sys.argv[2:7]
        print(json.dumps(step(library, film, statement, folder, on == "1")))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", required=True)
    ap.add_argument("--films", default="mf2-22,mf2-6,mf2-51")
    ap.add_argument("--mf2", type=Path, default=SHARED / "mf2")
    args = ap.parse_args()
    films = [f.strip() for f in args.films.split(",") if f.strip()]
    from moviemem import Library

    took = import_mf2_films(Library(args.library), args.mf2, films)
    if took is not None:
        print(f"imported {', '.join(films)} in {took:.0f} s", flush=True)
    print("| film | prompt tokens | first question, read | without (statement 2) | restored (statement 1) | "
          "restored (statement 2) | state on disk | save | load | same answers and log-probabilities (1=2 / 3=4) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
    for film in films:
        run_film(args.library, film)


if __name__ == "__main__":
    main()
