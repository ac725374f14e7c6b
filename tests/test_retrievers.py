"""Retrievers on the synthetic film: text (vector / full-text / hybrid), frames (CLIP), window,
graph, and the llama-index adapter; filtering by film, kind and time."""

from __future__ import annotations

import pytest

from moviemem.foundation.errors import MovieMemError
from moviemem.retrievers.base import Retriever
from moviemem.retrievers.frames import FrameRetriever
from moviemem.retrievers.text import TextRetriever, rrf
from moviemem.retrievers.types import Evidence
from moviemem.retrievers.window import WindowRetriever, around


@pytest.fixture(scope="module")
def lib_film(synth_film, tmp_path_factory):
    """A writable copy holding the film twice (as 'synth' and 'twin') to check film filtering."""
    root = tmp_path_factory.mktemp("retr")
    lib, film = synth_film.copy_to(root / "lib")
    bundle = root / "twin.tar"
    lib.export(film.film_id, bundle)
    lib.import_bundle(bundle, film_id="twin")
    return lib, film


@pytest.fixture(scope="module")
def film(lib_film):
    return lib_film[1]


def distinctive(film):
    """An utterance whose longest word occurs in no other utterance."""
    utts = film.utterances()
    for u in utts:
        words = sorted({w.strip(".,!?'\"").lower() for w in u.text.split()}, key=len, reverse=True)
        for w in words[:3]:
            if len(w) > 5 and sum(w in o.text.lower() for o in utts) == 1:
                return u, w
    pytest.skip("no distinctive word")


def test_fts_finds_a_keyword_in_the_right_film(film):
    u, word = distinctive(film)
    hits = TextRetriever("fts", ["utterance"]).retrieve(film, f"{word}?!", k=3)
    assert hits[0].id == f"utterance:{u.idx}" and hits[0].film_id == film.film_id
    assert (hits[0].start, hits[0].end, hits[0].text) == (u.start, u.end, u.text)
    assert hits[0].retriever == "text-fts" and hits[0].score > 0
    assert TextRetriever("fts", ["utterance"]).retrieve(film, "zzqxjv", k=3) == []


