"""What a reader is handed and how it is set: the values below every reader.

`ReaderSettings` are the readers' knobs, as hybrid's settings spell them (`hybrid[rotations=one]`);
`Reading` is the packed evidence in time order under the ids the prompt shows (E1, E2, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...memory.view import FilmMemory
from ...retrievers.packing import Lines
from ...retrievers.types import Evidence
from ..base import Run
from ..parsing import Parsed
from ..types import Question

NOTHING_FOUND = "(nothing found)"


@dataclass
class ReaderSettings:
    """How the evidence is read into an answer."""

    reader: str = "auto"  # json | logprobs | auto (logprobs where the backbone gives them, for mcq and claims)
    claims: str = "foils"  # how the logprobs reader judges a claim: foils | calibrated | qa (readers/claims.py)
    # claims=calibrated: the prior it divides out, content-free (Zhao et al.) | contrast (context-aware decoding
    # against the statement read with no evidence, Shi et al.) | none (letters.calibrated); issue 56
    claim_calibration: str = "content-free"
    # claims: the orders in which the readers show the options they choose between (all: every rotation; two: as
    # given and reversed; one: as given), and whether foils shows a version that changes one stretch of the claim
    # as the words filling that blank (blanks) or as a whole statement (statements). MF² dev claims with `local`:
    # two + blanks 25 of 60 pairs at a median 5,000 input tokens a pair, all + statements 24 at 7,200, one 21 at
    # 2,500, one with budget_tokens=700 23 at 1,860, two with budget_tokens=700 18 at 3,730. The 164 official MF²
    # dev pairs, per half of the films: one order loses on both (A 16 -> 4, B 10 -> 6 of 82); all = two on half A
    rotations: str = "two"
    foil_form: str = "blanks"
    option_words: bool = False  # short options scored as the answer's first word, not by letter (letters.word_probs)
    # multiple choice: the orders the options are read in, one | two | all (letters.orders), and the evidence
    # budget of each reading when there are several. Retrieval recall on the MF² dev MCQs is flat from 750 to
    # 1,000 tokens (0.82 both), so those tokens go to a second reading, which cancels the small model's favoured
    # letters: with `local`, two orders over 750 tokens answered 27 of the 30 dev MCQs (one order over 1,000: 25)
    # at a median 1,890 input tokens (1,217), and 29 of the synthetic film's 41 (27); two orders over 1,000
    # tokens 26 of 30 at 2,434
    letter_rotations: str = "two"
    letter_budget_tokens: int = 750
    # order questions ("which happens first", "... right after X") and claims ("A before B"): locate | read.
    # locate places each option (each event) by its best line and answers from their order where it is
    # decisive (readers/order_locate.py); read leaves them to the model
    order: str = "locate"
    # how a reader of log-probabilities (letters, claims) names the evidence its answer rests on: follow-up (after
    # the answer is read, one short question in the same conversation for the block's number: readers/cite.py) |
    # none. The JSON reader cites in its reply either way
    cite: str = "follow-up"
    max_tokens: int | None = None
    temperature: float = 0.0


@dataclass
class Reading:
    """The evidence a reader reads: `ids` in time order (E1, E2, ... -> the block), `context` the text the
    prompt shows (the film's overview, then each block), `lines` the film's rows."""

    film: FilmMemory
    question: Question
    ids: dict[str, Evidence]
    context: str
    lines: Lines

    @property
    def shown(self) -> list[Evidence]:
        return list(self.ids.values())

    @property
    def text(self) -> str:
        """The context as the prompt shows it: never empty, so the model is told nothing was found."""
        return self.context or NOTHING_FOUND


class Reader(Protocol):
    """Reads a packed ranking into an answer; `budget` is the evidence it reads best from (tokens). Registered
    by name in readers/registry.py (`hybrid[reader=NAME]`)."""

    def budget(self, question: Question, default: int) -> int: ...

    def read(self, run: Run, reading: Reading) -> Parsed: ...


class BeforeRetrieval(Protocol):
    """A step that may answer a question from the film's memory before anything is retrieved (order_locate.py:
    where each option is in the film), or decline with None (said in the trace), the question then going on to
    retrieval and a reader."""

    def answer(self, run: Run, film: FilmMemory, question: Question) -> Parsed | None: ...
