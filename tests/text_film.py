"""Small text films for tests: SRT text from (start, end, line) cues in seconds, and a library holding one."""

from __future__ import annotations

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
