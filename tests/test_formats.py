"""Benchmark formats: validation errors that name the line, detection, registry and adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem import register
from moviemem.eval import formats as F  # noqa: N812 - short alias used throughout the tests
from moviemem.foundation.errors import MovieMemError


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def mcq(i: int = 1, film: str = "synth", **kw) -> dict:
    row = {"id": f"q{i}", "film_id": film, "question": "Who?", "options": ["Ann", "Bob", "Cy", "Di"], "answer": "B",
           "category": "character"}
    row.update(kw)
    return row


@pytest.fixture(scope="module")
def synth_docs(tmp_path_factory) -> Path:
    """The synthetic film's benchmark files, written without rendering the film."""
    from moviemem.synth import documents, plan

    d = tmp_path_factory.mktemp("synthdocs")
    for name, text in documents(plan(3.0, 7), "synth").items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def test_synth_benchmarks_load_and_detect(synth_docs: Path):
    for name, fmt in (("mcq.jsonl", "mcq"), ("claims.jsonl", "claims"), ("relations.jsonl", "relations")):
        b = F.load_benchmark(synth_docs / name, library={"synth"})
        assert b.format == fmt and len(b) > 5 and b.film_ids() == ["synth"]
    rel = F.load_benchmark(synth_docs / "relations.jsonl")
    assert any(it.in_flashback_subset for it in rel.items)
    assert all(F.item_category(it) == it.label for it in rel.items)


def test_errors_name_the_line(tmp_path: Path):
    p = _write(tmp_path / "b.jsonl", [
        mcq(1),
        mcq(2, film="missing-film"),
        mcq(3, options=["Ann", "", "Cy", "Di"]),
        mcq(4, answer="E"),
        "{not json",
        mcq(1),
        {k: v for k, v in mcq(7).items() if k != "question"},
    ])
    with pytest.raises(MovieMemError) as exc:
        F.load_benchmark(p, "mcq", library={"synth"})
    msg = str(exc.value)
    lines = msg.splitlines()
    assert lines[0].startswith(f"{p}:2: film 'missing-film' is not in the library")
    assert f"{p}:3: " in msg and "option B is missing or empty" in msg
    assert f"{p}:4: " in msg and "bad answer letter 'E'" in msg
    assert f"{p}:5: invalid JSON" in msg
    _write(p, [mcq(1), mcq(1), {k: v for k, v in mcq(7).items() if k != "question"}, mcq(8, film="Bad Id")])
    with pytest.raises(MovieMemError) as exc:
        F.load_benchmark(p, "mcq")
    msg = str(exc.value)
    assert f"{p}:2: duplicate id 'q1' (first on line 1)" in msg
    assert f"{p}:3: missing field 'question'" in msg
    assert f"{p}:4: " in msg and "invalid film id" in msg


def test_too_many_errors_are_summarised(tmp_path: Path):
    p = _write(tmp_path / "b.jsonl", [mcq(i, answer="Z") for i in range(9)])
    with pytest.raises(MovieMemError, match=r"\.\.\. and 4 more"):
        F.load_benchmark(p)


def test_other_formats_validate(tmp_path: Path):
    rows = {
        "claims": {"id": "c1", "film_id": "f", "true_claim": "A is so.", "false_claim": "A is not so."},
        "relations": {"id": "r1", "film_id": "f", "event_a": "x", "event_b": "y", "label": "causal"},
        "localization": {"id": "l1", "film_id": "f", "event": "x", "start": 10, "end": 20, "scene": 2},
        "open": {"id": "o1", "film_id": "f", "question": "Why?", "reference": "Because."},
        "narration": {"id": "n1", "film_id": "f", "start": 1.0, "end": 4.0, "reference": "She runs.", "characters": ["Ann"]},
    }
    for fmt, row in rows.items():
        b = F.load_benchmark(_write(tmp_path / f"{fmt}.jsonl", [row]))
        assert b.format == fmt, fmt
    bad = {**rows["relations"], "label": "sideways"}
    with pytest.raises(MovieMemError, match="bad relation label 'sideways'"):
        F.load_benchmark(_write(tmp_path / "bad.jsonl", [bad]))
    with pytest.raises(MovieMemError, match="end 5.0 is not after its start 10"):
        F.load_benchmark(_write(tmp_path / "bad.jsonl", [{**rows["localization"], "end": 5.0}]))
    with pytest.raises(MovieMemError, match="cannot tell the format"):
        F.load_benchmark(_write(tmp_path / "bad.jsonl", [{"id": "x", "film_id": "f", "what": 1}]))


