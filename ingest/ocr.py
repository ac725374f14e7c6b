"""On-screen text (intertitles, newspapers, letters, signs) from the 0.5 fps frame strip.

Tesseract is slow per frame and most film frames carry no text, so we (1) OCR a frame
only when its small greyscale thumbnail differs from the last OCR'd one (a held shot
carries the text forward), (2) run one single-threaded tesseract process per core
(its OpenMP threading is slower than two processes; the CLI is called directly because
pytesseract cannot set that per call), (3) upscale small frames, where
tesseract misses text under ~20 px, and (4) keep confident words, drop symbol noise, and
merge a text seen on consecutive frames into one row spanning first to last sighting.
"""

from __future__ import annotations

import csv
import difflib
import io
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from ..foundation.config import cpu_cores
from ..foundation.errors import MovieMemError

Progress = Callable[[int, int], None]

THUMB = (64, 36)  # thumbnail for change detection: each pixel averages an 8x8 block of a 512 px frame
CHANGED_PIXEL = 18.0  # a thumbnail pixel moving this much (0-255) means the picture changed
CHANGED_SHARE = 0.005  # ... when at least this share of its pixels moved (a short word is ~10)
MIN_OCR_SIDE = 1000  # frames are upscaled by a whole factor towards this longer side
SHORT_LINE = 10  # letters; shorter lines need SHORT_LINE_CONFIDENCE
SHORT_LINE_CONFIDENCE = 75.0
SAME_TEXT = 0.8  # difflib ratio of normalised texts above which two sightings are one text
# Tesseract page segmentation: automatic layout. Sparse text (11) also finds light letters
# on a dark box inside a mid-tone scene, which the global threshold of (3) misses, but it
# costs 1.7x the time and reads more texture as words.
PSM = 3


