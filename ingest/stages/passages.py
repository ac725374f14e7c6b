"""The passages stage: the transcript grouped into passages of a few lines, each embedded, for search."""

from __future__ import annotations

from typing import Any

from ...memory.schema import PassageRow
from ..passages import Line, PassageParams, build_passages
from ..stage import Ctx, Outcome, Stage, pooled_or_embedded


class PassagesStage(Stage):
    """Passages of the transcript and of the captions, with vectors, for search."""

    name = "passages"
    needs = ("probe", "segments", "transcript", "captions")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = PassageParams()
        return {"window_s": p.window_s, "stride_s": p.stride_s, "max_words": p.max_words, "max_gap_s": p.max_gap_s,
                "embedder": ctx.settings.embedder, "vectors": "its rows' vectors, each weighed by its words"}

    def run(self, ctx: Ctx) -> Outcome:
        segs = ctx.rows("segments")
        shot_grouped = any(s.first_shot >= 0 for s in segs)
        bounds = sorted(s.start for s in segs)[1:] if shot_grouped else []
        sources = {
            "utterance": [Line(u.idx, u.start, u.end, u.text, u.speaker) for u in ctx.rows("utterances", vectors=False)
                          if u.text.strip()],
            "caption": [Line(c.idx, c.start, c.end, c.text) for c in ctx.rows("captions", vectors=False) if c.text.strip()],
        }
        built = [(source, p) for source, lines in sources.items() for p in build_passages(lines, PassageParams(), bounds)]
        stored = {"utterance": ctx.vectors("utterances"), "caption": ctx.vectors("captions")}
        held = {source: {ln.idx: ln.text for ln in lines} for source, lines in sources.items()}  # a blank line is in none
        vecs, dim = pooled_or_embedded(ctx, [p.text for _, p in built],
                                       [[(stored[src].get(i), held[src][i]) for i in range(p.first_row, p.last_row + 1)
                                         if i in held[src]] for src, p in built])
        ctx.write([PassageRow(film_id=ctx.film_id, idx=i, source=source, start=round(p.start, 3), end=round(p.end, 3),
                              text=p.text, first_row=p.first_row, last_row=p.last_row, vector=v)
                   for i, ((source, p), v) in enumerate(zip(built, vecs))], dim)
        counts = {s: sum(1 for src, _ in built if src == s) for s in sources}
        return Outcome(note=f"{counts['utterance']} transcript and {counts['caption']} caption passages"
                            + (" (within segments)" if bounds else ""))
