"""Claim readers that set a claim against versions of itself (agents/readers/claims.py); no film, no model."""

from __future__ import annotations

import math

import pytest

from moviemem.agents.base import Run
from moviemem.agents.readers.claims import (
    blank_of,
    cause_foil,
    foils,
    joined_parts,
    order_swapped,
    participle_opening,
    read_claim,
    sentence_openers,
    specifics,
    timeline_order,
)
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.foundation.errors import MovieMemError

EVIDENCE = """[E1] 00:21:00-00:21:10 (said) Corwin: I got the Bronze Cross for 31 of them, all by myself.
[E2] 00:22:00-00:22:04 (said) Ned Fowler left the milk at the door.
[E3] 01:02:03-01:02:09 (said) Pop Ledger waited at the station with Ned Fowler."""


def _lp(**alts: float) -> Reply:
    return Reply(text=max(alts, key=alts.get), logprobs=[{k: math.log(v) for k, v in alts.items()}])


def test_specifics_are_names_and_numbers_not_times_or_sentence_starts() -> None:
    assert specifics("Corwin won the Bronze Cross for 13 soldiers.", set()) == [
        ("name", "Corwin"), ("name", "Bronze Cross"), ("number", "13")]
    # evidence ids and times are not numbers; a capitalised word also seen in lower case is not a name
    found = specifics(EVIDENCE, set())
    assert ("number", "31") in found and ("name", "Ned Fowler") in found
    assert not any(w in ("00", "21", "01", "E1") for _, w in found)
    assert specifics("The milk. Waited the door.", {"waited"}) == []
    assert specifics("Seven men came.", set()) == [("number", "Seven")]


def test_foils_challenge_only_what_the_evidence_never_mentions() -> None:
    # 13 is not in the evidence: it is swapped for the evidence's numbers; Corwin and the Bronze Cross are mentioned
    assert foils("Corwin won the Bronze Cross for killing 13 soldiers.", EVIDENCE) == [
        "Corwin won the Bronze Cross for killing 31 soldiers."]
    # an unmentioned name is swapped for the evidence's names, most frequent first
    out = foils("Tom Jones left the milk at the door.", EVIDENCE)
    assert out[0] == "Ned Fowler left the milk at the door." and "Corwin left the milk at the door." in out
    assert len(out) <= 4 and len(set(out)) == len(out)
    assert foils("Ned Fowler left the milk for Corwin.", EVIDENCE) == []  # every detail is mentioned
    assert foils("The milk was left at the door.", EVIDENCE) == []  # no name or number to swap
    assert foils("Seven men came.", "[E1] 00:00:01-00:00:02 (said) seven men") == []  # the same value, in words
    # numbers spelled out in the evidence are the same values ...
    assert foils("He paid 35 cents, then $250.", "[E1] thirty-five cents. Two hundred and fifty dollars!") == []
    # ... and swapped in as digits; an ordinal ('3rd', 'third') is no number
    assert foils("He paid $2,500 on the 3rd day.", "[E1] Two hundred and fifty dollars, on the third day.") == [
        "He paid $250 on the 3rd day."]


def test_a_name_the_evidence_gives_in_part_is_mentioned_and_no_substitute_repeats_the_claims_own_names() -> None:
    evidence = ("[E1] 00:10:00-00:10:05 (said) Mr. Ledger used to be in the Coast Guard.\n"
                "[E2] 00:11:00-00:11:04 (said) Greta went out with Arnold to the Salt River.\n"
                "[E3] 00:12:00-00:12:04 (said) We saw Greta and Rosa at the dance.")
    assert foils("Pop Ledger left the Coast Guard.", evidence) == []  # 'Mr. Ledger' names him; 'Ledger' is no foil
    assert foils("Arnold blamed himself for Greta's illness.", evidence) == []  # the possessive is the same name
    # 'Cedar River' shares only 'River' with 'Salt River': challenged, and its substitutes are the evidence's
    # other names, never 'Arnold' alone standing for 'Arnold' (it is the claim's own)
    # a name the evidence gives within a longer one is mentioned: the film writes 'governor' in lower case
    # elsewhere, so the claim's name is 'Hale's' alone while the evidence's is 'Governor Hale's'
    assert foils("Greta met Governor Hale's daughter.", evidence + "\n[E4] 00:13:00-00:13:04 (said) She is Governor "
                 "Hale's daughter.", common={"governor"}) == []
    out = foils("Arnold drove Greta to the Cedar River.", evidence)
    assert "Arnold drove Greta to the Salt River." in out
    assert all(not o.endswith("to the Arnold.") and not o.endswith("to the Greta.") for o in out)



