"""Shot boundaries with PySceneDetect, decoded fast through PyAV.

PySceneDetect's own PyAV backend converts every full-size frame to BGR and only then
shrinks it, which costs more than decoding itself. We keep its detectors and its
pts-based timecodes (so variable-frame-rate video gets true times) but convert and
shrink in one swscale pass: a 640x360 film is scored at 320x180.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.video.reformatter import VideoReformatter
from scenedetect import AdaptiveDetector, ContentDetector
from scenedetect.backends.pyav import VideoStreamAv
from scenedetect.common import FrameTimecode
from scenedetect.video_stream import VideoOpenFailure

from ..foundation.errors import MovieMemError

Progress = Callable[[int, int], None]

DETECTORS = ("content", "adaptive")
# A detector's own threshold scale differs: content compares an HSV difference score,
# adaptive compares the score to its rolling average (a ratio).
DEFAULT_THRESHOLDS = {"content": 27.0, "adaptive": 3.0}
TARGET_WIDTH = 320  # processing width for the automatic downscale factor


def small_bgr(frame: av.VideoFrame, factor: int, reformatter: VideoReformatter) -> np.ndarray:
    """BGR image of `frame` shrunk by `factor` in one swscale pass.

    A long-lived reformatter reuses its scaler context; a fresh one per frame (what
    `frame.reformat` does) costs more than the decoding itself.
    """
    width, height = max(2, frame.width // factor), max(2, frame.height // factor)
    return reformatter.reformat(frame, width, height, "bgr24", interpolation="AREA").to_ndarray()


class _SmallFrameStream(VideoStreamAv):  # type: ignore[misc]  # PySceneDetect ships no type information
    """PySceneDetect's PyAV stream, returning frames already downscaled by `factor`."""

    def __init__(self, path: Path, downscale: int | None):
        super().__init__(str(path), threading_mode="AUTO", suppress_output=True)
        width = self.frame_size[0]
        self.factor = downscale if downscale else max(1, round(width / TARGET_WIDTH))
        self._reformatter = VideoReformatter()

    def read(self, decode: bool = True) -> np.ndarray | bool:
        ok: np.ndarray | bool = super().read(decode=False)
        if ok is False or not decode:
            return ok
        assert self._frame is not None
        return small_bgr(self._frame, self.factor, self._reformatter)

    def frame_end_s(self) -> float:
        """End time of the current frame: its pts plus its own duration (VFR-safe)."""
        assert self._frame is not None
        start: float = self.position.seconds
        if self._frame.duration and self._frame.time_base:
            return start + float(self._frame.duration * self._frame.time_base)
        return start + 1.0 / float(self.frame_rate)


def _detector(name: str, threshold: float | None, min_len_s: float) -> ContentDetector:
    if name not in DETECTORS:
        raise MovieMemError(f"unknown shot detector {name!r}; choose one of {', '.join(DETECTORS)}")
    if threshold is None:
        threshold = DEFAULT_THRESHOLDS[name]
    if name == "adaptive":
        if threshold > 20:
            raise MovieMemError(
                f"the adaptive shot detector's threshold is a ratio (default 3.0), not {threshold:g}"
            )
        return AdaptiveDetector(adaptive_threshold=threshold, min_scene_len=float(min_len_s))
    return ContentDetector(threshold=threshold, min_scene_len=float(min_len_s))


def detect_shots(
    video: Path,
    *,
    detector: str = "content",
    threshold: float | None = None,
    min_len_s: float = 0.5,
    downscale: int | None = None,
    progress: Progress | None = None,
) -> list[tuple[float, float]]:
    """Contiguous (start, end) shots in seconds covering [0, end of the last frame].

    `threshold=None` takes the detector's default (content 27.0, adaptive 3.0);
    `downscale=None` picks a factor giving a ~320 px wide picture. Times come from frame
    pts relative to the stream start, so variable-frame-rate files are timed correctly.
    No shot is shorter than `min_len_s` (except a film shorter than that).
    `progress(done_s, total_s)` is called about every 10 s of video.
    """
    det = _detector(detector, threshold, min_len_s)
    try:
        stream = _SmallFrameStream(Path(video), downscale)
    except (OSError, VideoOpenFailure, av.error.FFmpegError) as exc:
        raise MovieMemError(f"cannot decode video {video}: {exc}") from exc
    except Exception as exc:  # FrameRateUnavailable and friends
        raise MovieMemError(f"cannot read video {video}: {type(exc).__name__} {exc}".strip()) from exc
    total_s = max(1, round(stream.duration.seconds))
    cuts: list[FrameTimecode] = []
    position: FrameTimecode | None = None
    end_s, next_report = 0.0, 0.0
    for position, end_s, image in _decoded(stream):
        cuts += det.process_frame(position, image)
        if progress is not None and end_s >= next_report:
            progress(min(int(end_s), total_s), total_s)
            next_report = end_s + 10.0
    if position is None:
        raise MovieMemError(f"no decodable video frames in {video}")
    cuts += det.post_process(position)
    if progress is not None:
        progress(total_s, total_s)
    return _contiguous(sorted(c.seconds for c in cuts), end_s, min_len_s)


def _decoded(stream: _SmallFrameStream) -> Iterator[tuple[FrameTimecode, float, np.ndarray]]:
    """(position, frame end, small image) per frame, decoded in a worker thread.

    Decoding and swscale release the GIL, so on two cores the detector's HSV work
    overlaps with decoding (about 1.4x faster than one thread).
    """
    frames: queue.Queue[Any] = queue.Queue(maxsize=16)
    stop = threading.Event()

    def put(item: object) -> None:
        while not stop.is_set():
            try:
                frames.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def work() -> None:
        try:
            while not stop.is_set() and (image := stream.read()) is not False:
                put((stream.position, stream.frame_end_s(), image))
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which re-raises it
            put(exc)

    worker = threading.Thread(target=work, name="moviemem-shots-decode", daemon=True)
    worker.start()
    try:
        while (item := frames.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise MovieMemError(f"video decoding failed: {item}") from item
            yield item
    finally:
        stop.set()
        worker.join()


_DONE = object()


def _contiguous(cuts_s: list[float], end_s: float, min_len_s: float) -> list[tuple[float, float]]:
    """Shots from cut times; a too-short first or last shot joins its neighbour."""
    bounds = [0.0] + [round(c, 3) for c in cuts_s if 0.0 < c < end_s] + [round(end_s, 3)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < min_len_s:
        del bounds[-2]
    if len(bounds) > 2 and bounds[1] - bounds[0] < min_len_s:
        del bounds[1]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