def test_vector_finds_a_paraphrase_by_meaning(film):
    u = film.utterances()[5]
    hits = TextRetriever("vector", ["utterance"]).retrieve(film, u.text, k=5)
    assert hits[0].id == f"utterance:{u.idx}" and hits[0].score == pytest.approx(1.0, abs=1e-3)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hybrid_fuses_rankings_across_kinds(film):
    u, word = distinctive(film)
    hits = TextRetriever("hybrid").retrieve(film, word, k=10)
    # the line itself, or an event that quotes it, comes first; the line ranks above every hit without the word
    ids = [h.id for h in hits]
    lacking = [i for i, h in enumerate(hits) if word not in h.text.lower()]
    assert word in hits[0].text.lower() and ids.index(f"utterance:{u.idx}") < (lacking or [len(hits)])[0]
    assert {h.kind for h in hits} > {"utterance"} and len({h.id for h in hits}) == len(hits)
    caps = TextRetriever("hybrid", ["caption"]).retrieve(film, film.captions()[2].text, k=4)
    assert caps and {h.kind for h in caps} == {"caption"} and caps[0].id == f"caption:{film.captions()[2].idx}"
    # pooled, kinds are ranked together: one vector ranking and one word ranking of all the kinds' rows
    # (ranked kind by kind, as by default, every kind's best hit ties, however poor)
    kinds, query = ["utterance", "caption"], "Anna holds up something blue"
    by = {mode: [h.id for h in TextRetriever(mode, kinds).retrieve(film, query, k=40)] for mode in ("vector", "fts")}
    fused = sorted(rrf(list(by.values())).items(), key=lambda kv: -kv[1])
    both = TextRetriever("hybrid", kinds, pool=True).retrieve(film, query, k=3)
    assert [(h.id, round(h.score, 9)) for h in both] == [(i, round(s, 9)) for i, s in fused[:3]]
    apart = TextRetriever("hybrid", kinds).retrieve(film, query, k=2)
    assert {h.kind for h in apart} == set(kinds)  # each kind's best hit on top
    assert rrf([["a", "b"], ["b", "c"]])["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_filters_by_film_and_time(lib_film, film):
    lib, _ = lib_film
    twin = lib.film("twin")
    u, word = distinctive(film)
    assert TextRetriever("hybrid").retrieve(twin, word, k=3)[0].film_id == "twin"
    assert all(h.film_id == film.film_id for h in TextRetriever("hybrid").retrieve(film, word, k=20))
    window = TextRetriever("hybrid").retrieve(film, "the letter", k=20, start=60, end=120)
    assert window and all(h.end > 60 and h.start < 120 for h in window)
    cut = film.until(90)
    seen = TextRetriever("hybrid").retrieve(cut, "the letter", k=50)
    assert seen and all(h.end <= 90 for h in seen)
    assert all(h.end <= 90 for h in TextRetriever("fts").retrieve(cut, word, k=5))
    with pytest.raises(MovieMemError, match="empty time range"):
        TextRetriever().retrieve(film, "x", start=50, end=10)
    with pytest.raises(MovieMemError, match="unknown text kind"):
        TextRetriever(kinds=["smell"])
    with pytest.raises(MovieMemError, match="k must be"):
        TextRetriever().retrieve(film, "x", k=0)


def test_cached_vector_search_equals_exact_cosine_in_every_view(film):
    """The in-memory vector ranking must be what exact cosine over the visible rows gives, in a
    window, under an until-cutoff and for a caption kind, with the cache already warm. Rows are
    scored on int8 codes (memory/vector_pack.py): scores agree with exact cosine within 2e-3, and
    each rank holds a row as similar as the exact ranking's row at that rank, within that error."""
    import numpy as np

    from moviemem.retrievers.text import embed_query

    query = "someone reads a letter by the window"
    q = embed_query("minilm", query)
    for view, rows in ((film, film.utterances()), (film.window(40, 100), film.window(40, 100).utterances()),
                       (film.until(75), film.until(75).utterances())):
        hits = TextRetriever("vector", ["utterance"], candidates=5).retrieve(view, query, k=5)
        exact = {f"utterance:{r.idx}": float(np.dot(r.vector, q) / np.linalg.norm(r.vector) / np.linalg.norm(q))
                 for r in rows}
        best = sorted(exact.values(), reverse=True)[:5]
        assert len(hits) == len(best) and {h.id for h in hits} <= set(exact)
        assert [exact[h.id] for h in hits] == pytest.approx(best, abs=2e-3)
        assert [h.score for h in hits] == pytest.approx([exact[h.id] for h in hits], abs=2e-3)
    kinds = {c.kind for c in film.captions()}
    for kind in kinds:
        hits = TextRetriever("vector", ["caption"], caption_kinds=[kind]).retrieve(film, query, k=50)
        assert hits and {h.id for h in hits} == {f"caption:{c.idx}" for c in film.captions() if c.kind == kind}


def test_a_rerun_stage_is_never_served_from_the_vector_cache(synth_film, tmp_path):
    from events_rows import add_truth_events

    lib, f = synth_film.copy_to(tmp_path / "lib")
    truth = synth_film.truth
    add_truth_events(lib, f.film_id, truth)
    f = lib.film(f.film_id)
    first = TextRetriever("vector", ["event"]).retrieve(f, truth["events"][0]["description"], k=3)
    truth2 = {**truth, "events": [{**e, "description": "A dog barks at a passing train."} for e in truth["events"][:1]],
              "relations": []}
    add_truth_events(lib, f.film_id, truth2)  # a new finished run of the events stage replaces the old one
    again = TextRetriever("vector", ["event"]).retrieve(lib.film(f.film_id), truth["events"][0]["description"], k=3)
    assert len(first) == 3 and len(again) == 1 and again[0].text == "A dog barks at a passing train."


def test_vector_cache_is_bounded_by_bytes_and_still_answers_when_off(lib_film, film, monkeypatch):
    """The cache holds films up to its byte budget (least recently used go first); with a budget of
    0 nothing is kept and every query reads the rows again, with the same ranking."""
    from moviemem.memory import search as text

    lib, _ = lib_film
    query = "someone reads a letter by the window"
    retriever = TextRetriever("vector", ["utterance"])
    monkeypatch.setattr(text, "_vec_cache", type(text._vec_cache)())
    monkeypatch.setattr(text, "_vec_bytes", 0)
    expected = [h.id for h in retriever.retrieve(film, query, k=5)]
    one = next(iter(text._vec_cache.values())).nbytes
    assert one > 0 and text._vec_bytes == one
    monkeypatch.setenv("MOVIEMEM_VECTOR_CACHE_MB", "0")
    monkeypatch.setattr(text, "_vec_cache", type(text._vec_cache)())
    monkeypatch.setattr(text, "_vec_bytes", 0)
    assert [h.id for h in retriever.retrieve(film, query, k=5)] == expected
    assert not text._vec_cache and text._vec_bytes == 0
    monkeypatch.setattr(text, "vector_cache_budget", lambda: one)  # room for one film's utterances
    retriever.retrieve(film, query, k=5)
    retriever.retrieve(lib.film("twin"), query, k=5)
    assert [key[2] for key in text._vec_cache] == [lib.film("twin").run_filter("utterances")]
    assert text._vec_bytes <= one


def test_rows_added_after_indexing_are_found(synth_film, tmp_path):
    lib, film = synth_film.copy_to(tmp_path / "lib")
    u, word = distinctive(film)
    assert TextRetriever("fts", ["utterance"]).retrieve(film, word, k=1)[0].film_id == film.film_id
    bundle = tmp_path / "late.tar"
    lib.export(film.film_id, bundle)
    late = lib.import_bundle(bundle, film_id="late")
    hits = TextRetriever("fts", ["utterance"]).retrieve(late, word, k=1)
    assert hits and hits[0].film_id == "late" and hits[0].id == f"utterance:{u.idx}"


def test_frame_retrieval_within_a_pool(film):
    hits = FrameRetriever(pool=64).retrieve(film, "a house at night", k=5)
    pool = {f.frame_idx: f for f in film.frames(pool=64)}
    assert len(hits) == 5 and all(int(h.id.split(":")[1]) in pool for h in hits)
    assert all(h.kind == "frame" and h.frame and h.frame.endswith(".jpg") and h.start == h.end for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    again = FrameRetriever(pool=64, exclude={int(h.id.split(":")[1]) for h in hits}).retrieve(film, "a house at night", k=5)
    assert not {h.id for h in hits} & {h.id for h in again}
    late = FrameRetriever().retrieve(film.until(30), "a house", k=50)
    assert late and all(h.start <= 30 for h in late)


def test_window_retrieval(film):
    rows = WindowRetriever().retrieve(film, "", k=100, start=30, end=60)
    assert rows and all(r.end > 30 and r.start < 60 for r in rows)
    assert {r.kind for r in rows} <= {"utterance", "caption", "onscreen"}
    near = around(film, 45.0, kinds=("caption",), k=1)
    assert near[0].start <= 45.0 <= near[0].end or abs(near[0].start - 45) < 15


def test_base_class_contract():
    class Fixed(Retriever):
        name = "fixed"

        def _retrieve(self, film, query, k):
            return [Evidence("caption", "f", float(i), float(i) + 1, str(i), score=i) for i in range(10)]

    class FakeFilm:
        def window(self, t0, t1):
            return self

    out = Fixed().retrieve(FakeFilm(), "q", k=3)
    assert [e.score for e in out] == [9, 8, 7] and all(e.retriever == "fixed" for e in out)


def test_llama_index_adapter_in_a_query_engine(film):
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from moviemem.retrievers.llama_index import MovieMemRetriever

    u, word = distinctive(film)
    retriever = MovieMemRetriever(film, TextRetriever("hybrid", ["utterance", "caption"]), k=4)
    nodes = retriever.retrieve(word)
    assert nodes[0].node.metadata["start"] == u.start and nodes[0].node.metadata["end"] == u.end
    assert nodes[0].node.get_content() == u.text and nodes[0].score > 0
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
    response = engine.query(word)
    assert response.source_nodes and response.source_nodes[0].node.metadata["kind"] == "utterance"
    assert isinstance(str(response), str) and str(response)


def test_graph_retrieval_follows_causes(synth_film, tmp_path):
    from events_rows import add_truth_events

    from moviemem.retrievers.graph import GraphRetriever

    lib, film = synth_film.copy_to(tmp_path / "lib")
    truth = synth_film.truth
    add_truth_events(lib, film.film_id, truth)
    film = lib.film(film.film_id)
    target = truth["events"][1]  # reading the letter: caused by the letter being brought
    causes = {r["src"] for r in truth["relations"] if r["dst"] == target["id"] and r["type"] == "causal"}
    hits = GraphRetriever(hops=1, types=["causal"], seeds=1).retrieve(film, target["description"], k=9)
    events = [h for h in hits if h.kind == "event"]
    assert events[0].id == f"event:{target['id']}" and events[0].text == target["description"]
    assert causes <= {h.id.split(":", 1)[1] for h in events}
    assert all(h.score < events[0].score for h in events[1:])
    links = [h for h in hits if h.kind == "relation"]
    assert any(h.text == f"{c} causes {target['id']}" for c in causes for h in links)
    assert all(h.retriever == "graph" for h in hits)
    early = GraphRetriever(hops=2).retrieve(film.until(40), target["description"], k=20)
    assert early and all(h.end <= 40 for h in early)


def test_graph_retrieval_is_the_same_in_every_process(synth_film, tmp_path):
    """Node sets iterate in hash order, which changes per process; ties must still come out in one
    order, or a rerun's prompts differ and the replay cache cannot answer them."""
    import json
    import os
    import subprocess
    import sys

    from events_rows import add_truth_events

    lib, f = synth_film.copy_to(tmp_path / "lib")
    add_truth_events(lib, f.film_id, synth_film.truth)
    script = ("import sys, json; from moviemem import Library; from moviemem.retrievers.graph import GraphRetriever\n"
              "f = Library(sys.argv[1]).film(sys.argv[2])\n"
              "print(json.dumps([[e.id for e in GraphRetriever().retrieve(f, q, k=6)] for q in sys.argv[3:]]))")
    queries = ["Which of these happens first in the film?", "Why is the tin box empty?", "Who opens the letter?"]
    outs = {subprocess.run([sys.executable, "-c", script, str(lib.path), f.film_id, *queries], check=True,
                           capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1 and all(ids for ids in json.loads(outs.pop()))