def test_foils_reader_picks_the_supported_version_in_every_rotation() -> None:
    claim = "Corwin won the Bronze Cross for killing 13 soldiers."
    q = Question(claim, kind="claim")
    versions = foils(claim, EVIDENCE)
    n = 1 + len(versions)
    # the model always gives the version with 31 the most probability, wherever it is shown: FALSE
    replies = []
    for shift in range(n):
        order = [(i + shift) % n for i in range(n)]
        letters = "ABCDE"[:n]
        probs = {letters[pos]: (0.6 if i == 1 else 0.4 / (n - 1)) for pos, i in enumerate(order)}
        replies.append(_lp(**probs))
    b = ScriptedBackbone(replies, capabilities={"logprobs": True})
    run = Run(b)
    parsed = read_claim(run, q, EVIDENCE, "foils", rotations="all", form="statements")
    assert (parsed.choice, parsed.invalid) == ("FALSE", False) and len(b.calls) == n
    for call in b.calls:  # evidence first, statements last: every call reuses the same prefix
        assert call.messages[-1].text.startswith("Evidence from the film's memory") and EVIDENCE in call.messages[-1].text
    scores = next(s for s in run.trace if s.kind == "scores").data
    assert scores["statements"][0] == claim and scores["p"][1] == pytest.approx(0.6, abs=1e-3)
    # the claim gets the most: TRUE
    b = ScriptedBackbone([_lp(**{"ABCDE"[pos]: (0.6 if pos == shift % n else 0.4 / (n - 1)) for pos in range(n)})
                          for shift in range(0, -n, -1)], capabilities={"logprobs": True})
    assert read_claim(Run(b), q, EVIDENCE, "foils", rotations="all", form="statements").choice == "TRUE"


def test_foils_reader_without_anything_to_swap_sets_the_claim_against_its_negation() -> None:
    claim = "The milk was left at the door."
    # the negation gets the most wherever it is shown (B first, then A): FALSE, in two calls
    b = ScriptedBackbone([_lp(A=0.4, B=0.6), _lp(A=0.6, B=0.4)], capabilities={"logprobs": True})
    run = Run(b)
    parsed = read_claim(run, Question(claim, kind="claim"), EVIDENCE, "foils")
    assert (parsed.choice, parsed.invalid) == ("FALSE", False) and len(b.calls) == 2
    assert any("set against its negation" in s.data.get("text", "") for s in run.trace if s.kind == "note")
    scores = next(s for s in run.trace if s.kind == "scores").data
    assert scores["statements"] == [claim, "It is not true that the milk was left at the door."]
    assert scores["kinds"] == ["negation"] and scores["p"] == [pytest.approx(0.4), pytest.approx(0.6)]
    # the claim gets the most: TRUE; a name opening the claim keeps its capital
    b = ScriptedBackbone([_lp(A=0.7, B=0.3), _lp(A=0.3, B=0.7)], capabilities={"logprobs": True})
    run = Run(b)
    assert read_claim(run, Question("Ned Fowler left the milk.", kind="claim"), EVIDENCE, "foils").choice == "TRUE"
    assert next(s for s in run.trace if s.kind == "scores").data["statements"][1] == (
        "It is not true that Ned Fowler left the milk.")
    assert len(b.calls) == 2 and b.calls[0].logprobs == 20
    with pytest.raises(MovieMemError, match="unknown claim reader"):
        read_claim(Run(b), Question("x", kind="claim"), EVIDENCE, "vibes")



def test_two_rotations_read_the_options_as_given_and_reversed() -> None:
    claim = "Corwin won the Bronze Cross for killing 13 soldiers."
    assert len(foils(claim, EVIDENCE)) == 1
    # the model prefers whatever is shown first, and the claim is first as given and last reversed, so it
    # averages with its foil: the tie goes to the claim, read in two calls
    b = ScriptedBackbone([_lp(A=0.6, B=0.4), _lp(A=0.6, B=0.4)], capabilities={"logprobs": True})
    run = Run(b)
    assert read_claim(run, Question(claim, kind="claim"), EVIDENCE, "foils", form="statements").choice == "TRUE"
    assert len(b.calls) == 2
    shown = [[line for line in c.messages[-1].text.splitlines() if line[:3] in ("A. ", "B. ")] for c in b.calls]
    assert shown[0][0] == f"A. {claim}" and shown[1][0] != shown[0][0]
    assert next(s for s in run.trace if s.kind == "scores").data["rotations"] == "two"
    # five statements, still two calls: the last shown first the second time
    many = "Tom Jones left the milk at the door."
    b = ScriptedBackbone([_lp(A=0.5, B=0.2, C=0.1, D=0.1, E=0.1)] * 2, capabilities={"logprobs": True})
    run = Run(b)
    read_claim(run, Question(many, kind="claim"), EVIDENCE, "foils", form="statements")
    statements = next(s for s in run.trace if s.kind == "scores").data["statements"]
    assert len(statements) == 5 and len(b.calls) == 2 and f"A. {statements[-1]}" in b.calls[1].messages[-1].text
    with pytest.raises(MovieMemError, match="unknown rotations"):
        read_claim(Run(b), Question(claim, kind="claim"), EVIDENCE, "foils", rotations="some")



