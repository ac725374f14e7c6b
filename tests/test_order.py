"""Order questions answered by locating each option (agents/readers/order_locate.py), on the synthetic film:
screen order, story order (its flashback goes first), "right after X", and the undecided case
that goes to the model."""

from __future__ import annotations

import pytest

from moviemem.agents import ask
from moviemem.agents.readers.order_locate import OrderQuestion, parse_order
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.foundation.errors import MovieMemError


@pytest.mark.parametrize("text, want", [
    ("Which of these happens first in the film?", OrderQuestion("first", "screen")),
    ("Which of these events happens earliest in the story?", OrderQuestion("first", "story")),
    ("Which of these happens last?", OrderQuestion("last", "story")),
    ("Which event is shown last?", OrderQuestion("last", "screen")),
    ("What happens right before the fire in the film?", OrderQuestion("before", "screen", "the fire")),
    ("Which of these comes right after Anna finds the scarf?", OrderQuestion("after", "story", "Anna finds the scarf")),
    # a qualifier closing X names the clock and is cut from X; the same words inside X stay part of it
    ("Which of these comes right after Tom tells his story?", OrderQuestion("after", "story", "Tom tells his story")),
    ("What happens right after Tom tells his story in the film?",
     OrderQuestion("after", "screen", "Tom tells his story")),
    ("What happens just before the map is shown?", OrderQuestion("before", "story", "the map is shown")),
    ("Which is shown right after the storm, in story order?", OrderQuestion("after", "story", "the storm")),
    ("When does Tom take the ring?", None),
    ("What does Tom do after the fight?", None),
    ("Which character appears first?", None),
])
def test_order_questions_are_read_from_their_wording(text, want):
    assert parse_order(Question.make(text, ["a", "b"])) == want
    assert parse_order(Question.make(text, kind="open")) is None


def _captions(film):
    caps = sorted(film.captions(), key=lambda c: c.start)
    flashback = next(c for c in caps if "flashback" in c.text.lower())
    plain = [c for c in caps if c.start < flashback.start and "flashback" not in c.text.lower()
             and "earlier" not in c.text.lower()]
    return flashback, plain


def _ask(film, question, options, **kw):
    b = ScriptedBackbone([Reply(text='{"answer": "A"}')])
    return ask(film, question, options, policy="hybrid", backbone=b, **kw), b


def test_screen_and_story_order_from_located_options(synth_film):
    film = synth_film.film
    flashback, plain = _captions(film)
    early, mid = plain[1], plain[len(plain) // 2]
    options = [mid.text, flashback.text, early.text]
    shown, b = _ask(film, "Which of these is shown first in the film?", options)
    assert shown.choice == "C" and shown.calls == 0 and b.calls == []  # no model call
    assert {e.id for e in shown.evidence} == {f"caption:{c.idx}" for c in (mid, flashback, early)}
    assert [e.id for e in shown.evidence if e.cited] == [f"caption:{early.idx}"]
    last, _ = _ask(film, "Which of these is shown last in the film?", options)
    assert last.choice == "B"
    story, _ = _ask(film, "Which of these happens earliest in the story?", options)
    assert story.choice == "B"  # the flashback's events happen years before the rest
    steps = [s for s in story.trace if s.kind == "locate"]
    assert steps and steps[0].data["clock"] == "story" and set(steps[0].data["options"]) == {"A", "B", "C"}
    after, _ = _ask(film, f"Which of these happens right after {early.text.rstrip('.')} in the film?",
                    [flashback.text, mid.text, plain[0].text])
    assert after.choice == "B"


def test_an_undecided_order_goes_to_the_model(synth_film):
    film = synth_film.film
    _, plain = _captions(film)
    same = plain[2].text
    ans, b = _ask(film, "Which of these is shown first in the film?", [same, same.upper(), plain[3].text])
    assert b.calls and ans.calls >= 1  # the first two options are one line: not told apart
    notes = [s.data["text"] for s in ans.trace if s.kind == "note"]
    assert any("not told apart" in n for n in notes)
    off, b2 = _ask(film, "Which of these is shown first in the film?", [plain[3].text, plain[1].text], order="read")
    assert b2.calls and not [s for s in off.trace if s.kind == "locate"]
    with pytest.raises(MovieMemError, match="unknown order reader"):
        _ask(film, "Which of these is shown first?", ["a", "b"], order="guess")


def test_a_claims_order_of_two_events_is_checked_where_the_film_shows_them(synth_film):
    """A claim "A before B" whose events the evidence does not place is settled by their lines in the film."""
    from moviemem.agents.base import Run
    from moviemem.agents.readers.claims import read_claim
    from moviemem.agents.readers.order_locate import claim_order

    film = synth_film.film
    _, plain = _captions(film)
    early, late = plain[1].text.rstrip("."), plain[-1].text.rstrip(".")
    run = Run(ScriptedBackbone([]))
    assert claim_order(run, film, f"{early} before {late}.") is True
    assert claim_order(run, film, f"{late} before {early}.") is False
    assert claim_order(run, film, f"{early} after {late}.") is False
    assert claim_order(run, film, "Nothing here is ordered at all.") is None
    assert [s for s in run.trace if s.kind == "locate"][0].data["agrees"] is True
    # foils: the evidence says nothing, so the film's order decides, with no model call
    false = Question(f"{late} before {early}.", kind="claim")
    b = ScriptedBackbone([])
    verdict = read_claim(Run(b), false, "(nothing found)", "foils", located=lambda: claim_order(Run(b), film, false.text))
    assert verdict.choice == "FALSE" and b.calls == []
    reader = ScriptedBackbone([], capabilities={"logprobs": True})  # hybrid reads claims by foils with such a backbone
    ans = ask(film, f"{late} before {early}.", policy="hybrid", backbone=reader, kind="claim")
    assert ans.choice == "FALSE" and ans.calls == 0
    assert any(e.cited for e in ans.evidence)  # the lines that placed the two events, with no follow-up call
