"""The clip stage: CLIP vectors of the key frames, for frame search."""

from __future__ import annotations

from typing import Any

from ...memory.schema import ClipRow
from ..stage import Ctx, Outcome, Stage


class ClipStage(Stage):
    name = "clip"
    needs = ("frames",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        return {"model": ctx.settings.clip_model, "pretrained": ctx.settings.clip_pretrained,
                "pool": max(ctx.settings.frame_pools)}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not ctx.inputs.film.has_video:
            return "no video"
        from ...models.clip import clip_weights_available

        ok, reason = clip_weights_available(ctx.settings.clip_pretrained, ctx.settings.clip_model)
        return None if ok else reason

    def run(self, ctx: Ctx) -> Outcome:
        from ...models.clip import ClipEncoder

        pool = max(ctx.settings.frame_pools)
        frames = sorted((f for f in ctx.rows("frames") if pool in f.pools), key=lambda f: f.frame_idx)
        enc = ClipEncoder(ctx.settings.clip_model, ctx.settings.clip_pretrained)
        vecs = enc.encode_images([ctx.store.root / f.image for f in frames], progress=ctx.progress)
        model = f"open_clip:{ctx.settings.clip_model}/{ctx.settings.clip_pretrained}"
        ctx.write([ClipRow(film_id=ctx.film_id, frame_idx=f.frame_idx, t=f.t, model=model, vector=v.tolist())
                   for f, v in zip(frames, vecs)], enc.dim)
        note = f"{len(frames)} frames of the {pool} pool"
        if ctx.settings.clip_pretrained == "random":
            note += "; RANDOM weights: vectors carry no meaning"
        return Outcome(model=model, note=note)