def test_multiple_choice_read_in_two_orders_cancels_a_favoured_position() -> None:
    """A reader that favours the first letter says A both times; averaged over the orders, the
    option it prefers once moved to another position wins (reader.read_letter, rotations)."""
    from moviemem.agents.readers.letters import read_letter

    q = Question("Who left the milk?", ("Corwin", "Ned Fowler", "Greta"))
    one = ScriptedBackbone([_lp(A=0.5, B=0.3, C=0.2)], capabilities={"logprobs": True})
    assert read_letter(Run(one), q, EVIDENCE).choice == "A" and len(one.calls) == 1
    # as given: A (Corwin) 0.5, B (Ned) 0.3; reversed (Greta, Ned, Corwin): A (Greta) 0.4, B (Ned) 0.45, C (Corwin) 0.15
    two = ScriptedBackbone([_lp(A=0.5, B=0.3, C=0.2), _lp(A=0.4, B=0.45, C=0.15)], capabilities={"logprobs": True})
    run = Run(two)
    got = read_letter(run, q, EVIDENCE, rotations="two")
    assert got.choice == "B" and got.text == "Ned Fowler" and len(two.calls) == 2
    assert "C. Corwin" in two.calls[1].messages[-1].text and "A. Greta" in two.calls[1].messages[-1].text
    assert "in two orders" in next(s for s in run.trace if s.kind == "scores").data["how"]
    with pytest.raises(MovieMemError, match="unknown rotations"):
        read_letter(Run(two), q, EVIDENCE, rotations="three")


def test_a_version_that_changes_one_stretch_of_words_is_that_blank_filled_otherwise() -> None:
    assert blank_of("Back from Dunmore, Tom hears the news.", "Back from Kilbride, Tom hears the news.") == (
        "Back from ___, Tom hears the news.", "Dunmore", "Kilbride")
    # whole words and numbers: '24' -> '314' shares its '4', "Hale's" its 's', '4,800' its '4'
    assert blank_of("from 24 to 60 pence", "from 314 to 60 pence") == ("from ___ to 60 pence", "24", "314")
    assert blank_of("one of Governor Hale's parties", "one of Governor Corwin's parties")[1:] == ("Hale's", "Corwin's")
    assert blank_of("about $4,800 a year", "about $4 a year") == ("about $___ a year", "4,800", "4")
    assert blank_of("He left because the mill closed.", "He left because he lost a bet.") == (
        "He left because ___.", "the mill closed", "he lost a bet")
    assert blank_of("He left.", "He left early.") is None  # nothing of the claim's own to fill the blank with


def test_blanks_read_each_changed_stretch_as_a_choice_of_the_words_that_fill_it() -> None:
    claim = "Tom Jones left the milk at the door."
    versions = foils(claim, EVIDENCE)
    assert len(versions) == 4
    # one blank (the name), its five fillers read as given and reversed; the model prefers Ned Fowler both times
    b = ScriptedBackbone([_lp(A=0.1, B=0.6, C=0.1, D=0.1, E=0.1), _lp(A=0.1, B=0.1, C=0.1, D=0.6, E=0.1)],
                         capabilities={"logprobs": True})
    run = Run(b)
    parsed = read_claim(run, Question(claim, kind="claim"), EVIDENCE, "foils", rotations="two", form="blanks")
    assert parsed.choice == "FALSE" and len(b.calls) == 2
    text = b.calls[0].messages[-1].text
    assert '"___ left the milk at the door."' in text and "A. Tom Jones" in text and "B. Ned Fowler" in text
    scores = next(s for s in run.trace if s.kind == "scores").data
    assert scores["options"][:2] == ["Tom Jones", "Ned Fowler"] and scores["form"] == "blanks"
    # the claim's words win the blank: TRUE
    b = ScriptedBackbone([_lp(A=0.6, B=0.1, C=0.1, D=0.1, E=0.1), _lp(A=0.1, B=0.1, C=0.1, D=0.1, E=0.6)],
                         capabilities={"logprobs": True})
    assert read_claim(Run(b), Question(claim, kind="claim"), EVIDENCE, "foils", rotations="two",
                      form="blanks").choice == "TRUE"
    # a cause and an order are two choices; losing either makes the claim FALSE
    claim = "The butler hides the letter before the police search the garden because Anna told him to."
    b = ScriptedBackbone(["he was afraid", _lp(A=0.7, B=0.3), _lp(A=0.3, B=0.7), _lp(A=0.3, B=0.7), _lp(A=0.7, B=0.3)],
                         capabilities={"logprobs": True})
    run = Run(b)
    assert read_claim(run, Question(claim, kind="claim"), TIMELINE, "foils", form="blanks").choice == "FALSE"
    steps = [s.data for s in run.trace if s.kind == "scores"]
    assert [s["kinds"] for s in steps] == [["cause"], ["order"]] and steps[0]["options"] == ["Anna told him to", "he was afraid"]
    with pytest.raises(MovieMemError, match="unknown foil form"):
        read_claim(Run(b), Question(claim, kind="claim"), EVIDENCE, "foils", form="cloze")


