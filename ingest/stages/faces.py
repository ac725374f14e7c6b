"""The faces stage: faces found on the strip and key frames, encoded by dlib and clustered into identities (characters/faces.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...characters.faces import MODEL, FaceParams, cluster_faces, dlib_missing, find_faces, representative, unseen_shots
from ...memory.schema import FaceRow
from ..stage import Ctx, Outcome, Stage


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

        from ..frames import frames_at

        times = unseen_shots([(s.start, s.end) for s in ctx.rows("shots")], strip_t)
        try:
            return (frames_at(ctx.inputs.video, times, where, max_side=ctx.settings.frame_max_side) if times else []), ""
        except (av.FFmpegError, OSError) as exc:
            return [], f"; no key frames: seeking in the video failed ({type(exc).__name__}: {exc})"
