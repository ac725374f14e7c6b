"""The frames stage: key frames and the strip (ingest/frames.py picks them)."""

from __future__ import annotations

from typing import Any

from ...foundation.words import counted
from ...memory.schema import FrameRow
from ..stage import Ctx, Outcome, Stage


class FramesStage(Stage):
    name = "frames"
    needs = ("probe",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"pools": list(s.frame_pools), "strip_fps": s.strip_fps, "max_side": s.frame_max_side, "quality": s.jpeg_quality}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from ..frames import extract_frames

        film, s = ctx.inputs.film, ctx.settings
        out = ctx.run_dir("frames")
        picks = extract_frames(ctx.inputs.video_file("frames"), out, n_frames=film.n_frames, duration_s=film.duration_s,
                               pools=tuple(s.frame_pools), strip_fps=s.strip_fps, max_side=s.frame_max_side,
                               quality=s.jpeg_quality, progress=ctx.progress)
        root = ctx.store.root
        ctx.write([FrameRow(film_id=ctx.film_id, frame_idx=p.frame_idx, t=round(p.t, 3), pools=list(p.pools),
                            strip=p.strip, image=str(p.image.relative_to(root))) for p in picks])
        return Outcome(note=counted(len(picks), "frame"))