TIMELINE = """[E1] 00:10:00-00:10:20 (said):
    The butler hid the letter in the piano.
[E2] 00:40:00-00:40:30 (said):
    Anna got off the train at the station.
    Nobody met her."""


def test_order_edits_swap_the_two_events() -> None:
    assert order_swapped("The butler hides the letter before Anna arrives at the station.", "the butler") == (
        "Anna arrives at the station before the butler hides the letter.")
    assert order_swapped("Anna arrives at the station after Tom hides the letter.") == (
        "Tom hides the letter after Anna arrives at the station.")  # a name keeps its capital
    assert order_swapped("He left the night before.") is None  # no second event
    assert order_swapped("Tom waits before Anna comes before the train leaves.") is None  # not one order


def test_a_claim_joining_two_events_splits_into_its_two_sides() -> None:
    assert joined_parts("The butler hides the letter before Anna arrives at the station.") == (
        "The butler hides the letter", "Anna arrives at the station")
    assert joined_parts("Tom leaves the party because Anna insults him.") == ("Tom leaves the party", "Anna insults him")
    assert joined_parts("He left the night before.") is None  # one event
    assert joined_parts("Tom waits for the train.") is None


def test_timeline_places_each_event_at_the_line_telling_it() -> None:
    passage = """[E1] 00:10:00-00:11:00 (said):
    Good morning.
    The butler hid the letter in the piano.
    Nobody saw him.
    Tea is ready.
    Later Anna got off the train at the station.
    Nobody met her."""
    # one passage: the order of its lines decides
    assert timeline_order("Anna gets off the train after the butler hides the letter.", passage) is True
    assert timeline_order("Anna gets off the train before the butler hides the letter.", passage) is False
    assert timeline_order("The butler hides the letter before Anna gets off the train.", TIMELINE) is True
    assert timeline_order("Anna gets off the train before the butler hides the letter.", TIMELINE) is False
    assert timeline_order("Anna gets off the train after the butler hides the letter.", TIMELINE) is True
    # an event the evidence does not clearly hold leaves the order to the reader
    assert timeline_order("The butler hides the letter before the police search the garden.", TIMELINE) is None
    assert timeline_order("The butler hides the letter.", TIMELINE) is None


def test_a_wrong_order_is_false_without_asking_the_model() -> None:
    b = ScriptedBackbone([], capabilities={"logprobs": True})
    run = Run(b)
    parsed = read_claim(run, Question("Anna gets off the train before the butler hides the letter.", kind="claim"),
                        TIMELINE, "foils")
    assert (parsed.choice, parsed.how, b.calls) == ("FALSE", "timeline", [])
    parsed = read_claim(Run(b), Question("The butler hides the letter before Anna gets off the train.", kind="claim"),
                        TIMELINE, "foils")
    assert (parsed.choice, parsed.how, b.calls) == ("TRUE", "timeline", [])


def test_an_unplaced_order_is_read_against_the_swapped_claim() -> None:
    claim = "The butler hides the letter before the police search the garden."
    b = ScriptedBackbone([_lp(A=0.3, B=0.7), _lp(A=0.7, B=0.3)], capabilities={"logprobs": True})
    run = Run(b)
    assert read_claim(run, Question(claim, kind="claim"), TIMELINE, "foils").choice == "FALSE"
    scores = next(s for s in run.trace if s.kind == "scores").data
    assert scores["kinds"] == ["order"] and scores["statements"][1] == (
        "The police search the garden before the butler hides the letter.")


