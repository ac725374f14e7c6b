"""`bench --sample N [--stratify category|film] [--seed S]`: seeded, stratified benchmark samples."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from moviemem import MovieMemError
from moviemem.eval.formats import MCQ, Benchmark, load_benchmark
from moviemem.eval.sample import quotas, sample

DEV = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "dev" / "mf2_dev_mcq.jsonl"


def bench(sizes: dict[str, int]) -> Benchmark:
    """Items grouped by category in file order, as many files are (so the first N are one category)."""
    items = [MCQ(id=f"{c}-{i}", film_id=f"film-{i % 3}", question="Q?", options=["a", "b"], answer="A", category=c)
             for c, n in sizes.items() for i in range(n)]
    return Benchmark("mcq", items)


def test_quotas_are_proportional_and_cover_every_stratum() -> None:
    assert quotas({"a": 60, "b": 30, "c": 10}, 10) == {"a": 6, "b": 3, "c": 1}
    assert quotas({"a": 97, "b": 2, "c": 1}, 10) == {"a": 8, "b": 1, "c": 1}  # c would round to 0
    assert quotas({"a": 97, "b": 2, "c": 1}, 2) == {"a": 2, "b": 0, "c": 0}  # fewer items than strata
    assert sum(quotas({"a": 7, "b": 5, "c": 3}, 11).values()) == 11


def test_stratified_sample_keeps_shares_file_order_and_is_seeded() -> None:
    b = bench({"setting": 60, "motive": 30, "time": 10})
    s = sample(b, 10, stratify="category", seed=3)
    assert Counter(it.category for it in s.items) == {"setting": 6, "motive": 3, "time": 1}
    assert [it.id for it in s.items] == [it.id for it in b.items if it in s.items]  # file order kept
    assert [it.id for it in sample(b, 10, stratify="category", seed=3).items] == [it.id for it in s.items]
    assert [it.id for it in sample(b, 10, stratify="category", seed=4).items] != [it.id for it in s.items]
    assert s.meta["sample"] == {"n": 10, "stratify": "category", "seed": 3, "of": 100}
    plain = sample(b, 10, seed=0)
    assert len(plain.items) == 10 and len({it.category for it in plain.items}) > 1
    by_film = sample(b, 9, stratify="film", seed=0)
    assert Counter(it.film_id for it in by_film.items) == {"film-0": 3, "film-1": 3, "film-2": 3}
    assert len(sample(b, 500).items) == 100


def test_bad_sample_arguments() -> None:
    with pytest.raises(MovieMemError, match="at least 1"):
        sample(bench({"a": 3}), 0)
    with pytest.raises(MovieMemError, match="--stratify takes category or film"):
        sample(bench({"a": 3}), 2, stratify="speaker")


@pytest.mark.skipif(not DEV.exists(), reason="needs ../shared/datasets/dev (the MF² dev questions)")
def test_sample_of_the_dev_questions_spans_their_categories() -> None:
    b = load_benchmark(DEV)
    cats = Counter(it.category for it in b.items)
    s = sample(b, len(cats), stratify="category", seed=0)
    assert Counter(it.category for it in s.items) == {c: 1 for c in cats}


def test_cli_checks_sample_options(cli, tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text('{"id": "1", "film_id": "x", "question": "Q?", "options": ["a", "b"], "answer": "A"}\n')
    res = cli("bench", str(f), "--sample", "1", "--limit", "1")
    assert res.code == 2 and "give one" in res.err
    for args in (("--stratify", "category"), ("--seed", "5")):  # they would be ignored without a sample
        res = cli("bench", str(f), *args)
        assert res.code == 2 and "--stratify and --seed need --sample" in res.err
