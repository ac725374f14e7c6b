"""Search packs (memory/vector_pack.py): a film's first query in a process reads small files beside
its media instead of LanceDB, ranks as later queries do, and never serves a stale or broken pack."""

from __future__ import annotations

import logging
import shutil
import tarfile

import numpy as np
import pytest

from moviemem.memory import search, vector_pack
from moviemem.retrievers.text import TextRetriever

QUERY = "someone reads a letter by the window"


def test_int8_codes_keep_cosine_within_two_thousandths() -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((500, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    codes = vector_pack.quantize(rows)
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    unit = vector_pack.unit_rows(codes)
    assert np.allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    assert np.abs(unit @ q - rows @ q).max() < 2e-3
    assert vector_pack.quantize(np.zeros((2, 4), dtype=np.float32)).tolist() == [[0] * 4] * 2  # a zero row stays zero
    assert vector_pack.unit_rows(np.zeros((0, 4), dtype=np.int8)).shape == (0, 4)


@pytest.fixture
def fresh_cache(monkeypatch):
    """An empty vector cache, as in a new process."""
    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())
    monkeypatch.setattr(search, "_vec_bytes", 0)


def _packs(film, table: str = "*") -> list:
    return sorted((film.store.media_dir(film.film_id) / vector_pack.FOLDER).glob(f"{table}-*.arrow"))


def test_first_query_writes_packs_and_the_next_process_reads_them_without_lancedb(synth_film, tmp_path, monkeypatch,
                                                                                  fresh_cache) -> None:
    lib, film = synth_film.copy_to(tmp_path / "lib")
    shutil.rmtree(film.store.media_dir(film.film_id) / vector_pack.FOLDER, ignore_errors=True)  # no packs yet
    retriever = TextRetriever("hybrid", ["utterance", "caption"])
    first = [(h.id, h.score) for h in retriever.retrieve(film, QUERY, k=8)]
    assert [p.name.split("-")[0] for p in _packs(film)] == ["captions", "utterances"]

    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())  # a new process: nothing cached

    def no_lancedb(*_a, **_k):
        raise AssertionError("the rows were read from LanceDB although the film has packs")

    monkeypatch.setattr(search, "_read_rows", no_lancedb)
    again = [(h.id, h.score) for h in retriever.retrieve(lib.film(film.film_id), QUERY, k=8)]
    assert again == first  # same rows, same order, same scores as the query that read LanceDB


def test_broken_pack_is_reported_and_rewritten(synth_film, tmp_path, caplog, fresh_cache, monkeypatch) -> None:
    lib, film = synth_film.copy_to(tmp_path / "lib")
    retriever = TextRetriever("vector", ["utterance"])
    expected = [h.id for h in retriever.retrieve(film, QUERY, k=5)]
    (pack,) = _packs(film, "utterances")
    pack.write_bytes(b"not an arrow file")
    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())
    with caplog.at_level(logging.WARNING, logger="moviemem.memory.vector_pack"):
        assert [h.id for h in retriever.retrieve(lib.film(film.film_id), QUERY, k=5)] == expected
    assert "unreadable" in caplog.text and vector_pack.read(pack, search.TEXT_TABLES["utterances"].columns) is not None  # rewritten


def test_a_rerun_stage_gets_a_new_pack_and_the_old_one_goes(synth_film, tmp_path, fresh_cache, monkeypatch) -> None:
    from events_rows import add_truth_events

    lib, film = synth_film.copy_to(tmp_path / "lib")
    truth = synth_film.truth
    add_truth_events(lib, film.film_id, truth)
    TextRetriever("vector", ["event"]).retrieve(lib.film(film.film_id), QUERY, k=3)
    (old,) = _packs(film, "events")
    add_truth_events(lib, film.film_id, {**truth, "relations": [],
                                         "events": [{**truth["events"][0], "description": "A dog barks at a train."}]})
    monkeypatch.setattr(search, "_vec_cache", type(search._vec_cache)())
    hits = TextRetriever("vector", ["event"]).retrieve(lib.film(film.film_id), QUERY, k=3)
    assert [h.text for h in hits] == ["A dog barks at a train."]
    (new,) = _packs(film, "events")
    assert new != old and not old.exists()


def test_packs_are_not_exported(synth_film, tmp_path, fresh_cache) -> None:
    lib, film = synth_film.copy_to(tmp_path / "lib")
    TextRetriever("vector", ["utterance"]).retrieve(film, QUERY, k=3)
    assert _packs(film)
    lib.export(film.film_id, tmp_path / "film.tar")
    with tarfile.open(tmp_path / "film.tar") as tar:
        assert not [n for n in tar.getnames() if f"/{vector_pack.FOLDER}/" in n]


def test_an_ingest_writes_the_packs_so_even_the_first_query_reads_no_lancedb(tmp_path, monkeypatch, fresh_cache) -> None:
    from moviemem import Library

    srt = tmp_path / "film.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nSomeone reads a letter by the window.\n\n"
                   "2\n00:01:10,000 --> 00:01:12,500\nThe letter is hidden in the desk.\n")
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(srt, film_id="letter")
    assert {p.name.split("-")[0] for p in _packs(film)} >= {"utterances", "passages", "events"}

    def no_lancedb(*_a, **_k):
        raise AssertionError("the first query read LanceDB although the ingest wrote packs")

    monkeypatch.setattr(search, "_read_rows", no_lancedb)
    hits = TextRetriever("vector", ["utterance"]).retrieve(lib.film("letter"), QUERY, k=1)
    assert [h.id for h in hits] == ["utterance:0"]
    assert search.write_packs(film.store, "letter") == 0  # nothing left to write


def test_text_vectors_are_stored_as_float16_and_older_float32_tables_keep_their_type(tmp_path) -> None:
    """float16 storage halves the text vectors; search reads them as int8 codes, which come out the
    same to within one step, so no ranking moves by more than the codes' own error."""
    import pyarrow as pa

    from moviemem.memory.schema import ClipRow, UtteranceRow, arrow_schema
    from moviemem.memory.store import MemoryStore

    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((64, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = [UtteranceRow(film_id="f", run_id="r", idx=i, start=float(i), end=i + 1.0, text=f"line {i}", vector=v.tolist())
            for i, v in enumerate(vecs)]
    store = MemoryStore(tmp_path / "new")
    store.append(rows)
    data = store.query("utterances")
    assert data.schema.field("vector").type == pa.list_(pa.float16(), 384)
    stored = np.asarray(data.column("vector").to_pylist(), dtype=np.float32)
    assert np.abs(vector_pack.quantize(stored).astype(int) - vector_pack.quantize(vecs).astype(int)).max() <= 1
    q = vecs[0] + 0.5 * vecs[1]
    exact, coded = vecs @ q / np.linalg.norm(q), vector_pack.unit_rows(vector_pack.quantize(stored)) @ q / np.linalg.norm(q)
    assert np.abs(exact - coded).max() < 2e-3
    store.append([ClipRow(film_id="f", run_id="r", frame_idx=0, t=0.0, model="m", vector=[0.1] * 8)])
    assert store.query("clip").schema.field("vector").type == pa.list_(pa.float32(), 8)  # image vectors stay float32

    old = MemoryStore(tmp_path / "old")  # a library whose table was made when text vectors were float32
    old.db.create_table("utterances", schema=arrow_schema(UtteranceRow, 384, pa.float32()))
    old.append(rows)
    kept = old.query("utterances")
    assert kept.schema.field("vector").type == pa.list_(pa.float32(), 384)
    assert np.array_equal(np.asarray(kept.column("vector").to_pylist(), dtype=np.float32), vecs)
