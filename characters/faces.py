"""Faces on the 0.5 fps strip and on the key frame of every shot the strip misses, encoded and
clustered into identities (the faces stage, ingest/stages/faces.py, runs this).

dlib's HOG face detector, 5-point landmarks and ResNet face encoder (weights from the
face_recognition_models wheel) give a 128-d encoding per face. dlib's encoder is trained so
that two faces of one person lie within 0.6 euclidean distance, so identities are clusters of
average-linkage agglomerative clustering cut at that distance; clusters with fewer than
`min_faces` faces stay unclustered (-1). Each identity's representative face (the one nearest
its centroid) is cropped to a thumbnail under the film's media folder.

A strip frame every 2 s misses a shot shorter than that (a reaction shot, a trailer's quick cut),
and with it maybe the only clear view of a face; such a shot's middle frame is decoded too. Its
faces join the identities and their appearances, but only strip faces count screen time, since
each strip frame stands for one strip step of film.
"""


from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL = "dlib-hog+resnet-face-v1"


@dataclass(frozen=True)
class FaceParams:
    distance: float = 0.6  # dlib's same-person threshold for its 128-d encodings
    min_faces: int = 2
    upsample: int = 1  # the strip is downscaled: upsample once to find small faces
    key_frames: bool = True  # also each shot's middle frame where no strip frame falls in the shot


@dataclass
class Face:
    frame_idx: int
    t: float
    box: tuple[int, int, int, int]  # top, right, bottom, left
    encoding: np.ndarray
    image: Path
    strip: bool = True


def unseen_shots(shots: list[tuple[float, float]], strip_t: list[float]) -> list[float]:
    """The middle of each shot that no strip frame falls in: where the strip never looked."""
    ts = sorted(strip_t)
    out = []
    for a, b in shots:
        i = bisect_left(ts, a)
        if b > a and not (i < len(ts) and ts[i] < b):
            out.append(round((a + b) / 2, 3))
    return out


def dlib_missing() -> str | None:
    """Why faces cannot be found here, or None."""
    try:
        import dlib  # noqa: F401
        import face_recognition_models  # noqa: F401
    except ImportError as exc:
        return f"face detection needs dlib and face_recognition_models ({exc}); pip install dlib-bin face_recognition_models"
    return None


class FaceEncoder:
    def __init__(self) -> None:
        import dlib
        import face_recognition_models as frm

        self.detector = dlib.get_frontal_face_detector()
        self.shape = dlib.shape_predictor(frm.pose_predictor_five_point_model_location())
        self.encoder = dlib.face_recognition_model_v1(frm.face_recognition_model_location())

    def faces(self, rgb: np.ndarray, upsample: int = 1) -> list[tuple[tuple[int, int, int, int], np.ndarray]]:
        out = []
        for r in self.detector(rgb, upsample):
            shape = self.shape(rgb, r)
            enc = np.asarray(self.encoder.compute_face_descriptor(rgb, shape, 1), dtype=np.float32)
            h, w = rgb.shape[:2]
            out.append(((max(r.top(), 0), min(r.right(), w), min(r.bottom(), h), max(r.left(), 0)), enc))
        return out


def cluster_faces(enc: np.ndarray, params: FaceParams = FaceParams()) -> np.ndarray:
    """Identity per encoding (0..k-1 by first appearance; -1 for faces in clusters under min_faces)."""
    n = len(enc)
    if n == 0:
        return np.zeros(0, dtype=int)
    if n == 1:
        return np.array([0 if params.min_faces <= 1 else -1])
    from sklearn.cluster import AgglomerativeClustering

    raw = AgglomerativeClustering(n_clusters=None, distance_threshold=params.distance, metric="euclidean",
                                  linkage="average").fit_predict(enc)
    sizes = np.bincount(raw)
    order: dict[int, int] = {}
    out = np.full(n, -1, dtype=int)
    for i, c in enumerate(raw):
        if sizes[c] >= params.min_faces:
            out[i] = order.setdefault(int(c), len(order))
    return out


def representative(enc: np.ndarray, labels: np.ndarray, cluster: int) -> int:
    """Index of the face nearest its cluster's centroid."""
    idx = np.flatnonzero(labels == cluster)
    centroid = enc[idx].mean(axis=0)
    return int(idx[np.argmin(np.linalg.norm(enc[idx] - centroid, axis=1))])


def find_faces(stills: list[tuple[int, float, Path]], params: FaceParams = FaceParams(),
               progress: Callable[[int, int | None], None] | None = None, strip: bool = True) -> list[Face]:
    from PIL import Image

    encoder = FaceEncoder()
    found: list[Face] = []
    for i, (frame_idx, t, path) in enumerate(stills):
        rgb = np.asarray(Image.open(path).convert("RGB"))
        found += [Face(frame_idx, t, box, enc, path, strip) for box, enc in encoder.faces(rgb, params.upsample)]
        if progress:
            progress(i + 1, len(stills))
    return found
