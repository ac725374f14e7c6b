"""The ocr stage: on-screen text read off the strip frames by tesseract (ingest/ocr.py)."""

from __future__ import annotations

from typing import Any

from ...foundation.words import counted
from ...memory.schema import OnscreenRow
from ..stage import Ctx, Outcome, Stage


class OcrStage(Stage):
    name = "ocr"
    needs = ("frames",)

    def params(self, ctx: Ctx) -> dict[str, Any]:
        s = ctx.settings
        return {"lang": s.ocr_lang, "min_confidence": s.ocr_min_confidence, "embedder": s.embedder}

    def skip_reason(self, ctx: Ctx) -> str | None:
        return None if ctx.inputs.film.has_video else "no video"

    def run(self, ctx: Ctx) -> Outcome:
        from ..ocr import read_onscreen

        strip = sorted((f for f in ctx.rows("frames") if f.strip), key=lambda f: f.t)
        found = read_onscreen([(f.t, ctx.store.root / f.image) for f in strip], lang=ctx.settings.ocr_lang,
                              min_confidence=ctx.settings.ocr_min_confidence, progress=ctx.progress)
        end_cap = ctx.inputs.film.duration_s
        ctx.write_embedded([OnscreenRow(film_id=ctx.film_id, idx=i, start=round(o["start"], 3), end=round(min(o["end"], end_cap), 3),
                                        text=o["text"], confidence=float(o.get("confidence", 0.0)))
                            for i, o in enumerate(found)], [o["text"] for o in found])
        return Outcome(model=f"tesseract:{ctx.settings.ocr_lang}", note=f"{counted(len(found), 'on-screen text')} from {counted(len(strip), 'strip frame')}")
