"""End-to-end (CHNB): the backbone watches the film itself, as N uniform frames or the whole video."""

from __future__ import annotations

from dataclasses import dataclass

from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms
from ...memory.view import FilmMemory
from ...retrievers.types import Evidence
from ..base import BasePolicy, Run
from ..calls import answer_once, body, film_clip, require_video
from ..parsing import Parsed
from ..prompts import END_TO_END_FRAMES, END_TO_END_VIDEO
from ..types import Question

POOLS = (64, 128, 256)


class EndToEnd(BasePolicy):
    """N uniform frames of the film (N in 64/128/256), or the whole video with audio (video=True)."""

    @dataclass
    class Settings:
        frames: int = 64
        video: bool = False  # send the whole video with its sound (backbones that take video)
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        require_video(film, self.name)
        caps = run.backbone.capabilities
        if s.video:
            if not caps.video:
                raise MovieMemError(f"backbone {run.backbone.name} does not take video; use frames=64/128/256 instead")
            clip = film_clip(film)
            run.show([Evidence("video", film.film_id, 0.0, film.duration_s, text="the whole film", retriever="end-to-end",
                               id="video")])
            run.note(f"whole video {clip.path.name} up to {hms(film.duration_s)}")
            return answer_once(run, END_TO_END_VIDEO, question, body(END_TO_END_VIDEO, question), video=clip,
                               max_tokens=s.max_tokens, temperature=s.temperature)
        if s.frames not in POOLS:
            raise MovieMemError(f"frames must be one of {POOLS}, not {s.frames}")
        if not caps.images:
            raise MovieMemError(f"backbone {run.backbone.name} does not take images; end-to-end needs a vision backbone")
        frames = film.frames(pool=s.frames)
        if not frames:
            raise MovieMemError(f"{film.film_id!r} has no frames of the {s.frames} pool (run the frames stage)")
        if film.cutoff is not None:
            run.note(f"{len(frames)} of the {s.frames} pool frames are shown by {film.cutoff:.1f} s")
        ev = [Evidence("frame", film.film_id, f.t, f.t, text=f"frame {f.frame_idx}", frame=f.image,
                       retriever=f"uniform-{s.frames}", id=f"frame:{f.frame_idx}") for f in frames]
        run.show(ev)
        times = ", ".join(hms(f.t) for f in frames)
        return answer_once(run, END_TO_END_FRAMES, question,
                           body(END_TO_END_FRAMES, question, n=str(len(frames)), times=times),
                           images=[f.image for f in frames], max_tokens=s.max_tokens, temperature=s.temperature)
