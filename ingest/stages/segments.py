"""The segments stage: the film cut into chunks of a target length, at shot boundaries where there are shots."""

from __future__ import annotations

from typing import Any

from ...foundation.words import counted
from ...memory.schema import SegmentRow
from ..segments import fixed_windows, group_shots
from ..stage import Ctx, Outcome, Stage


class SegmentsStage(Stage):
    """Shot-grouped chunks; fixed windows for a film without video."""

    name = "segments"
    needs = ("probe", "shots")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"target_s": ctx.settings.segment_target_s, "min_s": ctx.settings.segment_min_s}

    def run(self, ctx: Ctx) -> Outcome:
        s = ctx.settings
        shot_run = ctx.upstream.get("shots")
        if shot_run is not None and shot_run.status == "done":
            shots = sorted(ctx.rows("shots"), key=lambda r: r.shot_idx)
            segs = group_shots([(r.start, r.end) for r in shots], s.segment_target_s, s.segment_min_s)
            how = "shot-grouped"
        else:
            segs = fixed_windows(ctx.inputs.film.duration_s, s.segment_target_s, s.segment_min_s)
            how = "fixed windows"
        ctx.write([SegmentRow(film_id=ctx.film_id, seg_idx=i, start=round(g.start, 3), end=round(g.end, 3),
                              first_shot=g.first_shot, last_shot=g.last_shot) for i, g in enumerate(segs)])
        return Outcome(note=f"{counted(len(segs), 'segment')} ({how})")
