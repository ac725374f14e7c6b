"""Order questions answered by locating each option (agents/order.py), on the synthetic film:
screen order, story order (its flashback goes first), "right after X", and the undecided case
that goes to the model."""

from __future__ import annotations

import pytest

from moviemem.agents import ask
from moviemem.agents.order import OrderQuestion, parse_order
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.errors import MovieMemError


@pytest.mark.parametrize("text, want", [
    ("Which of these happens first in the film?", OrderQuestion("first", "screen")),
    ("Which of these events happens earliest in the story?", OrderQuestion("first", "story")),
    ("Which of these happens last?", OrderQuestion("last", "story")),
    ("Which event is shown last?", OrderQuestion("last", "screen")),
    ("What happens right before the fire in the film?", OrderQuestion("before", "screen", "the fire")),
    ("Which of these comes right after Anna finds the scarf?", OrderQuestion("after", "story", "Anna finds the scarf")),
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
