"""The faces stage: faces on the 0.5 fps strip and on the key frame of every shot the strip
misses, encoded and clustered into identities.

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

import shutil
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..memory.schema import FaceRow
from .stage import Ctx, Outcome, Stage

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


class FacesStage(Stage):
    name = "faces"
    needs = ("probe", "frames", "shots")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = FaceParams()
        return {"model": MODEL, "distance": p.distance, "min_faces": p.min_faces, "upsample": p.upsample,
                "key_frames": p.key_frames, "max_side": ctx.settings.frame_max_side}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not ctx.inputs.film.has_video:
            return "no video"
        return dlib_missing()

    def run(self, ctx: Ctx) -> Outcome:
        from PIL import Image

        root = ctx.store.root
        out = ctx.run_dir(self.name)
        strip = sorted((f for f in ctx.rows("frames") if f.strip), key=lambda f: f.t)
        keys, skipped = self._key_frames(ctx, [f.t for f in strip], out / "key_frames")
        faces = find_faces([(f.frame_idx, f.t, root / f.image) for f in strip],
                           progress=lambda i, n: ctx.progress(i, len(strip) + len(keys)))
        faces += find_faces([(-1, t, path) for t, path in keys], strip=False,
                            progress=lambda i, n: ctx.progress(len(strip) + i, len(strip) + len(keys)))
        faces.sort(key=lambda f: f.t)
        enc = np.stack([f.encoding for f in faces]) if faces else np.zeros((0, 128), dtype=np.float32)
        labels = cluster_faces(enc)
        thumbs: dict[int, str] = {}
        for c in sorted(set(labels.tolist()) - {-1}):
            rep = faces[representative(enc, labels, c)]
            top, right, bottom, left = rep.box
            pad = (bottom - top) // 4
            img = Image.open(rep.image).convert("RGB")
            crop = img.crop((max(left - pad, 0), max(top - pad, 0), min(right + pad, img.width), min(bottom + pad, img.height)))
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"face_{c + 1}.jpg"
            crop.save(path, quality=90)
            thumbs[c] = str(path.relative_to(root))
        rows = []
        for f, c in zip(faces, labels.tolist()):
            thumb = thumbs.pop(c, "") if c >= 0 else ""
            rows.append(FaceRow(film_id=ctx.film_id, frame_idx=f.frame_idx, t=f.t, cluster=c, box=list(f.box),
                                strip=f.strip, thumbnail=thumb, vector=f.encoding.tolist()))
        shutil.rmtree(out / "key_frames", ignore_errors=True)  # the crops above are all that is kept of them
        ctx.write(rows, 128)
        k = len(set(labels.tolist()) - {-1})
        on_keys = sum(1 for f in faces if not f.strip)
        return Outcome(model=MODEL, note=f"{len(faces)} faces on {len(strip)} strip frames and {len(keys)} key frames "
                                         f"of shots the strip misses ({on_keys} of the faces), {k} identities{skipped}")

    def _key_frames(self, ctx: Ctx, strip_t: list[float], where: Path) -> tuple[list[tuple[float, Path]], str]:
        """Stills of the shots the strip misses, and what was skipped of them (said in the stage note)."""
        shot_run = ctx.upstream.get("shots")
        if not FaceParams().key_frames or ctx.inputs.video is None:
            return [], ""
        if shot_run is None or shot_run.status != "done":
            return [], "; no key frames: the shots stage has not run"
        import av

        from .frames import frames_at

        times = unseen_shots([(s.start, s.end) for s in ctx.rows("shots")], strip_t)
        try:
            return (frames_at(ctx.inputs.video, times, where, max_side=ctx.settings.frame_max_side) if times else []), ""
        except (av.FFmpegError, OSError) as exc:
            return [], f"; no key frames: seeking in the video failed ({type(exc).__name__}: {exc})"

