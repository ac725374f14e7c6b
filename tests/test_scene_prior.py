"""The `scene-prior` retriever: the hybrid gathering re-ranked by the scenes whose summaries match the question."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from moviemem.retrievers.registry import RETRIEVERS, get_retriever
from moviemem.retrievers.scene_prior import scene_ranks
from moviemem.retrievers.types import Question


def test_scenes_whose_summaries_share_the_question_s_rare_words_rank_first() -> None:
    rows = [SimpleNamespace(start=0.0, end=60.0, summary="With Anna. Of money, bank. \"We need the money.\""),
            SimpleNamespace(start=60.0, end=120.0, summary="With Ted. At Simpson. Of steak, oysters. \"A poached egg?\""),
            SimpleNamespace(start=120.0, end=200.0, summary="With Anna, Ted. Of money. \"Pay them back.\"")]
    film = SimpleNamespace(scenes=lambda: rows)
    assert scene_ranks(film, "What does Ted order at Simpson's: oysters or steak?")[0] == (60.0, 120.0)  # type: ignore[arg-type]
    assert scene_ranks(film, "Who sings in the rain?") == []  # type: ignore[arg-type]


def test_scene_prior_lifts_the_lines_of_the_matching_scene(tmp_path: Path) -> None:
    from tests.text_film import text_film_library

    cues = [(5.0 + 4 * i, 7.0 + 4 * i, f"We talk about the money again, line {i}.") for i in range(10)]
    cues += [(300.0 + 4 * i, 302.0 + 4 * i, text) for i, text in enumerate(
        ["The oysters at Simpson's are fine.", "Order the steak, then.", "And the money?", "Oysters and steak it is."])]
    lib = text_film_library(tmp_path, cues, "dinner", "Dinner")
    film = lib.film("dinner")
    assert "scene-prior" in RETRIEVERS.names()
    question = Question("Is there money for the steak at Simpson's?", kind="open")
    ranked = get_retriever("scene-prior").retrieve(film, question)
    base = get_retriever("hybrid").retrieve(film, question)
    assert {e.id for e in ranked} == {e.id for e in base}  # the same evidence, another order
    assert ranked[0].start >= 300.0