def read_onscreen(
    frames: list[tuple[float, Path]],
    *,
    lang: str = "eng",
    min_confidence: float = 60.0,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Rows {start, end, text, confidence} of text read on `frames` ((time, image) pairs).

    A row spans from the first frame showing a text to the last one plus the strip step
    (the median spacing of `frames`). `text` is the best-read version (lines joined by
    newlines); `confidence` is its mean word confidence (0-100).
    """
    tesseract = _check_tesseract(lang)
    frames = sorted(frames, key=lambda f: f[0])
    if not frames:
        return []
    step = float(np.median(np.diff([t for t, _ in frames]))) if len(frames) > 1 else 2.0
    to_read = _frames_to_read(frames)
    texts: dict[int, tuple[str, float]] = {}
    cores = cpu_cores()
    pool = ThreadPoolExecutor(max_workers=min(cores, 8))  # threads only wait on tesseract processes
    try:
        jobs = {i: pool.submit(_read_frame, tesseract, frames[i][1], lang, min_confidence) for i in to_read}
        for done, (i, job) in enumerate(jobs.items(), 1):
            texts[i] = job.result()
            if progress is not None:
                progress(done, len(jobs))
    finally:
        pool.shutdown(cancel_futures=True)
    # A frame not read shows what the last read frame showed.
    seen: list[tuple[float, str, float]] = []
    current = ("", 0.0)
    for i, (t, _) in enumerate(frames):
        current = texts.get(i, current)
        seen.append((t, *current))
    return _merge(seen, step)


def _check_tesseract(lang: str) -> str:
    tesseract = shutil.which("tesseract")
    if tesseract is None:
        raise MovieMemError("tesseract is not installed (Debian: apt-get install tesseract-ocr)")
    out = subprocess.run([tesseract, "--list-langs"], capture_output=True, text=True).stdout
    have = {line.strip() for line in out.splitlines()[1:]}
    missing = [part for part in lang.split("+") if part not in have]
    if missing:
        raise MovieMemError(f"tesseract has no language data for {'+'.join(missing)} (installed: {', '.join(sorted(have))})")
    return tesseract


def _thumb(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("L").resize(THUMB, Image.Resampling.BOX), dtype=np.float32)
    except OSError as exc:
        raise MovieMemError(f"cannot read strip frame {path}: {exc}") from exc


def _frames_to_read(frames: list[tuple[float, Path]]) -> list[int]:
    """Indices of frames whose picture changed since the last frame chosen for OCR."""
    chosen: list[int] = []
    last: np.ndarray | None = None
    for i, (_, path) in enumerate(frames):
        thumb = _thumb(path)
        if last is None or float(np.mean(np.abs(thumb - last) > CHANGED_PIXEL)) >= CHANGED_SHARE:
            chosen.append(i)
            last = thumb
    return chosen


def _prepare(path: Path) -> bytes:
    """Greyscale PNG, upscaled so small text reaches a size tesseract reads."""
    with Image.open(path) as im:
        grey = ImageOps.grayscale(im)
    factor = round(MIN_OCR_SIDE / max(grey.size))  # whole factors: fractional ones blur glyphs
    if factor > 1:
        grey = grey.resize((grey.width * factor, grey.height * factor), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    grey.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _read_frame(tesseract: str, path: Path, lang: str, min_confidence: float) -> tuple[str, float]:
    """(text, mean confidence) of the confident, word-like lines tesseract finds in `path`."""
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    proc = subprocess.run(
        [tesseract, "stdin", "stdout", "-l", lang, "--psm", str(PSM), "tsv"],
        input=_prepare(path), capture_output=True, env=env,
    )
    if proc.returncode != 0:
        raise MovieMemError(f"tesseract failed on {path}: {proc.stderr.decode(errors='replace').strip()[-200:]}")
    lines: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    rows = csv.DictReader(io.StringIO(proc.stdout.decode("utf-8", errors="replace")), delimiter="\t", quoting=csv.QUOTE_NONE)
    for row in rows:
        word, conf = (row.get("text") or "").strip(), float(row.get("conf") or -1)
        if word and conf >= min_confidence and re.search(r"\w", word):
            lines.setdefault((row["block_num"], row["par_num"], row["line_num"]), []).append((word, conf))
    kept = [words for words in lines.values() if _is_text(words)]
    if not kept:
        return "", 0.0
    confs = [c for words in kept for _, c in words]
    return "\n".join(" ".join(w for w, _ in words) for words in kept), round(sum(confs) / len(confs), 1)


def _is_text(words: list[tuple[str, float]]) -> bool:
    """A line worth keeping: mostly letters and digits, with a real word in it.

    Textures read as text give short lines ("wi Kl", "Nid") at middling confidence, so a
    line with few letters must be read confidently.
    """
    joined = "".join(w for w, _ in words)
    alnum = sum(ch.isalnum() for ch in joined)
    letters = sum(ch.isalpha() for ch in joined)
    longest = max(len(re.sub(r"[^\w]", "", w)) for w, _ in words)
    mean_conf = sum(c for _, c in words) / len(words)
    if alnum < 3 or longest < 2 or alnum / len(joined) < 0.6:
        return False
    return letters >= SHORT_LINE or mean_conf >= SHORT_LINE_CONFIDENCE


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _merge(seen: list[tuple[float, str, float]], step: float) -> list[dict[str, Any]]:
    """Consecutive sightings of the same (or nearly the same) text become one row."""
    rows: list[dict[str, Any]] = []
    open_row: dict[str, Any] | None = None
    for t, text, conf in seen:
        if not text:
            open_row = None
            continue
        if open_row is not None and difflib.SequenceMatcher(None, _norm(open_row["text"]), _norm(text)).ratio() >= SAME_TEXT:
            open_row["end"] = round(t + step, 3)
            if conf > open_row["confidence"]:
                open_row["text"], open_row["confidence"] = text, conf
            continue
        open_row = {"start": round(t, 3), "end": round(t + step, 3), "text": text, "confidence": conf}
        rows.append(open_row)
    return rows
