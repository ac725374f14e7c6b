"""CLIP text-to-frame retrieval: the frames whose CLIP vectors are nearest to a text.

The query is encoded with the same CLIP model and weights that embedded the frames (read from
the clip rows, never from the current settings), so a library stays searchable after the
settings change. Candidates can be limited to one frame pool and can exclude frames already
seen (VideoAgent's "fetch more frames" step).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ..foundation.errors import MovieMemError
from ..memory.view import FilmMemory
from .base import Retriever
from .types import Evidence


def clip_model_of(film: FilmMemory) -> tuple[str, str | None] | None:
    """(model name, pretrained) recorded by the clip stage, or None when it has no rows."""
    tbl = film.arrow("clip")
    if tbl.num_rows == 0:
        return None
    model = str(tbl.column("model")[0].as_py() or "")
    if not model.startswith("open_clip:") or "/" not in model:
        raise MovieMemError(f"cannot tell which CLIP model made the vectors of {film.film_id!r} ({model!r})")
    name, pretrained = model[len("open_clip:"):].split("/", 1)
    return name, (pretrained or None)


def clip_status(film: FilmMemory) -> str | None:
    """None when CLIP vectors are there; otherwise why not (the clip stage's skip reason)."""
    idx, _ = film.clip_vectors()
    if idx:
        return None
    for run in film.stages():
        if run.stage == "clip":
            return f"clip stage {run.status}: {run.reason or 'no vectors'}"
    return "the clip stage has not run"


class FrameRetriever(Retriever):
    """Frames ranked by cosine similarity between the query's and the frame's CLIP vectors.

    pool: only frames of that uniform pool (64/128/256; None: every frame with a vector);
    exclude: frame indices never returned.
    """

    name = "clip"

    def __init__(self, pool: int | None = None, exclude: Collection[int] = ()):
        self.pool = pool
        self.exclude = set(exclude)

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        from ..models.clip import ClipEncoder

        why = clip_status(film)
        if why is not None:
            raise MovieMemError(f"no CLIP vectors for {film.film_id!r} ({why})")
        idx, vecs = film.clip_vectors()
        frames = {f.frame_idx: f for f in film.frames(pool=self.pool)}
        keep = [i for i, f in enumerate(idx) if f in frames and f not in self.exclude]
        if not keep:
            return []
        model = clip_model_of(film)
        if model is None:  # clip_status() above has checked the film has CLIP rows
            raise MovieMemError(f"no CLIP model is recorded for {film.film_id!r}")
        name, pretrained = model
        q = ClipEncoder(name, pretrained).encode_texts([query or " "])[0]
        sims = vecs[keep] @ q
        top = np.argsort(-sims)[: max(k, 1)]
        out = []
        for j in top:
            f = frames[idx[keep[j]]]
            out.append(Evidence("frame", film.film_id, f.t, f.t, text=f"frame {f.frame_idx} at {f.t:.1f} s",
                                frame=f.image, score=float(sims[j]), id=f"frame:{f.frame_idx}"))
        return out
