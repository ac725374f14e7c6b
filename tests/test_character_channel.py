"""Hybrid's characters channel for who-questions: registry entries and the named characters' lines,
read through the film view (so until(t) hides what comes later), skipped with a note without a registry.

Each test builds its own small text film; nothing reads ../shared."""

from __future__ import annotations

import pytest

from moviemem import Library
from moviemem.agents import ask
from moviemem.agents.types import Question
from moviemem.backbones import ScriptedBackbone
from moviemem.retrievers.characters import CharacterRetriever
from moviemem.retrievers.gather import Routed
from moviemem.retrievers.settings import GatherSettings

SRT = """1
00:00:01,000 --> 00:00:04,000
- Who are you?
- I'm Sara.

2
00:00:05,000 --> 00:00:08,000
CEDRIC: I found the brass key under the stairs.

3
00:00:09,000 --> 00:00:11,000
Thank you, Cedric.

4
00:00:12,000 --> 00:00:14,000
CEDRIC: You're welcome, Sara.

5
00:00:15,000 --> 00:00:18,000
The weather turned cold that night.

6
00:00:40,000 --> 00:00:43,000
MARTA: The boat to the island leaves at noon.

7
00:00:44,000 --> 00:00:47,000
Wait for me, Marta.
"""
KEY_Q = Question.make("Who found the key under the stairs?", ["Sara", "Cedric", "Marta", "Nobody"])
BOAT_Q = Question.make("Who says when the boat leaves?", ["Sara", "Cedric", "Marta", "Nobody"])
REPLY = '{"answer": "B", "confidence": 3, "evidence": []}'


@pytest.fixture(scope="module")
def films(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("charchan")
    srt = root / "cast.srt"
    srt.write_text(SRT)
    lib = Library(root / "lib")
    with_cast = lib.ingest_text(srt, film_id="cast", title="Cast")
    bare = lib.ingest_text(srt, film_id="bare", title="Bare", stages=["transcript"])  # no characters stage
    return with_cast, bare


def _prompt(b: ScriptedBackbone) -> str:
    return "\n".join(m.text for r in b.calls for m in r.messages)


def _ask(film, q: Question, **settings):
    """Hybrid with a scripted reply; budget_share=0: this tiny film's text would otherwise cap the budget at ~30 tokens."""
    b = ScriptedBackbone([REPLY])
    ans = ask(film, q.text, q.options, policy="hybrid", backbone=b, reader="json", budget_share=0, **settings)
    return ans, _prompt(b), [s.data["text"] for s in ans.trace if s.kind == "note"]


def test_who_question_evidence_holds_the_registry_entry_and_the_characters_lines(films) -> None:
    film, _ = films
    found = CharacterRetriever().retrieve(film, "Who found the key under the stairs? Cedric", k=20)
    cedric = next(e for e in found if e.kind == "character")
    # his two tagged lines, and "Who are you?" given to him by turn alternation (issue 64: a reason and a confidence)
    assert cedric.text.startswith("character Cedric: speaks 3 lines; first 00:00:01, last 00:00:14")
    assert '"I found the brass key under the stairs." (tag)' in cedric.text  # the line that named him
    by_id = {e.id: e for e in found}
    assert by_id["utterance:2"].text == "I found the brass key under the stairs."  # he says it ...
    assert by_id["utterance:2"].score == 3 == max(e.score for e in found)  # ... his name, "key" and "stairs"
    assert "utterance:3" not in by_id  # "Thank you, Cedric." only names him: nothing about the key
    thanks = {e.id: e.text for e in CharacterRetriever().retrieve(film, "Who thanks Cedric? Sara", k=20)}
    assert thanks["utterance:3"] == "Thank you, Cedric."  # a line addressing him, about thanks
    assert thanks["utterance:4"] == "You're welcome, Sara."  # he speaks it, and it names the other character
    assert not any("Marta" in e.text or "boat" in e.text for e in found)  # another character's lines stay out
    assert CharacterRetriever().retrieve(film, "Who found the key? Nobody", k=5) == []  # no name the film uses

    ans, sent, _ = _ask(film, KEY_Q)
    route = next(s for s in ans.trace if s.kind == "route").data
    assert route["type"] == "character" and ["characters", 3] in route["channels"]
    assert any(s.kind == "retrieve" and s.data["retriever"] == "characters" for s in ans.trace)
    assert "(character) character Cedric: speaks 3 lines" in sent
    assert "Cedric: I found the brass key under the stairs." in sent  # transcript lines show their speaker
    assert any(e["id"].startswith("character:") and e["kind"] == "character" for e in ans.to_dict()["evidence"])


def test_the_channel_can_be_turned_off(films) -> None:
    film, _ = films
    assert any(e.kind == "character" for e in Routed(GatherSettings()).retrieve(film, KEY_Q))
    assert not any(e.kind == "character" for e in Routed(GatherSettings(characters=False)).retrieve(film, KEY_Q))
    ans, sent, notes = _ask(film, KEY_Q, characters=False)
    assert "the characters channel is skipped: it is turned off (characters=false)" in notes
    assert "(character)" not in sent and ans.choice == "B"


def test_a_film_without_characters_skips_the_channel_with_a_note(films) -> None:
    _, bare = films
    assert CharacterRetriever.missing(bare) == "no characters in this film's memory (characters stage not run)"
    ans, sent, notes = _ask(bare, KEY_Q)
    assert "the characters channel is skipped: no characters in this film's memory (characters stage not run)" in notes
    assert not any(s.kind == "retrieve" and s.data["retriever"] == "characters" for s in ans.trace)
    assert ans.choice == "B" and "I found the brass key under the stairs." in sent  # the other channels still answer


def test_until_hides_later_characters_their_lines_and_naming_lines(films) -> None:
    film, _ = films
    marta = CharacterRetriever().retrieve(film, BOAT_Q.text + " Marta", k=20)
    assert any(e.kind == "character" and e.text.startswith("character Marta") for e in marta)
    assert "utterance:6" in {e.id for e in marta}  # "MARTA: The boat to the island leaves at noon."

    assert CharacterRetriever().retrieve(film.until(20.0), BOAT_Q.text + " Marta", k=20) == []  # not seen by 20 s
    _, sent, _ = _ask(film, BOAT_Q, until=20.0)
    assert "boat to the island" not in sent and "character Marta" not in sent

    # by 10 s Cedric has spoken one line: his entry counts only it and quotes only the naming line already said
    early = CharacterRetriever().retrieve(film.until(10.0), KEY_Q.text + " Cedric", k=20)
    entry = next(e for e in early if e.kind == "character")
    assert entry.text.startswith("character Cedric: speaks 2 lines; first 00:00:01, last 00:00:08")
    assert "You're welcome" not in entry.text
    assert {e.id for e in early if e.kind != "character"} == {"utterance:2"} and all(e.end <= 10.0 for e in early)
