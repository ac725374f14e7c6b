"""Full-context baselines (CHNB): closed-book, subtitles and the two Socratic policies.

Each sends its whole context in one call: nothing, the whole transcript, or the whole
timestamped caption history. They bound what retrieval policies must beat.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...foundation.errors import MovieMemError
from ...memory.view import FilmMemory
from ...retrievers.types import Evidence
from ...retrievers.window import rows_as_evidence
from ..base import BasePolicy, Run
from ..calls import answer_once, body, compact_text, stage_reason
from ..parsing import Parsed
from ..prompts import CLOSED_BOOK, SOCRATIC, SUBTITLES
from ..types import Question


class ClosedBook(BasePolicy):
    """The question alone (optionally with the film's title and year): what the backbone already knows."""

    @dataclass
    class Settings:
        with_title: bool = False
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        head = ""
        if s.with_title:
            year = f" ({film.info.year})" if film.info.year else ""
            head = f"The question is about the film {film.info.title}{year}.\n\n"
        return answer_once(run, CLOSED_BOOK, question, body(CLOSED_BOOK, question, film=head),
                           max_tokens=s.max_tokens, temperature=s.temperature)


class Subtitles(BasePolicy):
    """The whole transcript, compact (a time mark a minute), in one call; the question last, so a film's
    questions share the transcript as a prefix that a local model reads once."""

    @dataclass
    class Settings:
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        lines = rows_as_evidence(film, ["utterance"])
        if not lines:
            raise MovieMemError(f"{film.film_id!r} has no transcript lines to show ({stage_reason(film, 'transcript')})")
        for e in lines:
            e.retriever = "transcript"
        run.show(lines)
        run.note(f"whole transcript: {len(lines)} lines")
        return answer_once(run, SUBTITLES, question, body(SUBTITLES, question, context=compact_text(lines)),
                           max_tokens=self.settings.max_tokens, temperature=self.settings.temperature, shared_head=True)


class _Socratic(BasePolicy):
    """The whole caption history (world state) in one call."""

    caption_kind = ""

    @dataclass
    class Settings:
        caption_kinds: tuple[str, ...] = ()  # () = the policy's own kind, or imported captions when it has none
        with_transcript: bool = False
        max_tokens: int | None = None
        temperature: float = 0.0

    def _captions(self, film: FilmMemory, run: Run) -> list[Evidence]:
        s = self.settings
        kinds = tuple(s.caption_kinds) or (self.caption_kind,)
        caps = rows_as_evidence(film, ["caption"], caption_kinds=kinds)
        if not caps and not s.caption_kinds:
            have = sorted({c.kind for c in film.captions()})
            if "imported" in have:
                caps = rows_as_evidence(film, ["caption"], caption_kinds=("imported",))
                run.note(f"no {self.caption_kind} captions; using the {len(caps)} imported captions instead")
        if not caps:
            have = sorted({c.kind for c in film.captions()})
            raise MovieMemError(f"{film.film_id!r} has no {'/'.join(kinds)} captions "
                                f"({'it has ' + ', '.join(have) if have else stage_reason(film, 'captions')}); "
                                "run the captions stage or import captions")
        return caps

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        rows = self._captions(film, run)
        if s.with_transcript:
            rows = sorted(rows + rows_as_evidence(film, ["utterance"]), key=lambda e: (e.start, e.end))
        for e in rows:
            e.retriever = "world-state"
        run.show(rows)
        run.note(f"world state: {len(rows)} lines")
        audio = " and heard" if s.with_transcript else ""
        return answer_once(run, SOCRATIC, question, body(SOCRATIC, question, context=compact_text(rows), audio=audio),
                           max_tokens=s.max_tokens, temperature=s.temperature, shared_head=True)


class SocraticFrame(_Socratic):
    """The whole history of frame captions (per minute of 0.5 fps stills) as `HH:MM:SS - HH:MM:SS` lines."""

    caption_kind = "frame"


class SocraticClip(_Socratic):
    """The whole history of clip captions (per segment, with audio) as `HH:MM:SS - HH:MM:SS` lines."""

    caption_kind = "clip"
