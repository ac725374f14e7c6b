"""Who speaks and who is on screen: diarization error, naming accuracy, speaker and face counts,
and the cost of the speakers, faces and characters stages.

Usage: python bench/characters.py [--minutes 10] [--seed 7] [--work DIR] [--asr | --merge-cues] [--captions] [--media DIR]
       [--no-real]

Synthetic film (truth.json names each line's speaker): ingested with its truth subtitles (or
with ASR, --asr), then
- DER: frame-level diarization error rate (10 ms frames, no collar) of the voice parts (a line, or
  each speaker turn of a line split by voice, with its own span) against the true speakers, clusters mapped to speakers one-to-one by the Hungarian method:
  (missed speech + false alarm + confusion) / reference speech;
  with --merge-cues the subtitles are as real files often are: each pair of adjacent truth cues
  spoken by different characters less than 1.5 s apart is one cue, with no dialogue dash, so only
  the voice can split it; with --captions the film's audio description (captions.srt, who does
  what on screen, as Movie101 narration or a captioner gives) is imported too, so voices no line
  names can be named by who is on screen while they speak;
- naming: share of true lines whose speaker turn (most overlap) carries the right speaker_name;
- cost: seconds per stage and their sum as a share of the film's length (target <= 0.05x).
Real clips under ../shared/media (skipped when absent): speakers, face identities, thumbnails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from moviemem import Library
from moviemem.foundation.config import get_settings
from moviemem.memory.view import turns_of
from moviemem.synth import render

STAGES = ["speakers", "faces", "characters"]
MEDIA = Path(__file__).resolve().parents[2] / "shared" / "media"


def _secs(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def der(reference: list[tuple[float, float, str]], hypothesis: list[tuple[float, float, int]], step: float = 0.01) -> dict:
    """Frame-level DER of hypothesis (start, end, cluster; cluster -1 = no speaker) against
    reference (start, end, speaker); overlapping speech counts once per frame (first label)."""
    end = max([b for _, b, _ in reference] + [b for _, b, _ in hypothesis] + [0.0])
    n = int(np.ceil(end / step)) + 1
    speakers = sorted({s for _, _, s in reference})
    ref = np.full(n, -1)
    for a, b, s in reference:
        seg = ref[int(a / step): int(b / step)]
        seg[seg < 0] = speakers.index(s)
    hyp = np.full(n, -1)
    for a, b, c in hypothesis:
        if c >= 0:
            seg = hyp[int(a / step): int(b / step)]
            seg[seg < 0] = c
    k = max(hyp.max() + 1, 1)
    overlap = np.zeros((k, len(speakers)))
    both = (ref >= 0) & (hyp >= 0)
    np.add.at(overlap, (hyp[both], ref[both]), 1)
    rows, cols = linear_sum_assignment(-overlap)
    total = int((ref >= 0).sum())
    missed = int(((ref >= 0) & (hyp < 0)).sum())
    false_alarm = int(((ref < 0) & (hyp >= 0)).sum())
    confusion = int(both.sum() - overlap[rows, cols].sum())
    return {"der": round((missed + false_alarm + confusion) / max(total, 1), 4),
            "missed": round(missed / max(total, 1), 4), "false_alarm": round(false_alarm / max(total, 1), 4),
            "confusion": round(confusion / max(total, 1), 4), "speakers_true": len(speakers),
            "speakers_found": int(len(set(hyp[hyp >= 0].tolist())))}


def merged_cues(utterances: list[dict], gap_s: float = 1.5) -> list[dict]:
    """Truth lines as subtitle cues where each pair of adjacent lines by different speakers, less
    than `gap_s` apart, is one cue (texts joined by a space, no dash); pairs do not chain."""
    out: list[dict] = []
    i = 0
    while i < len(utterances):
        a = utterances[i]
        b = utterances[i + 1] if i + 1 < len(utterances) else None
        if b is not None and a["speaker"] != b["speaker"] and b["start"] - a["end"] < gap_s:
            out.append({"start": a["start"], "end": b["end"], "text": f"{a['text']} {b['text']}", "speaker": ""})
            i += 2
        else:
            out.append(a)
            i += 1
    return out


def naming_accuracy(truth: list[dict], film) -> float:
    utts = [turn for u in film.utterances() for turn in turns_of(u)]  # a line split by voice: each turn
    right = 0
    for t in truth:
        best = max(utts, key=lambda u: min(u.end, t["end"]) - max(u.start, t["start"]), default=None)
        if best is not None and min(best.end, t["end"]) > max(best.start, t["start"]) and best.speaker_name == t["speaker"]:
            right += 1
    return right / max(len(truth), 1)


def _stage_costs(film) -> dict[str, float]:
    return {s.stage: _secs(s.started_at, s.finished_at) for s in film.stages() if s.stage in STAGES}


def _print_film(film, label: str) -> None:
    chars = film.characters()
    stages = {s.stage: s for s in film.stages()}
    for name in STAGES:
        s = stages.get(name)
        print(f"  {name:<10} {s.status if s else '-':<8} {(s.reason if s else '')[:100]}")
    faces = film.faces()
    thumbs = sorted({f.thumbnail for f in faces if f.thumbnail})
    print(f"  {label}: {sum(c.voice >= 0 for c in chars)} voices, {len({f.cluster for f in faces if f.cluster >= 0})} face "
          f"identities from {len(faces)} faces; characters: " + ", ".join(f"{c.char_id}={c.name}({c.lines} lines)" for c in chars))
    for t in thumbs:
        print(f"  thumbnail {film.store.root / t}")


def synthetic(work: Path, minutes: float, asr: bool, seed: int = 7, merge: bool = False, captions: bool = False,
              backbone: str | None = None) -> None:
    film_dir = work / f"synth-{minutes:g}m-seed{seed}"
    if not (film_dir / "truth.json").exists():
        render(film_dir, minutes=minutes, seed=seed)
    truth = json.loads((film_dir / "truth.json").read_text())
    source = ("-asr" if asr else "-merged" if merge else "") + ("-captions" if captions else "")
    lib_dir = work / f"lib-seed{seed}{source}"  # one library per film and transcript source
    # with a backbone, the characters stage also asks it to name the voices the rules left unnamed
    lib = Library(lib_dir, get_settings(library=lib_dir, **({"backbone": backbone} if backbone else {})))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import truth_srt

    cues = {**truth, "utterances": merged_cues(truth["utterances"])} if merge else truth
    subs = None if asr else truth_srt(cues, film_dir / f"subtitles{'-merged' if merge else ''}.srt")
    told = film_dir / "captions.srt" if captions else None
    lib.ingest(film_dir / "film.mp4", film_id="synth", subtitles=subs, captions=told, stages=["transcript"])
    film = lib.ingest(film_dir / "film.mp4", film_id="synth", subtitles=subs, captions=told, stages=STAGES)
    hyp = [(v.start, v.end, v.cluster) for v in film.store.rows("voices", film.run_filter("voices"))]  # voice parts
    ref = [(u["start"], u["end"], u["speaker"]) for u in truth["utterances"]]
    result = der(ref, hyp)
    label = ("ASR" if asr else f"truth subtitles, {len(cues['utterances'])} cues{' merged' if merge else ''}") + (
        ", captions" if captions else "") + (f", names by {backbone}" if backbone else "")
    costs = _stage_costs(film)
    total = sum(costs.values())
    print(f"synthetic {minutes:g} min, seed {seed} ({label}): DER {result['der']:.1%} "
          f"(missed {result['missed']:.1%}, false alarm {result['false_alarm']:.1%}, confusion {result['confusion']:.1%}); "
          f"speakers {result['speakers_found']} found / {result['speakers_true']} true")
    print(f"  lines to the right named character: {naming_accuracy(truth['utterances'], film):.1%}")
    print("  cost: " + ", ".join(f"{k} {v:.1f} s" for k, v in costs.items())
          + f"; together {total:.1f} s = {total / truth['duration_s']:.3f}x real time")
    _print_film(film, "synthetic")


def real(work: Path, media: Path) -> None:
    if not media.is_dir():
        print(f"real clips: skipped ({media} is absent)")
        return
    lib = Library(work / "lib-real", get_settings(library=work / "lib-real"))
    clips = [("sintel", media / "sintel_trailer.mp4", None), ("tears", media / "tears_of_steel_battle_clip.webm", None),
             ("hgf", media / "his_girl_friday_clip.mp4", media / "his_girl_friday_clip.vtt")]
    for fid, path, subs in clips:
        if not path.exists():
            print(f"{fid}: skipped ({path} is absent)")
            continue
        t = time.perf_counter()
        film = lib.ingest(path, film_id=fid, subtitles=subs, stages=STAGES)
        print(f"{fid} ({path.name}, {film.info.duration_s:.0f} s, {time.perf_counter() - t:.0f} s with its upstream stages): "
              + ", ".join(f"{k} {v:.1f} s" for k, v in _stage_costs(film).items()))
        _print_film(film, fid)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7, help="the synthetic film's seed")
    ap.add_argument("--work", type=Path, default=None, help="reuses a film rendered there by an earlier run")
    ap.add_argument("--asr", action="store_true", help="diarize ASR lines instead of the truth subtitles' lines")
    ap.add_argument("--merge-cues", action="store_true",
                    help="subtitles with adjacent cues by different speakers (< 1.5 s apart) merged, no dash")
    ap.add_argument("--captions", action="store_true", help="import the film's audio description (captions.srt) too")
    ap.add_argument("--media", type=Path, default=MEDIA)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--backbone", default=None, help="a text backbone that names the voices the rules left unnamed")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="moviemem-characters-"))
    if args.asr and args.merge_cues:
        ap.error("--merge-cues changes the subtitles; --asr uses none")
    synthetic(work, args.minutes, args.asr, args.seed, args.merge_cues, args.captions, args.backbone)
    if not args.no_real:
        real(work, args.media)


if __name__ == "__main__":
    main()
