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
instead. The parts carry their own settings where they are named: the routed retriever's steps
(`steps=[fuse, widen(lines=1), ...]`) and the reader (`reader=claims(rotations=one)`,
`reader=auto(letters.rotations=one)`); the old flat spellings of both (`context_lines=1`, `rotations=one`,
`cite=none`) are still taken and written onto their owners, so an old run's settings mean what they meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from ..readers.base import Reader, Reading
from ..readers.order_locate import OrderLocate
from ..readers.registry import fold_reader_legacy, get_reader, parse_reader
from ..readers.settings import LEGACY_READER, check_order
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


@dataclass
class ReadSettings:
    """Which reader reads the evidence, and whether order questions are first answered by locating their options."""

    # a registered reader, with its own settings where it is named (readers/registry.py; built-ins' in
    # readers/settings.py): json | letters(rotations=one) | claims(method=qa) | logprobs | auto (logprobs where
    # the backbone gives them, for mcq and claims, else json), the last two taking each reader's as
    # auto(letters.rotations=one, claims.cite=none)
    reader: str = "auto"
    # order questions ("which happens first", "... right after X"): locate | read. locate places each option by
    # its best line and answers from their order where it is decisive (readers/order_locate.py), before anything
    # is retrieved, whatever reader is named; read leaves them to the reader. Hybrid's, as its step before
    # retrieval; given here it is also the claims reader's `order` (claims "A before B"), as it always was,
    # unless the reader's own spelling gives it
    order: str = "locate"


class Hybrid(BasePolicy):
    """Routes by question type across transcript passages, captions, on-screen text and events, under a token budget."""

    # what is shown, how the routed retriever gathers it, which reader reads it: one namespace of hybrid's own
    # settings; the steps and the reader carry theirs where they are named
    Settings = joined_settings(f"{__name__}:Hybrid", ShownSettings, GatherSettings, ReadSettings)

    # the steps' and the readers' settings as flat names, from before they moved onto their owners: still taken,
    # written onto the step or reader that owns them
    legacy_settings = {**LEGACY, **{k: hint for k, (hint, _) in LEGACY_READER.items() if k != "order"}}

    def __init__(self, **settings: object):
        old: dict[str, Any] = {k: settings.pop(k) for k in LEGACY if k in settings}
        if old:  # hybrid[context_lines=1] is hybrid[steps=[..., widen(lines=1), ...]]
            steps: Any = settings.get("steps", GatherSettings().steps)
            settings["steps"] = fold_legacy(tuple(steps), **old)
        if "order" in settings:
            check_order(str(settings["order"]))
        flat = {k: settings.pop(k) if k != "order" else settings[k] for k in LEGACY_READER if k in settings}
        if flat:  # hybrid[rotations=one] is hybrid[reader=auto(claims.rotations="one")]
            settings["reader"] = fold_reader_legacy(str(settings.get("reader", ReadSettings.reader)), flat)
        super().__init__(**settings)
        # unknown names, a step's or the reader's unknown or bad setting: refused before any question is asked
        self._reader = (self.settings.reader, *parse_reader(self.settings.reader))
        if self.settings.retriever:
            RETRIEVERS.entry(self.settings.retriever)
        else:
            Routed(settings_part(GatherSettings, self.settings))

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
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
        """The reader the settings name, from the reader registry (readers/registry.py; `auto` by default), made
        with its own settings (parsed and checked once, when the policy is built)."""
        spec, name, own = self._reader
        if spec != self.settings.reader:  # settings changed after the policy was built
            spec, name, own = self._reader = (self.settings.reader, *parse_reader(self.settings.reader))
        return get_reader(name, own, run, question)


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
