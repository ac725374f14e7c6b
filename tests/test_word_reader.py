"""The option-word reader (agents/readers/letters.py word_probs): short options scored as the first word of
a written answer, not by letter. Scripted backbone; no film, no model."""

from __future__ import annotations

import math

from moviemem.agents.base import Run
from moviemem.agents.readers.letters import option_words, read_letter
from moviemem.agents.types import Question
from moviemem.backbones import Reply, ScriptedBackbone

EVIDENCE = "[E1] 00:01:00-00:01:05 (caption) Anna brings Peter a letter."
WHO = Question("Who brings Peter the letter?", ("Tom", "Elizabeth", "Sarah", "Anna"))


def _lp(**alts: float) -> Reply:
    return Reply(text=max(alts, key=alts.get), logprobs=[{k: math.log(v) for k, v in alts.items()}])


def test_only_short_options_with_distinct_first_words_qualify() -> None:
    assert option_words(WHO) == ["tom", "elizabeth", "sarah", "anna"]
    assert option_words(Question("Who is she?", ("His aunt", "His mother", "His sister", "His teacher"))) is None
    assert option_words(Question("Why?", ("Because he lost the ring at the lighthouse", "Tom", "Sarah", "Anna"))) is None


def test_the_option_most_likely_to_open_the_answer_wins_over_the_letter() -> None:
    # the first token may be a word's start ("Eliz"); a token starting no option or several counts for none
    b = ScriptedBackbone([_lp(**{" Anna": 0.5, " Eliz": 0.2, " Tom": 0.1, "The": 0.1, " S": 0.1})],
                         capabilities={"logprobs": True})
    run = Run(b)
    parsed = read_letter(run, WHO, EVIDENCE, words=True)
    assert parsed.choice == "D" and len(b.calls) == 1
    assert "words of the correct option" in b.calls[0].messages[-1].text and EVIDENCE in b.calls[0].messages[-1].text
    p = next(s for s in run.trace if s.kind == "scores").data["p"]
    assert p["D"] > p["B"] > p["A"] and p["C"] == 0.0


def test_unreadable_words_fall_back_to_letters_and_say_so() -> None:
    b = ScriptedBackbone([_lp(**{"The": 0.6, " I": 0.4}), _lp(A=0.1, B=0.1, C=0.7, D=0.1)],
                         capabilities={"logprobs": True})
    run = Run(b)
    assert read_letter(run, WHO, EVIDENCE, words=True).choice == "C" and len(b.calls) == 2
    assert any("letters instead" in s.data.get("text", "") for s in run.trace if s.kind == "note")
    # without `words` (the default) the letters are read at once
    b = ScriptedBackbone([_lp(A=0.1, B=0.1, C=0.7, D=0.1)], capabilities={"logprobs": True})
    assert read_letter(Run(b), WHO, EVIDENCE).choice == "C" and len(b.calls) == 1
