"""The probe stage: the film's own facts (hash, duration, streams), the row every other stage reads."""

from __future__ import annotations

from typing import Any

from ..stage import Ctx, Outcome, Stage


class ProbeStage(Stage):
    name = "probe"

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"sha256": ctx.inputs.film.sha256, "has_video": ctx.inputs.film.has_video}

    def run(self, ctx: Ctx) -> Outcome:
        film = ctx.inputs.film.model_copy()
        ctx.write([film])
        return Outcome(note=f"{film.duration_s:.1f} s" + (f", {film.width}x{film.height} @ {film.fps:.2f} fps" if film.has_video else ", no video"))
