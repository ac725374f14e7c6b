"""Media helpers shared by backends: MIME sniffing, content hashes, clip cutting with ffmpeg."""

from __future__ import annotations

import functools
import hashlib
import json
import mimetypes
import shutil
import subprocess
from pathlib import Path

from ..foundation.errors import MovieMemError
from ..foundation.files import PRIVATE, atomic_path

_FULL_HASH_LIMIT = 256 << 20  # files above this are fingerprinted by size + sampled blocks
_SAMPLE = 16 << 20


def sniff_image_mime(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def guess_mime(path: str | Path, default: str) -> str:
    mime, _ = mimetypes.guess_type(str(path))
    return mime or default


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def media_fingerprint(path: str | Path) -> str:
    """Content fingerprint, memoised on (path, size, mtime) so a film is hashed once per process.

    Files over 256 MiB are fingerprinted from their size and three 16 MiB blocks (start,
    middle, end): full hashing of a 4 GB film on every cache lookup would dominate latency.
    """
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise MovieMemError(f"cannot read {p}: {exc.strerror}") from None
    return _fingerprint(str(p), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _fingerprint(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= _FULL_HASH_LIMIT:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        else:
            h.update(f"sampled:{size}".encode())
            for offset in (0, size // 2, size - _SAMPLE):
                f.seek(offset)
                h.update(f.read(_SAMPLE))
    return h.hexdigest()


def media_duration(path: str | Path) -> float:
    """Duration in seconds from ffprobe (memoised)."""
    p = Path(path).resolve()
    st = p.stat()
    return _duration(str(p), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=1024)
def _duration(path: str, size: int, mtime_ns: int) -> float:
    if not shutil.which("ffprobe"):
        raise MovieMemError("ffprobe is not installed; it is needed to read clip durations")
    proc = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", path],
        capture_output=True, text=True,
    )
    try:
        return float(json.loads(proc.stdout)["format"]["duration"])
    except (ValueError, KeyError, TypeError):
        raise MovieMemError(f"cannot read the duration of {path}") from None


def cut(path: str | Path, start: float, end: float | None, *, kind: str, scratch: Path) -> Path:
    """A re-encoded excerpt [start, end) as a small file, cached under `scratch` by content.

    Re-encoding (not stream copy) keeps the cut exact: stream copy starts at the previous
    keyframe, which can add seconds of footage the question did not ask about.
    """
    if not shutil.which("ffmpeg"):
        raise MovieMemError("ffmpeg is not installed; it is needed to cut clips")
    src = Path(path)
    ext = ".mp4" if kind == "video" else ".mp3"
    key = bytes_sha256(f"{media_fingerprint(src)}:{start:.3f}:{end}:{kind}".encode())[:32]
    out = scratch / "clips" / f"{key}{ext}"
    if out.is_file() and out.stat().st_size > 0:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-ss", f"{start:.3f}"]
    if end is not None:
        cmd += ["-t", f"{max(0.0, end - start):.3f}"]
    cmd += ["-i", str(src)]
    if kind == "video":
        cmd += ["-vf", "scale=-2:'min(480,ih)'", "-c:v", "libx264", "-preset", "veryfast", "-crf", "28",
                "-c:a", "aac", "-b:a", "64k", "-movflags", "+faststart"]
    else:
        cmd += ["-vn", "-c:a", "libmp3lame", "-b:a", "64k"]
    with atomic_path(out, mode=PRIVATE, suffix=ext) as tmp:  # concurrent cutters never see half a file
        proc = subprocess.run(cmd + [str(tmp)], capture_output=True, text=True)  # ffmpeg picks the format by suffix
        if proc.returncode != 0 or tmp.stat().st_size == 0:
            last = (proc.stderr.strip().splitlines() or ["ffmpeg failed"])[-1]
            raise MovieMemError(f"cannot cut {src.name} [{start}, {end}]: {last}")
    return out
