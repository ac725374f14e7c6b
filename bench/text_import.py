"""Speed of a text-only collection import (`moviemem import-collection`), with embeddings.

    python bench/text_import.py ../shared/datasets/mf2          # a real MF² release
    python bench/text_import.py --kind movie101 DIR             # a Movie101v2 release
    python bench/text_import.py                                 # a synthetic MF²-like release

Imports into a fresh library and prints cues, cues/s, total seconds (model load included) and
the busy seconds of each phase: model load, parse (reading the tracks), embed (one parallel
pass per chunk of films), commit (each film's stages and LanceDB writes) and wait (the
committer idle, waiting for embeddings), and each stage's seconds summed over the films. Parse and embed run in a helper thread beside commit,
so the phases add up to more than the total. Without a path it writes 54 films of about 1,133
cues each (61,182 cues, as MF²): short subtitle lines of common English words drawn by Zipf's
law, some lines repeated as in real subtitles (about as many tokens a line as MF²'s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from moviemem import Library
from moviemem.foundation.config import cpu_cores, get_settings
from moviemem.foundation.errors import MovieMemError
from moviemem.memory.view import run_seconds

SYNTH_FILMS = 54
SYNTH_CUES = 61_182
COMMON = ["Yes.", "No.", "What?", "Thank you.", "Come on.", "All right.", "Hello.", "Oh!", "Why?", "I see.",
          "Good night.", "Wait a minute.", "What's the matter?", "I don't know.", "Where are you going?"]
# common English words, most frequent first: one word-piece each, like most subtitle words
WORDS = """the you i to a it and that of is in what we me this he your have be do not are know was for on my
just no with can get all there here so but like they him she out up go if about now right come well one want
her at how think see why man good who did will from back yeah then time as tell an them oh take say going look
some could would let never little mean been where by us were make had more got too way his very our something
over sure only really anything need nothing down when first thing much because love any off home give life
night day find away which should old say still talk mother father money two work around call again always help
better before house last tonight friend door boy girl woman long wife husband police car morning place maybe
town ever remember another letter mister miss captain doctor sir please thank yes went came told heard saw knew
thought made left found money paper story office newspaper judge train city river ship war country water dead
alive murder gun kill killed run stop wait hurry listen understand believe happen happened trouble today
tomorrow yesterday people world year years hand eyes head face heart minute hour dinner drink coffee""".split()


def _srt_time(s: float) -> str:
    ms = int(round(s * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def write_synthetic(root: Path, films: int = SYNTH_FILMS, cues: int = SYNTH_CUES, seed: int = 7) -> int:
    """An MF²-like release: transcripts/N.srt and synopsis/N.synopsis; returns the cue count."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]  # Zipf: a few words are everywhere
    (root / "transcripts").mkdir(parents=True, exist_ok=True)
    (root / "synopsis").mkdir(exist_ok=True)
    per_film = [cues // films + (1 if i < cues % films else 0) for i in range(films)]
    for n, count in enumerate(per_film, 1):
        blocks, t = [], 5.0
        for i in range(1, count + 1):
            if rng.random() < 0.06:
                line = rng.choice(COMMON)
            else:
                words = rng.choices(WORDS, weights, k=1 + int(rng.gammavariate(2.2, 4.2)))
                line = " ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!"])
            dur = 1.0 + len(line) / 18
            blocks.append(f"{i}\n{_srt_time(t)} --> {_srt_time(t + dur)}\n{line}\n")
            t += dur + rng.uniform(0.2, 4.0)
        (root / "transcripts" / f"{n}.srt").write_text("\n".join(blocks), encoding="utf-8")
        (root / "synopsis" / f"{n}.synopsis").write_text(f"Synthetic film {n}.", encoding="utf-8")
    return sum(per_film)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", nargs="?", type=Path, help="collection folder (default: a synthetic MF²-like one)")
    ap.add_argument("--kind", default="mf2", choices=["mf2", "movie101"])
    ap.add_argument("--limit", type=int, default=None, help="import only the first N films")
    ap.add_argument("--work", type=Path, default=None, help="folder for the library (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = ap.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="moviemem-text-import-"))
    root = args.path
    if root is None:
        root = work / "synthetic-mf2"
        if not (root / "transcripts").is_dir():
            write_synthetic(root)
    elif not root.is_dir():
        print(f"error: {root} is not a directory", file=sys.stderr)
        sys.exit(2)
    lib_dir = work / "lib"
    shutil.rmtree(lib_dir, ignore_errors=True)
    settings = get_settings(library=lib_dir)
    lib = Library(lib_dir, settings)

    from moviemem.models.embedder import get_embedder

    phases: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    cpu0, t0 = os.times(), time.perf_counter()
    embedder = get_embedder(settings.embedder, settings)
    load_s = time.perf_counter() - t0
    try:
        films = lib.import_collection(args.kind, root, limit=args.limit, timings=phases)
    except MovieMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    total = time.perf_counter() - t0
    cpu1 = os.times()
    cpu = cpu1.user - cpu0.user + cpu1.system - cpu0.system
    rows = sum(f.arrow("utterances").num_rows + f.arrow("captions").num_rows for f in films)
    cues = int(phases["cues"])
    result = {
        "collection": str(root), "films": len(films), "cues": cues, "rows": rows,
        "texts_embedded": int(phases["embedded"]), "total_s": round(total, 1), "cues_per_s": round(cues / total, 1),
        "phases_s": {k: round(phases[k], 1) for k in ("parse_s", "embed_s", "commit_s", "wait_s")},
        "cpu_s": round(cpu, 1), "model_load_s": round(load_s, 1), "embedder": embedder.name,
        "engine": embedder.backend, "cores": cpu_cores(), "load_avg_before": round(load_before, 2),
        "load_avg_after": round(os.getloadavg()[0], 2),
    }
    stage_s: dict[str, float] = {}
    for f in films:
        for st in f.stages():
            took = run_seconds(st)
            if st.status == "done" and took is not None:
                stage_s[st.stage] = stage_s.get(st.stage, 0.0) + took
    stages = {k: round(v, 1) for k, v in sorted(stage_s.items(), key=lambda kv: -kv[1])}
    result["stages_s"] = stages
    if rows < cues:  # a cue of two speakers ("- Who? - Me.") is two rows
        print(f"error: {rows} rows stored for {cues} cues", file=sys.stderr)
        sys.exit(1)
    if args.json:
        print(json.dumps(result))
        return
    print(f"collection  {root} ({len(films)} films)")
    print(f"engine      {embedder.name} on {embedder.backend}, {cpu_cores()} cores")
    print(f"phases      model load {load_s:.1f} s, parse {phases['parse_s']:.1f} s, embed {phases['embed_s']:.1f} s "
          f"({int(phases['embedded'])} distinct texts), commit {phases['commit_s']:.1f} s, "
          f"commit waiting on embed {phases['wait_s']:.1f} s")
    print(f"cpu         {cpu:.1f} s of CPU time; load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("stages      " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()) + " (all films, as `show` gives them)")
    print(f"cues        {cues}")
    print(f"cues/s      {cues / total:.0f}")
    print(f"total       {total:.1f} s")


if __name__ == "__main__":
    main()