def test_a_cause_is_written_from_the_evidence_with_the_claims_own_hidden() -> None:
    claim = "Anna leaves town because the butler hid the letter."
    b = ScriptedBackbone(["she missed the train."], capabilities={"logprobs": True})
    run = Run(b)
    assert cause_foil(run, claim, TIMELINE) == "Anna leaves town because she missed the train."
    prompt = b.calls[0].messages[-1].text
    assert TIMELINE in prompt and prompt.rstrip().endswith("Anna leaves town because ...") and "butler hid" not in \
        prompt.split(TIMELINE)[1]
    # the model repeats the sentence: only its cause is kept; a cause in the claim's own words is no foil
    b = ScriptedBackbone(["Anna leaves town because Tom lied."])
    assert cause_foil(Run(b), claim, TIMELINE) == "Anna leaves town because Tom lied."
    b = ScriptedBackbone(["The butler hid a letter"])
    assert cause_foil(Run(b), claim, TIMELINE) is None
    assert cause_foil(Run(ScriptedBackbone([])), "Anna leaves town.", TIMELINE) is None  # no cause: no call


def test_the_cause_foil_is_set_against_the_claim() -> None:
    claim = "Anna leaves town because the butler hid the letter."
    # cloze, then the two statements in both rotations: the model prefers the evidence's cause
    b = ScriptedBackbone(["she missed the train", _lp(A=0.2, B=0.8), _lp(A=0.8, B=0.2)],
                         capabilities={"logprobs": True})
    run = Run(b)
    assert read_claim(run, Question(claim, kind="claim"), TIMELINE, "foils").choice == "FALSE"
    assert next(s for s in run.trace if s.kind == "scores").data["kinds"] == ["cause"]


def test_words_that_only_open_sentences_are_not_swapped_in_as_names() -> None:
    said = """[E1] 00:01:00-00:01:30 (said):
    Hi, Pop. Maybe later.
    I've seen Pop Ledger at the station with Mr. Pruitt."""
    assert {"Hi", "Maybe", "I've"} <= sentence_openers(said) and not {"Pop", "Pruitt"} & sentence_openers(said)
    out = foils("Tom Jones met the train.", said)
    assert out and not any(w in v for v in out for w in ("Hi ", "Maybe ", "I've "))
    assert "Pruitt met the train." in out


def test_a_word_the_film_writes_in_lower_case_is_no_name_where_a_claim_opens_with_it() -> None:
    said = """[E1] 00:01:00-00:01:30 (said):
    I've seen Pop Ledger at the station with Mr. Pruitt."""
    claim = "Waiting at the inn, Tom Jones met the train."
    film_wide = foils(claim, said, common={"waiting", "met"})
    assert film_wide and all(v.startswith("Waiting at the inn, ") for v in film_wide)  # only Tom Jones is challenged
    # a participle opening a phrase is no name even where the film never writes it in lower case ...
    assert foils(claim, said) == film_wide
    assert foils("Questioned near the station, Pruitt said no.", said) == []
    # ... while a name that looks like one, and that the evidence writes as a name, is still one
    assert specifics("Mildred at the inn met Tom.", participle_opening("Mildred at the inn met Tom.", {"Mildred"})) == [
        ("name", "Mildred"), ("name", "Tom")]
    assert participle_opening("Mildred at the inn met Tom.", set()) == {"mildred"}


def test_names_part_at_punctuation_and_sound_descriptions_in_capitals_are_none() -> None:
    said = """[E1] 00:01:00-00:01:30 (said):
    THEY CONVERSE IN FRENCH
    Back in Rome, Rosa waited for Arnold at the station.
    HE LAUGHS"""
    assert [w for _, w in specifics(said, set())] == ["Rome", "Rosa", "Arnold"]  # a comma parts two names
    assert [w for _, w in specifics("Arnold Boyer met Mr. Pruitt and Dr. Lennex\nRosa", set())] == [
        "Arnold Boyer", "Pruitt", "Dr Lennex", "Rosa"]  # a title joins its name, a line break parts two
    out = foils("Tom met Rosa at the station.", said)
    assert out and not any(w in v for v in out for w in ("FRENCH", "LAUGHS", "CONVERSE"))


def test_a_restated_cloze_keeps_only_the_cause() -> None:
    b = ScriptedBackbone(["He leaves because he missed the train."])
    assert cause_foil(Run(b), "Tom leaves town because the butler hid the letter.", TIMELINE) == (
        "Tom leaves town because he missed the train.")
