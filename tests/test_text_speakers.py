"""Who speaks a text film's lines: each attribution rule on a small exchange, its reason and confidence,
and lines the text does not settle left unattributed."""

from __future__ import annotations

from moviemem.characters.attribution import CONFIDENCE, attribute
from moviemem.characters.names import Character, Line

CAST = [Character("a", "Ceddie", ["Ceddie", "Cedric"]), Character("b", "Mrs. Errol", ["Mrs. Errol", "Dearest"]),
        Character("c", "Hobbs", ["Mr. Hobbs"])]


def _said(texts: list[str | tuple[str, str]], *, step: float = 2.0, dash: set[int] = frozenset()) -> dict[int, tuple[str, str]]:
    """Lines `step` s apart (1.5 s long); a line in `dash` starts where the one before ends (a split cue)."""
    lines, t = [], 0.0
    for i, item in enumerate(texts):
        text, tag = (item, "") if isinstance(item, str) else item
        start = lines[-1].end if i in dash else t
        lines.append(Line(i, start, start + 1.5, text, tag, utt=100 + i))
        t = start + step
    return {i: (s.char_id, s.reason) for i, s in attribute(lines, CAST).items()}


def test_a_name_prefix_tag_names_the_speaker() -> None:
    assert _said([("I call her Dearest.", "Ceddie")]) == {0: ("a", "tag")}


def test_a_self_introduction_names_the_speaker() -> None:
    assert _said(["Yes, I'm Mrs. Errol."]) == {0: ("b", "self")}


def test_the_answer_to_a_dashed_call_is_the_called_one_s() -> None:
    said = _said(["Mr. Hobbs, I believe?", "Yes, that's me."], dash={1})
    assert said[1] == ("c", "dash-reply")


def test_the_reply_to_a_call_is_the_called_one_s_and_the_call_is_not() -> None:
    said = _said(["Can I go now, Dearest?", "Yes, only do be careful."])
    assert said[1] == ("b", "question-reply") and said.get(0, ("?",))[0] != "b"
    assert _said(["Thanks for the ride, Mr. Hobbs.", "It was nothing."])[1] == ("c", "vocative-reply")


def test_a_call_followed_by_more_words_of_the_same_speaker_gives_no_reply() -> None:
    # a call at the start of a statement is often followed by the caller's next sentence
    assert 1 not in _said(["Oh, Dearest... Look! Look!", "Mary's brother has made it for me."])
    # a greeting is as often followed by more of the greeter's words
    assert 1 not in _said(["Oh, good evening, Mr. Hobbs.", "So you came home just in time, eh?"])


def test_the_line_a_reply_answers_by_name_is_the_named_one_s() -> None:
    said = _said(["Here's to your health. Many happy birthdays!", "Thank you very much, Mr. Hobbs."])
    assert said[0] == ("c", "called-back")
    greet = _said(["Good morning, neighbour.", "Good morning, Ceddie, a very good morning."])
    assert greet[0] == ("a", "called-back")
    # a new instruction that calls someone answers nothing
    assert 0 not in _said(["I'll make you a salad.", "Ceddie, run next door for a lettuce."])


def test_a_sentence_carried_over_to_the_next_cue_is_the_same_speaker_s() -> None:
    said = _said(["Can I go now, Mr. Hobbs?", "I've got no use for earls going around as if they was",
                  "lords of creation, wearing their coronets."], step=1.7)
    assert said[1] == ("c", "question-reply") and said[2] == ("c", "continues")


def test_in_a_two_person_exchange_who_calls_one_is_the_other() -> None:
    said = _said(["Dearest!", "All right, Ceddie.", "See, Dearest, you're Maid Marian.", "Help me, Robin Hood!"],
                 dash={1})
    assert said[0] == ("a", "caller") and said[1] == ("b", "dash-reply") and said[2] == ("a", "vocative-reply")
    # a third person called nearby (a name no character holds): the exchange is no longer two people's
    two = ["Dearest!", "All right, Ceddie.", "Help me, Robin Hood!", "See, Dearest, you're Maid Marian."]
    assert _said(two, dash={1})[3] == ("a", "caller")
    assert 3 not in _said([*two, "Good morning, Mrs. Jones."], dash={1})


def test_turns_alternate_in_a_two_person_exchange_where_the_text_shows_a_turn() -> None:
    said = _said(["Dearest!", "All right, Ceddie.", "Do you like my present?", "It's exactly what I wanted!",
                  "Then I'm glad."], dash={1})
    assert said[2] == ("a", "vocative-reply") and said[3] == ("b", "alternation")
    assert all(r in CONFIDENCE or r == "continues" for _, r in said.values())


def test_lines_the_text_does_not_settle_stay_unattributed() -> None:
    assert _said(["It's raining again.", "The trams have stopped.", "We can't afford it."]) == {}
    # a line that speaks of someone is not theirs, whatever the rules would say
    assert _said(["Is Mr. Hobbs in?", "Mr. Hobbs is out, I'm afraid."]).get(1, ("?",))[0] != "c"
