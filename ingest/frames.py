"""Frames: uniform pools at indices floor(i*T/N) and the 0.5 fps strip, decoded in one pass."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av

from ..foundation.errors import MovieMemError


@dataclass(frozen=True)
class FramePick:
    frame_idx: int
    t: float
    pools: tuple[int, ...]
    strip: bool
    image: Path


def pool_indices(n_frames: int, n: int) -> list[int]:
    """CHNB's uniform pool: floor(i*T/N) for i in [0, N); all frames when the film has fewer."""
    if n_frames <= n:
        return list(range(n_frames))
    return [math.floor(i * n_frames / n) for i in range(n)]


def strip_times(duration_s: float, fps: float) -> list[float]:
    step = 1.0 / fps
    return [i * step for i in range(int(math.floor(duration_s / step)) + 1) if i * step < duration_s]


def extract_frames(video: Path, out_dir: Path, *, n_frames: int, duration_s: float, pools: tuple[int, ...],
                   strip_fps: float, max_side: int = 512, quality: int = 85,
                   progress: Callable[[int, int], None] | None = None) -> list[FramePick]:
    """Decode once; save the picked frames as JPEG. Indices are decode-order ordinals, so they
    stay meaningful for variable-frame-rate video, where the strip is picked by timestamp."""
    wanted_pools: dict[int, list[int]] = {}
    for n in pools:
        for idx in pool_indices(n_frames, n):
            wanted_pools.setdefault(idx, []).append(n)
    strip_queue = strip_times(duration_s, strip_fps)
    out_dir.mkdir(parents=True, exist_ok=True)
    picks: list[FramePick] = []
    last_needed = max(wanted_pools) if wanted_pools else -1
    si = 0
    idx = -1
    with av.open(str(video)) as container:
        vs = container.streams.video[0]
        vs.thread_type = "AUTO"
        for frame in container.decode(vs):
            idx += 1
            t = float(frame.time) if frame.time is not None else idx / max(n_frames / duration_s, 1e-9)
            in_strip = False
            while si < len(strip_queue) and t + 1e-6 >= strip_queue[si]:
                in_strip = True  # first frame at or after the strip time (VFR-safe)
                si += 1
            frame_pools = wanted_pools.get(idx)
            if frame_pools or in_strip:
                img = frame.to_image()  # type: ignore[no-untyped-call]  # PyAV's VideoFrame.to_image is unannotated
                if max(img.size) > max_side:
                    img.thumbnail((max_side, max_side))
                path = out_dir / f"{idx:07d}.jpg"
                img.save(path, "JPEG", quality=quality)
                picks.append(FramePick(idx, t, tuple(sorted(frame_pools or ())), in_strip, path))
            if progress and idx % 200 == 0:
                progress(min(idx, n_frames), n_frames)
            if idx >= last_needed and si >= len(strip_queue):
                break
    if not picks:
        raise MovieMemError(f"no frames could be decoded from {video}")
    _fill_short_pools(picks, wanted_pools, idx)
    if progress:
        progress(n_frames, n_frames)
    return picks


def _fill_short_pools(picks: list[FramePick], wanted: dict[int, list[int]], last_idx: int) -> None:
    """If the container over-reported its frame count, pool slots past the real end are
    re-pointed at the last decoded frame so every pool still has N entries (or all frames)."""
    missing = [(i, ns) for i, ns in wanted.items() if i > last_idx]
    if not missing:
        return
    last = picks[-1]
    extra = sorted({n for _, ns in missing for n in ns} | set(last.pools))
    picks[-1] = FramePick(last.frame_idx, last.t, tuple(extra), last.strip, last.image)


def frames_at(video: Path, times: list[float], out_dir: Path, *, max_side: int = 512,
              quality: int = 85) -> list[tuple[float, Path]]:
    """The first frame at or after each time, one seek each, saved as JPEG like the strip's: stills
    for moments the single decoding pass did not keep (a shot shorter than the strip's step)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    got: list[tuple[float, Path]] = []
    with av.open(str(video)) as container:
        vs = container.streams.video[0]
        base = float(vs.time_base) if vs.time_base else 1e-6
        for n, want in enumerate(sorted(times)):
            container.seek(max(int(want / base), 0), stream=vs, backward=True)
            for frame in container.decode(vs):
                if frame.time is not None and frame.time + 1e-6 < want:
                    continue  # (a frame without a time is taken: the seek put the decoder just before `want`)
                img = frame.to_image()  # type: ignore[no-untyped-call]  # PyAV's VideoFrame.to_image is unannotated
                if max(img.size) > max_side:
                    img.thumbnail((max_side, max_side))
                path = out_dir / f"{n:06d}.jpg"
                img.save(path, "JPEG", quality=quality)
                got.append((float(frame.time) if frame.time is not None else want, path))
                break
    return got
