"""Word search in process (memory/bm25.py): LanceDB's analysis and scores on one film's rows, and a
film's ranking that does not depend on the other films of its library."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.index import FTS

from moviemem import Library
from moviemem.memory.bm25 import Bm25Index, analyze
from moviemem.retrievers.text import TextRetriever

LINES = ["Where is the money?", "You gotta have money to make money. Capital!", "Don't forget the money!",
         "Leave me alone!", "Is there anything private in this house?", "Why...", "Why not?", "Yes.",
         "What does he look like?", "The café's owner said: naïve Zoë left at 10 o'clock.",
         "I'm leaving the house tonight, because the ship sails at dawn.", "Ships, shipping and shipped goods.",
         "Supercalifragilisticexpialidociousandthensomeandmorewords is long", "Oh!", "Running, ran, runs, runner."]
VOCAB = ["the", "a", "why", "because", "before", "after", "does", "doing", "having", "being", "don", "t", "s",
         "can", "very", "would", "ourselves", "house", "houses", "shipping", "café", "naïve", "zoë", "o", "10",
         "running", "runner", "was", "were", "into", "once", "only", "further", "yours", "theirs", "won", "ma"]


@pytest.fixture(scope="module")
def lance(tmp_path_factory: pytest.TempPathFactory):
    db = lancedb.connect(str(tmp_path_factory.mktemp("fts")))

    def table(name: str, texts: list[str]):
        tbl = db.create_table(name, pa.table({"id": list(range(len(texts))), "text": texts}))
        tbl.create_index("text", config=FTS(with_position=False, stem=True, remove_stop_words=True))
        return tbl
    return table


def test_analysis_keeps_and_drops_the_words_lancedb_does(lance) -> None:
    tbl = lance("vocab", [f"qqq{i} {w}" for i, w in enumerate(VOCAB)])
    for i, word in enumerate(VOCAB):
        found = any(r["id"] == i for r in tbl.search(word, query_type="fts").limit(100).select(["id"]).to_list())
        assert found == bool(analyze(word)), word


def test_scores_equal_lancedb_on_one_films_rows(lance) -> None:
    tbl = lance("lines", LINES)
    index = Bm25Index(LINES)
    everything = np.ones(len(LINES), dtype=bool)
    for query in ["money", "money money", "why does he leave the house", "ship leaving", "Zoe cafe naive", "run"]:
        theirs = {r["id"]: r["_score"] for r in tbl.search(query, query_type="fts").limit(50).select(["id", "_score"]).to_list()}
        ours = dict(index.top(query, everything, 50))
        assert set(ours) == set(theirs), query
        assert all(ours[i] == pytest.approx(theirs[i], rel=1e-5) for i in theirs), query
    assert index.top("money", everything, 2)[0][0] == 0  # ties broken by row; the shortest money line first
    mask = np.array([i != 0 for i in range(len(LINES))])
    assert 0 not in dict(index.top("money", mask, 50))  # rows the view hides are never returned
    assert index.top("the of and", everything, 5) == [] and index.top("money", everything, 0) == []


SRT_A = "".join(f"{n}\n00:{n:02d}:00,000 --> 00:{n:02d}:03,000\n{text}\n\n" for n, text in enumerate(
    ["The harbour master counts the ships.", "Nobody leaves the harbour tonight.", "The money is hidden in the lighthouse.",
     "Why did the captain lie about the cargo?", "Because the cargo was stolen."], 1))
SRT_B = "".join(f"{n}\n00:{n:02d}:00,000 --> 00:{n:02d}:03,000\nThe lighthouse, the lighthouse, always the lighthouse {n}.\n\n"
                for n in range(1, 40))


def test_a_films_ranking_does_not_depend_on_the_other_films(tmp_path: Path) -> None:
    (tmp_path / "a.srt").write_text(SRT_A)
    (tmp_path / "b.srt").write_text(SRT_B)
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(tmp_path / "a.srt", film_id="harbour")
    query = "where is the money in the lighthouse"
    before = [(h.id, round(h.score, 6)) for h in TextRetriever("fts", ["utterance"]).retrieve(film, query, k=5)]
    lib.ingest_text(tmp_path / "b.srt", film_id="lighthouse")  # a film that makes "lighthouse" a common word
    again = Library(tmp_path / "lib").film("harbour")
    after = [(h.id, round(h.score, 6)) for h in TextRetriever("fts", ["utterance"]).retrieve(again, query, k=5)]
    assert before == after and before[0][0] == "utterance:2"


def test_a_row_without_a_vector_is_found_by_its_words_only(tmp_path: Path) -> None:
    """Rows are read whether or not they carry a vector: word search finds them, vector search skips them."""
    from moviemem.memory import search
    from moviemem.memory.schema import UtteranceRow
    from moviemem.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "lib")
    unit = [1.0] + [0.0] * 7
    store.append([UtteranceRow(film_id="f", run_id="r1", idx=0, start=0.0, end=1.0, text="The lighthouse keeper.", vector=unit),
                  UtteranceRow(film_id="f", run_id="r1", idx=1, start=2.0, end=3.0, text="A storm at the lighthouse.", vector=None)],
                 dim=8)
    src = search.TEXT_TABLES["utterances"]
    assert search.ensure_indexes(store, src)
    rows, codes = search._loop().run(search._read_rows(search._async_table(store, "utterances"), src, "film_id = 'f' AND run_id = 'r1'"))
    film_rows = search._film_rows(rows, codes, src)
    everything = np.ones(2, dtype=bool)
    assert [r["idx"] for r, _ in film_rows.search_words("storm lighthouse", everything, 5)] == [1, 0]
    assert [r["idx"] for r, _ in film_rows.search(np.array(unit, dtype=np.float32), everything, 5)] == [0]


def test_a_films_text_split_at_once_gives_each_texts_own_terms() -> None:
    """The index splits all texts in one operation; rows must keep exactly their own terms, for ASCII,
    accented and other scripts, empty texts and a text that holds the row mark itself."""
    texts = [*LINES, "", "Zoë\x00café and the caféteria", "日本語 テスト money", "İstanbul…naïve—ﬁne", "x_y money_money",
             "", "Ships…ships, SHIPS"]
    for rows in (texts, [t for t in texts if "\x00" not in t], [t for t in texts if t.isascii() and "\x00" not in t], [""], []):
        index = Bm25Index(rows)
        assert index.lengths.tolist() == [len(analyze(t)) for t in rows]
        for term, t in index._vocab.items():
            a, b = index._start[t], index._start[t + 1]
            expected = {i: analyze(text).count(term) for i, text in enumerate(rows) if term in analyze(text)}
            assert dict(zip(index._rows[a:b].tolist(), index._tf[a:b].tolist())) == expected, term
