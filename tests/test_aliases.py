"""One person, one character: each merge rule (synopsis, dialogue, the user's overrides) on small texts,
and names found however a line spells them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from moviemem import MovieMemError
from moviemem.characters.aliases import dialogue_ties, merge, synopsis_people, synopsis_ties
from moviemem.characters.names import Character, Line, mentions, spelled
from moviemem.characters.overrides import Overrides, apply_overrides, load_overrides, overrides_path, save_overrides


def _names(synopsis: str, dialogue: list[str] | None = None) -> list[list[str]]:
    return [p.names for p in synopsis_people(synopsis, dialogue or [])]


def test_a_rank_is_dropped_and_first_name_and_surname_are_one_person() -> None:
    people = _names("Police placed Detective Sergeant Ted Spencer (John Loder) next door. Later Spencer shows up.")
    assert people == [["Ted Spencer", "Ted", "Spencer", "Mr. Spencer"]]


def test_a_surname_the_synopsis_never_uses_alone_is_not_given() -> None:
    assert _names("Young Cedric Errol (Freddie Bartholomew) goes to England.") == [["Cedric Errol", "Cedric"]]


def test_a_nickname_in_quotes_is_the_person_s() -> None:
    (p,) = _names('Young Cedric "Ceddie" Errol (Freddie Bartholomew) goes to England.')
    assert "Ceddie" in p and "Cedric" in p
    (p,) = _names('Then Cedric "Ceddie" Errol goes to England, with no actor named.')
    assert "Ceddie" in p and "Cedric" in p


def test_whom_he_calls_names_the_kin_phrase_s_person_by_their_title() -> None:
    text = ('Young Cedric "Ceddie" Errol (Freddie Bartholomew) and his widowed mother, whom he calls "Dearest" '
            "(Dolores Costello), live in Brooklyn. Mrs. Errol accompanies her son to England.")
    people = _names(text)
    assert ["Mrs. Errol", "Dearest"] in people
    assert not any("Dearest" in p and "Ceddie" in p for p in people)
    # without "Mrs. Errol" anywhere the mother has no name to hold, and "Dearest" goes to no one
    assert ["Mrs. Errol", "Dearest"] not in _names(text.replace("Mrs. Errol accompanies", "She accompanies"))


def test_his_wife_is_mrs_surname_and_mr_surname_is_him() -> None:
    text = ("A cinema is owned by Karl Verloc (Oskar Homolka). Verloc enters at the back, and his wife "
            "(Sylvia Sidney) comes for him. Mrs. Verloc refunds the money.")
    people = _names(text)
    assert ["Karl Verloc", "Karl", "Verloc", "Mr. Verloc"] in people and ["Mrs. Verloc"] in people


def test_a_surname_two_people_share_ties_no_one() -> None:
    text = "Minna Tipton (Helen Flint) lies. Dick Tipton (Mickey Rooney) sees it. Tipton is a common name."
    people = _names(text)
    assert ["Minna Tipton", "Minna"] in people and ["Dick Tipton", "Dick"] in people


def test_a_name_the_film_spells_another_way() -> None:
    (p,) = _names("A cinema is owned by Karl Verloc (Oskar Homolka).", ["Carl! When did you get home?", "Carl, come."])
    assert "Carl" in p


def test_words_the_texts_write_in_lower_case_are_no_name() -> None:
    (p,) = _names("American Minna Tipton (Helen Flint) insists. The young widow smiles.", [])
    assert p == ["Minna Tipton", "Minna"]


def _chars(*names: tuple[str, ...]) -> list[Character]:
    out = []
    for i, ns in enumerate(names):
        c = Character(f"n{i + 1}", ns[0], list(ns))
        c.links.append({"kind": "name", "value": ns[0], "confidence": 0.0, "evidence": [f"line {i}: {ns[0]}"]})
        out.append(c)
    return out


def test_synopsis_ties_merge_characters_and_keep_their_evidence() -> None:
    people = synopsis_people("Detective Sergeant Ted Spencer (John Loder) waits. Spencer shows up.")
    chars = _chars(("Ted",), ("Spencer",), ("Stevie",))
    moved: dict[str, str] = {}
    merged = merge(chars, synopsis_ties(people), ["Ted!", "Spencer, listen."], moved=moved)
    assert [c.names for c in merged] == [["Ted Spencer", "Ted", "Spencer"], ["Stevie"]]
    assert merged[0].name == "Ted Spencer" and moved == {"n2": "n1"}
    alias = next(lk for lk in merged[0].links if lk["kind"] == "alias")
    assert alias["rule"] == "synopsis" and "Detective Sergeant Ted Spencer" in alias["evidence"][0]
    assert alias["merged"] == ["Spencer"]


def test_a_first_name_and_surname_said_together_in_the_dialogue_merge() -> None:
    lines = [Line(0, 0, 1, "You know, I, Carl Anton Verloc, swear it."), Line(1, 2, 3, "Carl, come here.")]
    ties = dialogue_ties(lines, {"Carl", "Verloc", "Stevie"})
    assert [t.names for t in ties] == [("Carl", "Verloc")] and "line 0" in ties[0].evidence[0]
    merged = merge(_chars(("Verloc", "Mr. Verloc"), ("Carl",)), ties)
    assert [c.names for c in merged] == [["Verloc", "Mr. Verloc", "Carl"]]
    # two first names with one surname (two brothers): no tie; a title before the pair is no first name
    both = [*lines, Line(2, 4, 5, "And Max Verloc too.")]
    assert dialogue_ties(both, {"Carl", "Verloc", "Max"}) == []
    assert dialogue_ties([Line(0, 0, 1, "Mrs. Stevie Verloc")], {"Stevie", "Verloc"}) == []
    assert dialogue_ties([Line(0, 0, 1, "Cedric Errol Lord Fauntleroy.")], {"Errol", "Fauntleroy"}) == []


def test_names_are_found_however_a_line_spells_them() -> None:
    pat = re.compile(spelled("Mr. Verloc"))
    for text in ("I do wish Mr Verloc would come.", "MR. VERLOC", "Mr. Verloc's very kind.", "Is Mr  Verloc in?"):
        assert pat.search(text), text
    assert not pat.search("Mrs Verloc") and not pat.search("Mr Verlocks")
    bare = re.compile(spelled("Verloc"))
    assert bare.search("My dear Verloc.") and bare.search("Verloc's flat")
    assert not bare.search("Please tell Mrs Verloc, miss.") and not bare.search("Mrs. VERLOC")
    chars = _chars(("Mr. Verloc",), ("Mrs. Verloc",))
    lines = [Line(0, 10, 11, "Please tell Mrs Verloc, miss."), Line(1, 20, 21, "Is Mr Verloc in?"),
             Line(2, 30, 31, "mr verloc, lower case, is no name")]
    mentions(chars, lines)
    assert [c.named_in for c in chars] == [[1], [0]]


def test_the_user_splits_a_wrong_merge_and_merges_two_characters(tmp_path: Path) -> None:
    path = overrides_path(tmp_path, "film")
    assert not load_overrides(path)
    ov = Overrides()
    ov.add_split("Dearest")
    ov.add_merge(["Ceddie", "Fauntleroy"])
    save_overrides(path, ov)
    assert json.loads(path.read_text()) == {"merge": [["Ceddie", "Fauntleroy"]], "split": ["Dearest"]}
    chars = _chars(("Mrs. Errol", "Dearest"), ("Ceddie",), ("Fauntleroy",))
    out, missing = apply_overrides(chars, load_overrides(path))
    assert [c.names for c in out] == [["Mrs. Errol"], ["Ceddie", "Fauntleroy"], ["Dearest"]] and missing == []
    assert any(lk.get("rule") == "user" for lk in out[1].links)
    # a later split of a merged name drops the merge; a name no character holds is reported
    ov.add_split("Fauntleroy")
    assert ov.merge == [] and ov.split == ["Dearest", "Fauntleroy"]
    _, missing = apply_overrides(_chars(("Ted",)), Overrides(merge=[["Ted", "Nobody"]]))
    assert missing == ["Nobody"]
    with pytest.raises(MovieMemError, match="two names or more"):
        ov.add_merge(["Ted"])
    path.write_text("[1, 2]")
    with pytest.raises(MovieMemError, match="not a character override file"):
        load_overrides(path)
