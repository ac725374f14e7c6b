"""Probe: read a video's metadata and refuse what cannot be ingested, before anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from ..foundation.digests import file_sha256
from ..foundation.errors import MovieMemError

MIN_SIDE = 16


@dataclass(frozen=True)
class Probe:
    path: Path
    sha256: str
    duration_s: float
    fps: float
    n_frames: int
    width: int
    height: int
    has_audio: bool
    variable_frame_rate: bool


def _bad(path: Path, why: str) -> MovieMemError:
    return MovieMemError(f"cannot ingest {path}: {why}")


def probe(path: Path) -> Probe:
    """Open the container, check there is decodable video from start to end, and measure it."""
    path = Path(path)
    if not path.exists():
        raise _bad(path, "no such file")
    if path.is_dir():
        raise _bad(path, "it is a directory")
    if path.stat().st_size == 0:
        raise _bad(path, "the file is empty")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise _bad(path, f"not a readable video ({type(exc).__name__}: {exc})") from None
    with container:
        if not container.streams.video:
            raise _bad(path, "it has no video stream (audio-only or not a video); use --text for subtitles-only films")
        vs = container.streams.video[0]
        width, height = vs.codec_context.width, vs.codec_context.height
        if width < MIN_SIDE or height < MIN_SIDE:
            raise _bad(path, f"the picture is {width}x{height} pixels; at least {MIN_SIDE}x{MIN_SIDE} is needed")
        has_audio = bool(container.streams.audio)
        duration = _duration(container, vs)
        if duration <= 0:
            raise _bad(path, "its duration is zero or unknown")
        rate = vs.average_rate or vs.guessed_rate or Fraction(25)
        fps = float(rate)
        first, last = _decode_ends(container, vs, duration, path)
        if last < duration - max(2.0, 0.02 * duration):
            raise _bad(path, f"it is truncated: frames stop at {last:.1f} s of {duration:.1f} s")
        real_rate = vs.guessed_rate
        vfr = bool(vs.average_rate and real_rate and abs(float(vs.average_rate) - float(real_rate)) > 0.01)
        n_frames = vs.frames or int(round(duration * fps))
    return Probe(path=path, sha256=file_sha256(path), duration_s=duration, fps=fps, n_frames=max(1, n_frames),
                 width=width, height=height, has_audio=has_audio, variable_frame_rate=vfr)


def _duration(container: av.container.InputContainer, vs: av.video.stream.VideoStream) -> float:
    if vs.duration and vs.time_base:
        return float(vs.duration * vs.time_base)
    if container.duration:
        return container.duration / av.time_base
    return 0.0


def _decode_ends(container: Any, vs: Any, duration: float, path: Path) -> tuple[float, float]:
    """Decode the first frame, then seek near the end and decode to the last frame."""
    try:
        first = next(container.decode(vs))
        t_first = float(first.time or 0.0)
        target = max(0.0, duration - 3.0)
        container.seek(int(target / vs.time_base), stream=vs, backward=True, any_frame=False)
        t_last = t_first
        for frame in container.decode(vs):
            if frame.time is not None:
                t_last = max(t_last, float(frame.time))
    except StopIteration:
        raise _bad(path, "no video frame could be decoded") from None
    except (av.error.FFmpegError, OSError) as exc:
        raise _bad(path, f"decoding failed ({type(exc).__name__}: {exc}); the file may be truncated or corrupt") from None
    return t_first, t_last
