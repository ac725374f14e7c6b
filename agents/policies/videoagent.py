"""VideoAgent (Wang et al. 2024, as run in CHNB): answer from a few frames, look again when unsure.

Round 1 shows 8 uniform frames of the 64 pool. The backbone answers and rates its confidence
1-3; below the threshold it names what it is missing, and up to 4 more frames are fetched by
CLIP text-to-frame cosine on that description, for at most 3 rounds (8 + 4 + 4 frames). With
no CLIP vectors the trace says so and the extra frames are spread uniformly over the frames
not yet seen. A text-only backbone gets each frame as the captions and on-screen text nearest
to it, as the original VideoAgent used frame captions. An unparseable reply is never replaced
by a guess: the last valid round's answer stands, and with none the answer is invalid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms
from ...memory.schema import FrameRow
from ...memory.view import FilmMemory
from ...retrievers.frames import FrameRetriever, clip_status
from ...retrievers.types import Evidence
from ...retrievers.window import around
from ..base import BasePolicy, Run
from ..calls import answer_once, body, require_video, uniform
from ..parsing import Parsed
from ..prompts import VIDEOAGENT, VIDEOAGENT_TEXT_FRAME
from ..types import Question


class VideoAgent(BasePolicy):
    """8 uniform frames of the 64 pool; while unsure, up to 4 more by CLIP cosine; at most 3 rounds."""

    @dataclass
    class Settings:
        pool: int = 64
        initial_frames: int = 8
        extra_frames: int = 4
        max_rounds: int = 3
        threshold: int = 3  # confidence (1-3) at which the agent stops looking
        search_pool: int | None = None  # frames CLIP may fetch from (None: every frame with a vector)
        # never: frames as images, and a backbone that takes no images is refused (as end-to-end refuses it: shown
        # nothing, it would answer from nothing) | always: each frame as the captions and on-screen text near it |
        # auto: images where the backbone takes them, else text
        text_frames: str = "never"
        text_per_frame: int = 2
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        require_video(film, self.name)
        if s.max_rounds < 1 or s.initial_frames < 1 or s.extra_frames < 0:
            raise MovieMemError("videoagent needs max_rounds >= 1, initial_frames >= 1 and extra_frames >= 0")
        as_text = self._as_text(run)
        pool = film.frames(pool=s.pool)
        if not pool:
            raise MovieMemError(f"{film.film_id!r} has no frames of the {s.pool} pool (run the frames stage)")
        seen = uniform(pool, s.initial_frames)
        run.note(f"round 1: {len(seen)} uniform frames of the {s.pool} pool" + (" described as text" if as_text else ""))
        no_clip = clip_status(film)
        if no_clip and s.max_rounds > 1:
            run.note(f"no CLIP vectors ({no_clip}): extra frames are chosen uniformly, not by the question")
        best: Parsed | None = None
        last: Parsed | None = None
        for rnd in range(1, s.max_rounds + 1):
            last = self._ask(film, question, run, seen, as_text)
            if not last.invalid:
                best = last
            conf = last.data.get("confidence") if not last.invalid else None
            sure = isinstance(conf, int) and not isinstance(conf, bool) and conf >= s.threshold
            if sure or rnd == s.max_rounds or s.extra_frames == 0:
                break
            want = str(last.data.get("missing") or "").strip() or question.text
            more = self._more(film, run, want, seen, no_clip)
            if not more:
                run.note("no unseen frames left to fetch")
                break
            seen = sorted(seen + more, key=lambda f: f.t)
            run.note(f"round {rnd + 1}: {len(seen)} frames")
        if last is None:  # max_rounds >= 1 (checked above), so the loop ran
            raise MovieMemError("videoagent ran no round")
        if best is None:
            return last
        if last is not best:
            run.note("the last round's reply was invalid; keeping the last valid answer")
        return best

    def _as_text(self, run: Run) -> bool:
        mode = self.settings.text_frames
        if mode not in ("auto", "always", "never"):
            raise MovieMemError(f"text_frames must be auto, always or never, not {mode!r}")
        takes_images = run.backbone.capabilities.images
        if mode == "never" and not takes_images:
            raise MovieMemError(f"backbone {run.backbone.name} does not take images; videoagent needs a vision backbone "
                                "(or text_frames=always to read each frame's captions and on-screen text instead)")
        return mode == "always" or (mode == "auto" and not takes_images)

    def _more(self, film: FilmMemory, run: Run, want: str, seen: list[FrameRow], no_clip: str | None) -> list[FrameRow]:
        s = self.settings
        have = {f.frame_idx for f in seen}
        if no_clip is None:
            found = FrameRetriever(pool=s.search_pool, exclude=have).retrieve(film, want, k=s.extra_frames)
            run.retrieved("clip", want, found)
            by_idx = {f.frame_idx: f for f in film.frames(pool=s.search_pool)}
            return [by_idx[int(e.id.split(":")[1])] for e in found][: s.extra_frames]
        rest = [f for f in film.frames(pool=s.search_pool or max(_pools(film))) if f.frame_idx not in have]
        picked = uniform(rest, s.extra_frames)
        run.retrieved("uniform", want, [Evidence("frame", film.film_id, f.t, f.t, id=f"frame:{f.frame_idx}") for f in picked])
        return picked

    def _ask(self, film: FilmMemory, question: Question, run: Run, frames: list[FrameRow], as_text: bool) -> Parsed:
        s = self.settings
        lines, images, shown = [], [], []
        for n, f in enumerate(frames, 1):
            label = f"frame {n}"
            ev = Evidence("frame", film.film_id, f.t, f.t, text=label, frame=f.image, retriever="videoagent",
                          id=f"frame:{f.frame_idx}")
            if as_text:
                near = around(film, f.t, kinds=("caption", "onscreen"), k=s.text_per_frame)
                text = " | ".join(e.text for e in near) or "(nothing recorded near this frame)"
                ev.text = text
                lines.append(VIDEOAGENT_TEXT_FRAME.replace("{label}", label).replace("{time}", hms(f.t)).replace("{text}", text))
                if not near:  # nothing of the film was shown for this frame: it is no evidence
                    continue
            else:
                images.append(f.image)
                lines.append(f"{label} at {hms(f.t)}")
            shown.append(ev)
        run.show(shown)
        text = body(VIDEOAGENT, question, missing=True, n=str(len(frames)), duration=hms(film.info.duration_s),
                    frames="\n".join(lines))
        return answer_once(run, VIDEOAGENT, question, text, images=images, missing=True, max_tokens=s.max_tokens,
                           temperature=s.temperature)


def _pools(film: FilmMemory) -> list[int]:
    return sorted({p for f in film.frames() for p in f.pools}) or [64]
