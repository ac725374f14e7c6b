"""Each built-in reader's own settings, given where the reader is named (`hybrid[reader=claims(rotations=one)]`),
the values each takes, and the readers' flat settings from before they moved onto their readers.

Below the readers (letters.py, claims.py, json_answer.py) and the registry that makes them, so a reader is made
from its settings without importing another, and a setting no reader knows is refused when the policy is built,
before any question is asked (`__post_init__`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...foundation.errors import MovieMemError

ROTATIONS = ("one", "two", "all")
CALIBRATIONS = ("content-free", "contrast", "none")
CLAIM_READERS = ("calibrated", "foils", "qa")
FORMS = ("statements", "blanks")
CITE_MODES = ("follow-up", "none")
ORDERS = ("locate", "read")


def one_of(value: str, allowed: tuple[str, ...], what: str, use: str | None = None) -> None:
    """Refuse a value that is not one of `allowed`, naming the setting (`what`) and what it takes (`use`: how the
    message says it, where not "one of" the list)."""
    if value not in allowed:
        raise MovieMemError(f"unknown {what} {value!r}; use {use or 'one of ' + ', '.join(allowed)}")


def check_rotations(rotations: str) -> None:
    one_of(rotations, ROTATIONS, "rotations")


def check_calibration(calibration: str) -> None:
    one_of(calibration, CALIBRATIONS, "claim calibration")


def check_reading(rotations: str, form: str, calibration: str = "content-free") -> None:
    """Fail on a reading setting that no reader knows, before anything is asked."""
    check_rotations(rotations)
    check_calibration(calibration)
    one_of(form, FORMS, "foil form")


def check_claim_reader(how: str) -> None:
    one_of(how, CLAIM_READERS, "claim reader")


def check_cite(mode: str) -> None:
    one_of(mode, CITE_MODES, "cite")


def check_order(order: str) -> None:
    one_of(order, ORDERS, "order reader", use="locate or read")


@dataclass
class LettersSettings:
    """The letters reader's (`letters(rotations=one, budget_tokens=1000)`).

    rotations: the orders the options are read in, one | two | all (letters.orders), and budget_tokens the
    evidence budget of each reading when there are several. Retrieval recall on the MF² dev MCQs is flat from
    750 to 1,000 tokens (0.82 both), so those tokens go to a second reading, which cancels the small model's
    favoured letters: with `local`, two orders over 750 tokens answered 27 of the 30 dev MCQs (one order over
    1,000: 25) at a median 1,890 input tokens (1,217), and 29 of the synthetic film's 41 (27); two orders over
    1,000 tokens 26 of 30 at 2,434. option_words: short options scored as the answer's first word, not by letter
    (letters.word_probs). cite: follow-up (after the answer is read, one short question in the same conversation
    for the block's number: readers/cite.py) | none."""

    rotations: str = "two"
    budget_tokens: int = 750
    option_words: bool = False
    cite: str = "follow-up"

    def __post_init__(self) -> None:
        check_rotations(self.rotations)
        check_cite(self.cite)


@dataclass
class ClaimsSettings:
    """The claims reader's (`claims(method=calibrated, rotations=one)`).

    method: how a claim is judged, foils | calibrated | qa (readers/claims.py); calibration, for method=calibrated:
    the prior it divides out, content-free (Zhao et al.) | contrast (context-aware decoding against the statement
    read with no evidence, Shi et al.) | none (letters.calibrated; issue 56). rotations: the orders in which the
    statements it chooses between are shown (all: every rotation; two: as given and reversed; one: as given), and
    foil_form whether foils shows a version that changes one stretch of the claim as the words filling that blank
    (blanks) or as a whole statement (statements). MF² dev claims with `local`: two + blanks 25 of 60 pairs at a
    median 5,000 input tokens a pair, all + statements 24 at 7,200, one 21 at 2,500, one with budget_tokens=700
    23 at 1,860, two with budget_tokens=700 18 at 3,730. The 164 official MF² dev pairs, per half of the films:
    one order loses on both (A 16 -> 4, B 10 -> 6 of 82); all = two on half A. order: locate places a claim's two
    ordered events ("A before B") at their lines in the film where that decides (readers/order_locate.py), read
    leaves them to the model. cite: as the letters reader's."""

    method: str = "foils"
    calibration: str = "content-free"
    rotations: str = "two"
    foil_form: str = "blanks"
    order: str = "locate"
    cite: str = "follow-up"

    def __post_init__(self) -> None:
        check_claim_reader(self.method)
        check_reading(self.rotations, self.foil_form, self.calibration)
        check_order(self.order)
        check_cite(self.cite)


@dataclass
class JsonSettings:
    """The JSON reader's (`json(max_tokens=256)`): the written answer's length (None: the backbone's) and
    sampling temperature. It cites in its reply, so it has no `cite`."""

    max_tokens: int | None = None
    temperature: float = 0.0


# The readers' flat settings from before they moved onto their readers (hybrid[rotations=one, cite=none]): each
# old name, its type, and the (reader, setting) pairs it is written onto (registry.fold_reader_legacy). `order`
# is hybrid's own (its step before retrieval) and, as before, the claims reader's too.
LEGACY_READER: dict[str, tuple[Any, tuple[tuple[str, str], ...]]] = {
    "claims": (str, (("claims", "method"),)),
    "claim_calibration": (str, (("claims", "calibration"),)),
    "rotations": (str, (("claims", "rotations"),)),
    "foil_form": (str, (("claims", "foil_form"),)),
    "option_words": (bool, (("letters", "option_words"),)),
    "letter_rotations": (str, (("letters", "rotations"),)),
    "letter_budget_tokens": (int, (("letters", "budget_tokens"),)),
    "cite": (str, (("letters", "cite"), ("claims", "cite"))),
    "max_tokens": (int | None, (("json", "max_tokens"),)),
    "temperature": (float, (("json", "temperature"),)),
    "order": (str, (("claims", "order"),)),
}
