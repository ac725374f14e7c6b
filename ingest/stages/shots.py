"""The shots stage: shot boundaries by PySceneDetect (ingest/shots.py)."""

from __future__ import annotations

from typing import Any

from ...foundation.words import counted
from ...memory.schema import ShotRow
from ..stage import Ctx, Outcome, Stage


class ShotsStage(Stage):
    name = "shots"
    needs = ("probe",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"detector": s.shot_detector, "threshold": s.shot_threshold, "min_len_s": s.shot_min_len_s}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from ..shots import detect_shots

        s = ctx.settings
        shots = detect_shots(ctx.inputs.video_file("shots"), detector=s.shot_detector, threshold=s.shot_threshold,
                             min_len_s=s.shot_min_len_s, progress=ctx.progress)
        ctx.write([ShotRow(film_id=ctx.film_id, shot_idx=i, start=round(a, 3), end=round(b, 3)) for i, (a, b) in enumerate(shots)])
        return Outcome(model=f"scenedetect:{s.shot_detector}", note=counted(len(shots), "shot"))
