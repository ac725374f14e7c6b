"""Shot boundaries with PySceneDetect, decoded fast through PyAV.

PySceneDetect's own PyAV backend converts every full-size frame to BGR with libswscale,
which costs more than decoding itself. We keep its detectors and its pts-based timecodes
(so variable-frame-rate video gets true times) but hand them small frames built from the
decoded YUV planes with OpenCV: a 640x360 film is scored at 320x180.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import av
import cv2
import numpy as np
from scenedetect import AdaptiveDetector, ContentDetector
from scenedetect.backends.pyav import VideoStreamAv
from scenedetect.common import FrameTimecode
from scenedetect.video_stream import VideoOpenFailure

from ..errors import MovieMemError

Progress = Callable[[int, int], None]

DETECTORS = ("content", "adaptive")
# A detector's own threshold scale differs: content compares an HSV difference score,
# adaptive compares the score to its rolling average (a ratio).
DEFAULT_THRESHOLDS = {"content": 27.0, "adaptive": 3.0}
TARGET_WIDTH = 320  # processing width for the automatic downscale factor
_YUV420 = ("yuv420p", "yuvj420p")
# Limited-range (TV) YUV stretched to full range, so scores match the swscale BGR path
# that PySceneDetect's thresholds were tuned on.
_LUMA_LUT = np.clip((np.arange(256) - 16) * 255.0 / 219.0, 0, 255).round().astype(np.uint8)
_CHROMA_LUT = np.clip((np.arange(256) - 128) * 255.0 / 224.0 + 128, 0, 255).round().astype(np.uint8)


def _plane(plane: av.video.plane.VideoPlane) -> np.ndarray:
    rows = np.frombuffer(plane, np.uint8)[: plane.height * plane.line_size]
    return rows.reshape(plane.height, plane.line_size)[:, : plane.width]


def small_bgr(frame: av.VideoFrame, factor: int) -> np.ndarray:
    """BGR image of `frame` shrunk by `factor`; 4:2:0 frames skip swscale entirely."""
    width, height = max(1, frame.width // factor), max(1, frame.height // factor)
    if factor >= 2 and frame.format.name in _YUV420:
        # Luma shrunk to chroma size, then one cheap YCbCr 4:4:4 -> BGR conversion.
        u, v = _plane(frame.planes[1]), _plane(frame.planes[2])
        y = cv2.resize(_plane(frame.planes[0]), (u.shape[1], u.shape[0]), interpolation=cv2.INTER_AREA)
        if frame.format.name == "yuv420p" and frame.color_range != 2:  # 2 = AVCOL_RANGE_JPEG
            y, u, v = cv2.LUT(y, _LUMA_LUT), cv2.LUT(u, _CHROMA_LUT), cv2.LUT(v, _CHROMA_LUT)
        bgr = cv2.cvtColor(cv2.merge([y, v, u]), cv2.COLOR_YCrCb2BGR)  # BT.601 YCbCr
    else:
        bgr = frame.to_ndarray(format="bgr24")
    if bgr.shape[1] != width or bgr.shape[0] != height:
        bgr = cv2.resize(bgr, (width, height), interpolation=cv2.INTER_AREA)
    return bgr


class _SmallFrameStream(VideoStreamAv):
    """PySceneDetect's PyAV stream, returning frames already downscaled by `factor`."""

    def __init__(self, path: Path, downscale: int | None):
        super().__init__(str(path), threading_mode="AUTO", suppress_output=True)
        width = self.frame_size[0]
        self.factor = downscale if downscale else max(1, round(width / TARGET_WIDTH))

    def read(self, decode: bool = True) -> np.ndarray | bool:
        ok = super().read(decode=False)
        if ok is False or not decode:
            return ok
        assert self._frame is not None
        return small_bgr(self._frame, self.factor)

    def frame_end_s(self) -> float:
        """End time of the current frame: its pts plus its own duration (VFR-safe)."""
        assert self._frame is not None
        start = self.position.seconds
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
    while (image := stream.read()) is not False:
        position = stream.position
        cuts += det.process_frame(position, image)
        end_s = stream.frame_end_s()
        if progress is not None and end_s >= next_report:
            progress(min(int(end_s), total_s), total_s)
            next_report = end_s + 10.0
    if position is None:
        raise MovieMemError(f"no decodable video frames in {video}")
    cuts += det.post_process(position)
    if progress is not None:
        progress(total_s, total_s)
    return _contiguous(sorted(c.seconds for c in cuts), end_s)


def _contiguous(cuts_s: list[float], end_s: float) -> list[tuple[float, float]]:
    bounds = [0.0] + [round(c, 3) for c in cuts_s if 0.0 < c < end_s] + [round(end_s, 3)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