def test_register_format_and_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(F.FORMATS, "_entries", dict(F.FORMATS._entries))  # registered for this test only

    class Quote(F.Item):
        """Who said this line?"""

        format = "quote"
        line: str
        speaker: str

    register("format", "quote", Quote, keys=["line", "speaker"])
    p = _write(tmp_path / "q.jsonl", [{"id": "1", "film_id": "f", "line": "Hi", "speaker": "Ann", "note": "kept"}])
    b = F.load_benchmark(p)
    assert b.format == "quote" and b.items[0].speaker == "Ann"
    out = F.write_jsonl(b.items, tmp_path / "out.jsonl")
    assert json.loads(out.read_text()) == {"id": "1", "film_id": "f", "line": "Hi", "speaker": "Ann", "note": "kept"}
    assert "quote" in F.formats()


def test_mf2_metadata_csv(tmp_path: Path):
    p = tmp_path / "metadata.csv"
    p.write_text("movie_id,title,claim_true,claim_false,type\n"
                 "12,Some Film,He leaves.,He stays.,event\n"
                 "12,Some Film,She sings.,She dances.,character\n"
                 "7,Other,It rains.,It snows.,\n", encoding="utf-8")
    b = F.load_benchmark(p)
    assert b.format == "claims" and b.source == "mf2" and len(b) == 3
    assert [it.film_id for it in b.items] == ["mf2-12", "mf2-12", "mf2-7"]  # as `import-collection mf2` names them
    assert b.items[1].true_claim == "She sings." and b.items[1].category == "character"
    with pytest.raises(MovieMemError, match=r"metadata.csv:4: film 'mf2-7' is not in the library"):
        F.load_benchmark(p, library={"mf2-12"})
    p.write_text("id,statement\n1,x\n", encoding="utf-8")
    with pytest.raises(MovieMemError, match="no true claim, false claim column"):
        F.load_benchmark(p)


def test_moviecore_json(tmp_path: Path):
    p = tmp_path / "moviecore.json"
    p.write_text(json.dumps({
        "Clip_01.mp4": [{"question": "Why does he run?", "answer": "He is late.", "classification": "causal"},
                        {"question": "How?", "answer": "x", "enhanced_answer": [{"content": "Better answer."}]}],
        "clip_02.mp4": [{"question": "", "answer": "y"}],
    }), encoding="utf-8")
    with pytest.raises(MovieMemError, match=r"clip_02\.mp4\[0\]: question"):
        F.load_benchmark(p)
    data = json.loads(p.read_text())
    del data["clip_02.mp4"]
    p.write_text(json.dumps(data))
    b = F.load_benchmark(p)
    assert b.format == "open" and [it.film_id for it in b.items] == ["clip_01", "clip_01"]
    assert b.items[0].category == "causal" and b.items[1].reference == "Better answer."


def test_movie101_narration(tmp_path: Path):
    root = tmp_path / "m101"
    (root / "narration").mkdir(parents=True)
    (root / "narration" / "123.txt").write_text(
        "0:3:33|0:3:40|[Cheng Yong] drove a van.\n0:4:4|0:4:20|[Cheng Yong] feeds [Dad].\n", encoding="utf-8")
    b = F.load_benchmark(root)
    assert b.format == "narration" and len(b) == 2
    it = b.items[1]
    assert it.film_id == "movie101-123" and it.start == 244 and it.end == 260
    assert it.characters == ["Cheng Yong", "Dad"] and it.reference == "Cheng Yong feeds Dad."
    (root / "narration" / "123.txt").write_text("0:3:33|oops|text\n", encoding="utf-8")
    with pytest.raises(MovieMemError, match=r"123\.txt:1: bad time 'oops'"):
        F.load_benchmark(root)
