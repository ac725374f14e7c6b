"""Hybrid: a question-level retriever plus a reader, under a token budget.

The retriever (retrievers/: by default the routed one, which reads the question's type from its
wording and searches the memory channels it needs with the question and each option) ranks the
evidence; it is cut to the reader's token budget in rank order, shown in time order with ids, and
read by a reader picked by name from the reader registry (agents/readers/registry.py; `auto` by default):
by answer-token log-probabilities where the backbone gives them (letters, or claims for a claim, each then
naming the block its answer rests on in one short follow-up: readers/cite.py), else as JSON citing the ids
used (said in the trace where it stands in for log-probabilities); `hybrid[reader=NAME]` names another.
Order questions are first put to the order locator, a step before retrieval, which locates each option in
the film and answers where that decides. `hybrid[retriever=NAME]` gathers with any registered retriever
instead; the routed one's steps each carry their own settings (`steps=[fuse, widen(lines=1), ...]`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms
from ...memory.view import FilmMemory
from ...retrievers.gather import QuestionRetriever, Routed
from ...retrievers.packing import Lines
from ...retrievers.registry import RETRIEVERS, get_retriever
from ...retrievers.settings import LEGACY, GatherSettings, fold_legacy
from ...retrievers.types import Evidence
from ..base import BasePolicy, Run, joined_settings, settings_part
from ..browse import overview_block
from ..parsing import Parsed
from ..readers.base import Reader, ReaderSettings, Reading
from ..readers.cite import check_cite
from ..readers.claims import check_reading
from ..readers.letters import check_rotations
from ..readers.order_locate import OrderLocate
from ..readers.registry import READERS, get_reader
from ..rerank import relevance_judge
from ..types import Question

LABELS = {"utterance": "said", "caption": "seen", "onscreen": "on screen", "event": "event", "relation": "link",
          "frame": "frame", "passage": "passage", "character": "character"}


@dataclass
class ShownSettings:
    """What the reader is shown: which retriever ranks the evidence, and how much of it fits."""

    # a registered question-level retriever to gather with instead of the routed one the GatherSettings drive
    # ("": the routed one; `moviemem retrieval-eval --list` names them, plug-ins included)
    retriever: str = ""
    budget_tokens: int = 1000  # evidence text shown to the model (the prompt adds the question)
    budget_share: float = 0.5  # ... and at most this share of the film's transcript and captions (0: no cap)
    overview_tokens: int = 0  # the film's scene list (its table of contents) put before the evidence (0: none)


class Hybrid(BasePolicy):
    """Routes by question type across transcript passages, captions, on-screen text and events, under a token budget."""

    # what is shown, how the routed retriever gathers it, how it is read: one namespace, each part its own settings
    Settings = joined_settings(f"{__name__}:Hybrid", ShownSettings, GatherSettings, ReaderSettings)

    # the steps' settings as flat names, from before they moved onto the steps: still taken, written onto their step
    legacy_settings = LEGACY

    def __init__(self, **settings: object):
        old: dict[str, Any] = {k: settings.pop(k) for k in LEGACY if k in settings}
        if old:  # hybrid[context_lines=1] is hybrid[steps=[..., widen(lines=1), ...]]
            steps: Any = settings.get("steps", GatherSettings().steps)
            settings["steps"] = fold_legacy(tuple(steps), **old)
        super().__init__(**settings)
        # unknown names, a step's unknown or bad setting: refused before any question is asked
        READERS.entry(self.settings.reader)
        if self.settings.retriever:
            RETRIEVERS.entry(self.settings.retriever)
        else:
            Routed(settings_part(GatherSettings, self.settings))

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        if s.order not in ("locate", "read"):
            raise MovieMemError(f"unknown order reader {s.order!r}; use locate or read")
        check_reading(s.rotations, s.foil_form, s.claim_calibration)
        check_rotations(s.letter_rotations)
        check_cite(s.cite)
        located = OrderLocate().answer(run, film, question) if s.order == "locate" else None
        if located is not None:
            return located
        lines = Lines(film)
        retriever = self.retriever(run)
        judge = relevance_judge(run, question) if retriever.needs_judge else None
        ranked = retriever.retrieve(film, question, trace=run, lines=lines, judge=judge)
        reader = self.reader(run, question)
        budget = effective_budget(reader.budget(question, s.budget_tokens), s.budget_share, lines.total_tokens())
        shown = retriever.pack(ranked, budget, lines)
        run.note(f"{len(shown)} blocks from {len(ranked)} hits fit the budget of {budget} tokens")
        shown.sort(key=lambda e: (e.start, e.end, e.id))
        ids = {f"E{n}": e for n, e in enumerate(shown, 1)}
        context = overview_block(film, s.overview_tokens, run) + "\n".join(render(eid, e) for eid, e in ids.items())
        return reader.read(run, Reading(film, question, ids, context, lines))

    def retriever(self, run: Run) -> QuestionRetriever:
        """The retriever the settings name, or the routed one they drive."""
        if not self.settings.retriever:
            return Routed(settings_part(GatherSettings, self.settings))
        run.note(f"gathering with the registered retriever {self.settings.retriever!r}; the routing settings are not used")
        return get_retriever(self.settings.retriever)

    def reader(self, run: Run, question: Question) -> Reader:
        """The reader the settings name, from the reader registry (readers/registry.py; `auto` by default)."""
        s = settings_part(ReaderSettings, self.settings)
        return get_reader(s.reader, s, run, question)


MIN_CAPPED_TOKENS = 100  # the share cap never goes below a few lines: half of a tiny film's text holds no block


def effective_budget(budget: int, share: float, memory_tokens: int) -> int:
    """The evidence budget, capped at a share of the film's own text: on a short film a fixed budget
    shows nearly all of it, and the small reader then does worse than with the best part (synthetic
    3-minute film: 56% with 1,000 tokens, 71% with 450). Feature films (10k+ tokens) are unaffected."""
    if share <= 0 or memory_tokens <= 0:
        return budget
    return min(budget, max(MIN_CAPPED_TOKENS, int(share * memory_tokens)))


def render(eid: str, e: Evidence) -> str:
    """One evidence block: id, times, what kind of memory, text (a passage's lines indented under it)."""
    head = f"[{eid}] {hms(e.start)}-{hms(e.end)} ({LABELS.get(e.rows[0] if e.rows else e.kind, e.kind)})"
    return f"{head}:\n    " + e.text.replace("\n", "\n    ") if "\n" in e.text else f"{head} {e.text}"
