"""Scene coverage of text films (issue 64): the share of the time from a film's first line to its last that its
scenes cover, and what the cut before tiling covered.

    python bench/scene_coverage.py ../shared/datasets/mf2/transcripts --films 5,6,8,11,22,29,35,48,51,54

Each film's subtitles are read by the importer's own reader and split into turns, and its scenes are built from
the lines as the scenes stage builds them for a film without video or a character registry (graph/scenes.py).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from moviemem.graph.scenes import TextLine, build_scenes, split_at_gaps
from moviemem.ingest.texttracks import load_track
from moviemem.ingest.turns import split_turns


def union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transcripts", type=Path)
    ap.add_argument("--films", default="5,6,8,11,22,29,35,48,51,54")
    args = ap.parse_args()
    print("| film | scenes | covered | before (untiled) |\n|---|---|---|---|")
    for n in args.films.split(","):
        cues = load_track(args.transcripts / f"{n}.srt").cues
        items = split_turns([{"start": c.start, "end": c.end, "text": c.text, "speaker": ""} for c in cues])
        lines = [TextLine(it["start"], it["end"], "dialogue", re.sub(r"</?i>", "", it["text"]), f"utterances:{i}")
                 for i, it in enumerate(items) if it["text"].strip()]
        first, last = min(x.start for x in lines), max(x.end for x in lines)
        scenes = [(s.start, s.end) for s in build_scenes(lines, None)]
        covered = union([(max(a, first), min(b, last)) for a, b in scenes])
        before = union([(a, b) for a, b, _ in split_at_gaps(lines)])
        print(f"| mf2-{n} | {len(scenes)} | {covered / (last - first):.1%} | {before / (last - first):.1%} |")


if __name__ == "__main__":
    main()
