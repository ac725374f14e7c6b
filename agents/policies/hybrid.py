"""Hybrid: a question-level retriever plus a reader, under a token budget.

The retriever (retrievers/: by default the routed one, which reads the question's type from its
wording and searches the memory channels it needs with the question and each option) ranks the
evidence; it is cut to the token budget in rank order, shown in time order with ids, and read:
by answer-token log-probabilities where the backbone gives them, else as JSON citing the ids used.
`hybrid[retriever=NAME]` gathers with any registered retriever instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms
from ...memory.view import FilmMemory
from ...retrievers.base import Evidence
from ...retrievers.gather import GatherSettings, QuestionRetriever, Routed
from ...retrievers.packing import Lines
from ...retrievers.registry import RETRIEVERS, get_retriever
from ..base import BasePolicy, Run
from ..browse import overview_block
from ..calls import answer_once, body
from ..claims import check_reading, lowercase_words, read_claim
from ..order import claim_order, parse_order, read_order
from ..parsing import Parsed
from ..prompts import HYBRID
from ..reader import can_read, check_calibration, check_rotations, read_letter
from ..rerank import relevance_judge
from ..types import Question, Step

LABELS = {"utterance": "said", "caption": "seen", "onscreen": "on screen", "event": "event", "relation": "link",
          "frame": "frame", "passage": "passage", "character": "character"}


class Hybrid(BasePolicy):
    """Routes by question type across transcript passages, captions, on-screen text and events, under a token budget."""

    @dataclass
    class Settings(GatherSettings):
        # a registered question-level retriever to gather with instead of the routed one these settings drive
        # ("": the routed one; `moviemem retrieval-eval --list` names them, plug-ins included)
        retriever: str = ""
        budget_tokens: int = 1000  # evidence text shown to the model (the prompt adds the question)
        budget_share: float = 0.5  # ... and at most this share of the film's transcript and captions (0: no cap)
        reader: str = "auto"  # json | logprobs | auto (logprobs where the backbone gives them, for mcq and claims)
        claims: str = "foils"  # how the logprobs reader judges a claim: foils | calibrated | qa (agents/claims.py)
        # claims=calibrated: the prior it divides out, content-free (Zhao et al.) | contrast (context-aware decoding
        # against the statement read with no evidence, Shi et al.) | none (reader.calibrated); issue 56
        claim_calibration: str = "content-free"
        # claims: the orders in which the readers show the options they choose between (all: every rotation; two: as
        # given and reversed; one: as given), and whether foils shows a version that changes one stretch of the claim
        # as the words filling that blank (blanks) or as a whole statement (statements). MF² dev claims with `local`:
        # two + blanks 25 of 60 pairs at a median 5,000 input tokens a pair, all + statements 24 at 7,200, one 21 at
        # 2,500, one with budget_tokens=700 23 at 1,860, two with budget_tokens=700 18 at 3,730. The 164 official MF²
        # dev pairs, per half of the films: one order loses on both (A 16 -> 4, B 10 -> 6 of 82); all = two on half A
        rotations: str = "two"
        foil_form: str = "blanks"
        option_words: bool = False  # short options scored as the answer's first word, not by letter (reader.word_probs)
        # multiple choice: the orders the options are read in, one | two | all (reader.orders), and the evidence
        # budget of each reading when there are several. Retrieval recall on the MF² dev MCQs is flat from 750 to
        # 1,000 tokens (0.82 both), so those tokens go to a second reading, which cancels the small model's favoured
        # letters: with `local`, two orders over 750 tokens answered 27 of the 30 dev MCQs (one order over 1,000: 25)
        # at a median 1,890 input tokens (1,217), and 29 of the synthetic film's 41 (27); two orders over 1,000
        # tokens 26 of 30 at 2,434
        letter_rotations: str = "two"
        letter_budget_tokens: int = 750
        overview_tokens: int = 0  # the film's scene list (its table of contents) put before the evidence (0: none)
        # order questions ("which happens first", "... right after X") and claims ("A before B"): locate | read.
        # locate places each option (each event) by its best line and answers from their order where it is
        # decisive (agents/order.py); read leaves them to the model
        order: str = "locate"
        max_tokens: int | None = None
        temperature: float = 0.0

    def __init__(self, **settings: object):
        super().__init__(**settings)
        if self.settings.retriever:
            RETRIEVERS.entry(self.settings.retriever)  # an unknown name is refused before any question is asked

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        if s.order not in ("locate", "read"):
            raise MovieMemError(f"unknown order reader {s.order!r}; use locate or read")
        check_reading(s.rotations, s.foil_form)
        check_calibration(s.claim_calibration)
        check_rotations(s.letter_rotations)
        asked = parse_order(question) if s.order == "locate" else None
        located = read_order(run, film, question, asked) if asked else None
        if located is not None:
            return located
        lines = Lines(film)
        retriever = self.retriever(run)
        judge = relevance_judge(run, question) if retriever.needs_judge else None
        ranked = retriever.retrieve(film, question, trace=run, lines=lines, judge=judge)
        if s.reader not in ("auto", "json", "logprobs"):
            raise MovieMemError(f"unknown reader {s.reader!r}; use auto, json or logprobs")
        letters = s.reader == "logprobs" or (s.reader == "auto" and can_read(run, question))
        rereads = letters and question.kind == "mcq" and s.letter_rotations != "one"
        budget = effective_budget(s.letter_budget_tokens if rereads else s.budget_tokens, s.budget_share,
                                  lines.total_tokens())
        shown = retriever.pack(ranked, budget, lines)
        run.note(f"{len(shown)} blocks from {len(ranked)} hits fit the budget of {budget} tokens")
        shown.sort(key=lambda e: (e.start, e.end, e.id))
        ids = {f"E{n}": e for n, e in enumerate(shown, 1)}
        context = overview_block(film, s.overview_tokens, run) + "\n".join(render(eid, e) for eid, e in ids.items())
        if letters:
            run.note("reader: answer-token log-probabilities")
            run.show(shown)
            if question.kind == "claim":
                common = lowercase_words(lines.text()) if s.claims == "foils" else frozenset()  # only foils reads it
                in_film = (lambda: claim_order(run, film, question.text)) if s.order == "locate" else None
                return read_claim(run, question, context or "(nothing found)", s.claims, common=common, located=in_film,
                                  rotations=s.rotations, form=s.foil_form, calibration=s.claim_calibration)
            return read_letter(run, question, context or "(nothing found)", words=s.option_words,
                               rotations=s.letter_rotations)
        parsed = answer_once(run, HYBRID, question, body(HYBRID, question, cite=True, context=context or "(nothing found)"),
                             cite=True, max_tokens=s.max_tokens, temperature=s.temperature)
        cited = [c for c in parsed.data.get("evidence", []) if isinstance(c, str)] if parsed.data else []
        cited_ev = [ids[c] for c in cited if c in ids]
        run.trace.append(Step("cite", {"cited": [c for c in cited if c in ids], "unknown": [c for c in cited if c not in ids],
                                       "ids": {k: e.id for k, e in ids.items()}}))
        for e in cited_ev:
            e.cited = True
        run.show(cited_ev + [e for e in shown if e not in cited_ev])
        return parsed

    def retriever(self, run: Run) -> QuestionRetriever:
        """The retriever the settings name, or the routed one they drive."""
        if not self.settings.retriever:
            return Routed(GatherSettings.of(self.settings))
        run.note(f"gathering with the registered retriever {self.settings.retriever!r}; the routing settings are not used")
        return get_retriever(self.settings.retriever)


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
