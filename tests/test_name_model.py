"""Voices the rules left unnamed, named by a text backbone that must point at a line saying the
name (issue 16 part 3): what is asked, what is kept, and what is refused."""

from __future__ import annotations

import json

from moviemem.backbones import Reply, ScriptedBackbone
from moviemem.characters.name_model import NAME, name_requests, name_voices
from moviemem.characters.names import Character, Line

LINES = [Line(0, 1.0, 2.0, "Go and tell Sara she's wanted.", voice=1),
         Line(1, 3.0, 4.0, "I'm coming, I'm coming.", voice=0),
         Line(2, 5.0, 6.0, "Hurry up, the bus is here.", voice=1),
         Line(3, 60.0, 61.0, "Nobody said a word about Mark.", voice=2),
         Line(4, 62.0, 63.0, "Tom never listens.", voice=1)]
LEXICON = {"Sara", "Tom", "Mark"}


def _chars() -> list[Character]:
    return [Character("v0", "speaker 1", voice=0, lines=[1]), Character("v1", "Tom", ["Tom"], voice=1, lines=[0, 2, 4]),
            Character("v2", "speaker 3", voice=2, lines=[3])]


def _reply(line: str, name: str) -> Reply:
    return Reply(text=json.dumps({"line": line, "name": name}))


def test_each_unnamed_voice_is_asked_about_the_free_names_said_around_it() -> None:
    reqs = name_requests(_chars(), LINES, LEXICON, "The Bus")
    assert [(r.char.char_id, r.candidates) for r in reqs] == [("v0", ["Sara"]), ("v2", ["Mark"])]  # Tom is held
    text = reqs[0].ask.messages[1].text
    assert "[00:00:01] Tom: Go and tell Sara she's wanted." in text and "[00:00:03] THIS VOICE: I'm coming" in text
    assert "Nobody said" not in text and NAME.system == reqs[0].ask.messages[0].text
    # no free name around a voice's lines: nothing to ask
    assert name_requests(_chars(), LINES, {"Tom"}, "The Bus") == []


def test_a_name_is_kept_only_when_the_quoted_shown_line_says_it() -> None:
    chars = _chars()
    b = ScriptedBackbone([_reply("go and tell sara she's wanted", "Sara"), _reply("Nobody said a word.", "Mark")],
                         model_id="m1")
    tally = name_voices(b, chars, LINES, LEXICON, title="The Bus")
    sara, _, third = chars
    assert (sara.name, sara.names, sara.confidence) == ("Sara", ["Sara"], 0.5)
    link = sara.links[-1]
    assert link["rule"] == "model" and link["evidence"] == ["line 0 (model m1): Go and tell Sara she's wanted."]
    # "Nobody said a word." is no line shown whole, but it is part of one: the line found does say Mark ...
    assert third.names == ["Mark"]
    assert tally.named == ["speaker 1 -> Sara", "speaker 3 -> Mark"] and "2 named" in tally.note("m1")


def test_answers_that_do_not_point_at_the_name_change_nothing() -> None:
    for reply, why in [(_reply("Hurry up, the bus is here.", "Sara"), "does not say Sara"),
                       (_reply("Sara is lovely.", "Sara"), "not among those shown"),
                       (_reply("", "unknown"), "unknown")]:
        chars = _chars()
        b = ScriptedBackbone([reply, _reply("", "unknown")])
        tally = name_voices(b, chars, LINES, LEXICON, title="The Bus")
        assert chars[0].names == [] and chars[0].name == "speaker 1", why
        assert why in tally.rejected[0] and tally.named == []


def test_a_reply_outside_the_schema_is_retried_then_counted_unusable() -> None:
    chars = _chars()
    b = ScriptedBackbone([_reply("Go and tell Sara she's wanted.", "Tom")] * 2 + [_reply("", "unknown")])  # Tom: not in the enum
    tally = name_voices(b, chars, LINES, LEXICON, title="The Bus", attempts=2)
    assert tally.failed == 1 and chars[0].names == [] and "1 unusable" in tally.note("x")


def test_the_characters_stage_asks_a_model_only_when_one_is_chosen(tmp_path) -> None:
    from moviemem.foundation.config import get_settings
    from moviemem.ingest.stage import Ctx
    from moviemem.ingest.stages.characters import CharactersStage

    def params(**kw):
        return CharactersStage().params(Ctx(None, get_settings(library=tmp_path, **kw), None, None))  # type: ignore[arg-type]

    plain = params()
    assert "names_backbone" not in plain  # the settings' default backbone is not a choice
    chosen = params(backbone="openai-compatible:http://alice:s3cret@127.0.0.1:9/v1#m")
    assert chosen["names_backbone"] == "openai-compatible:http://***@127.0.0.1:9/v1#m"  # no credential is stored
    assert chosen["prompts"] == [NAME.ref]
    assert {k: v for k, v in chosen.items() if k not in ("names_backbone", "prompts")} == plain


def test_a_long_line_is_found_from_a_good_part_of_it() -> None:
    from moviemem.characters.name_model import _quoted

    line = "Well, Sara, " + "we waited and waited for the bus all morning in the rain, " * 8 + "and then it came."
    assert _quoted(line[:150], line) and _quoted(line, line) and _quoted(f'"{line}."', line)
    assert not _quoted("Well, Sara,", line) and not _quoted("", line)  # too short a part to tell the line by
