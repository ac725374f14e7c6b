"""Small text films for tests: SRT text from (start, end, line) cues in seconds, a library holding one, and a bench
of its items beside it."""

from __future__ import annotations

import json
from pathlib import Path

from moviemem import Library


def srt_text(cues: list[tuple[float, float, str]]) -> str:
    def ts(t: float) -> str:
        ms = int(round(t * 1000))
        return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"

    return "\n".join(f"{i}\n{ts(a)} --> {ts(b)}\n{text}\n" for i, (a, b, text) in enumerate(cues, 1))


def text_film_library(root: Path, cues: list[tuple[float, float, str]], film_id: str, title: str) -> Library:
    """A library under `root` holding one text film made of `cues`."""
    (root / "film.srt").write_text(srt_text(cues))
    lib = Library(root / "lib")
    lib.ingest_text(root / "film.srt", film_id=film_id, title=title)
    return lib


def text_film_bench(root: Path, cues: list[tuple[float, float, str]], rows: list[dict[str, object]], film_id: str,
                    title: str) -> tuple[Library, Path]:
    """A library under `root` holding one text film, and `rows` (its items) as a JSONL bench `<film_id>.jsonl`."""
    lib = text_film_library(root, cues, film_id, title)
    bench = root / f"{film_id}.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return lib, bench
