"""`bench --plan` with a time (issue 61 item 3): wall time from this machine's measured speeds (or an API
backbone's recorded latencies), each film's first full-context read apart from the reads that reuse it, tokens
read beside tokens billed, and the hook that prices a saved prompt state's restore."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from text_film import srt_text, text_film_library

from moviemem.backbones import Reply, Request, ScriptedBackbone, load, user
from moviemem.backbones.pace import PaceBook
from moviemem.eval.formats import load_benchmark
from moviemem.eval.plan import PlanningBackbone, plan_bench, plan_json, price_restores, shared_prefix
from moviemem.eval.runner import run_bench
from moviemem.foundation.config import get_settings
from moviemem.foundation.errors import MovieMemError

LINES = ["Anna hid the key in the attic.", "Tom searched the cellar all night.", "The inn burned down in winter.",
         "Anna left town on the morning train.", "Tom never found the key."] * 8
CUES = [(float(10 * i), float(10 * i + 4), line) for i, line in enumerate(LINES)]
OPTIONS = ["the attic", "the cellar", "the inn", "the shop"]
ROWS = [{"id": f"{film}-q{i}", "film_id": film, "question": q, "options": OPTIONS, "answer": "A"}
        for film in ("keys", "keys2") for i, q in enumerate(["Where did Anna hide the key?", "Where did Tom search?",
                                                              "What burned down?"])]
JSON_REPLY = '{"answer": "A", "confidence": 2}'


@pytest.fixture(scope="module")
def films(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    root = tmp_path_factory.mktemp("plan-time")
    lib = text_film_library(root, CUES, "keys", "Keys")
    (root / "film2.srt").write_text(srt_text([(a, b, t.replace("Anna", "Bea")) for a, b, t in CUES]))
    lib.ingest_text(root / "film2.srt", film_id="keys2", title="Keys Two")
    bench = root / "keys.jsonl"
    # the films' items interleaved: the runner asks a film's items together, and so does the plan
    bench.write_text("".join(json.dumps(ROWS[i]) + "\n" for i in (0, 3, 1, 4, 2, 5)))
    return lib, bench


def _local(tmp_path: Path, read: float | None = 100.0, write: float | None = 10.0, logprobs: bool = False) -> ScriptedBackbone:
    """A stand-in for a local model: a pace book with the given speeds, as llama.cpp keeps one."""
    b = ScriptedBackbone([], name="fake-local", capabilities={"logprobs": logprobs})
    book = PaceBook(tmp_path / "pace.json")
    if read:
        book.record("k", read=int(read * 10), read_s=10.0, written=0, write_s=0.0)
    if write:
        book.record("k", read=0, read_s=0.0, written=int(write * 10), write_s=10.0)
    b.paces, b.pace_key = book, "k"  # type: ignore[attr-defined]
    return b


def test_a_films_first_full_transcript_read_is_apart_from_the_reads_that_reuse_it(films, tmp_path: Path) -> None:
    lib, path = films
    [row] = plan_bench(load_benchmark(path, library=lib), ["subtitles"], [_local(tmp_path)], lib)
    t = row.tally
    assert [f.film_id for f in row.firsts] == ["keys", "keys2"]  # one first read a film, in the runner's order
    first = row.firsts[0]
    assert first.tokens > 400 and first.prefix_tokens > 0.8 * first.tokens  # the transcript, shared with later calls
    later = row.later()
    assert later["calls"] == 4 and later["tokens_read"] / 4 < 0.15 * first.tokens  # a question each, not the film
    assert t.input_tokens == t.read_tokens + t.reused_tokens and t.read_tokens < 0.5 * t.input_tokens
    # the wall time is what is read at 100 tokens/s and written at 10 tokens/s
    assert t.wall_s == pytest.approx(t.read_tokens / 100 + t.output_tokens / 10)
    assert sum(f.seconds for f in row.firsts) + row.later()["wall_s"] == pytest.approx(t.wall_s, abs=0.1)
    line = plan_json([row])["rows"][0]
    assert line["tokens_billed"] == t.input_tokens and line["tokens_read"] == t.read_tokens
    assert [f["film_id"] for f in line["first_reads"]] == ["keys", "keys2"] and line["wall_s"] is not None
    assert "read 100 tokens/s, write 10.0 tokens/s (measured here)" == line["wall_from"]


def test_an_api_backbone_reads_everything_it_is_billed_for(films, tmp_path: Path) -> None:
    lib, path = films
    [row] = plan_bench(load_benchmark(path, library=lib), ["subtitles"], [ScriptedBackbone([])], lib,
                       cache=tmp_path / "none")
    assert row.tally.read_tokens == row.tally.input_tokens and row.tally.reused_tokens == 0
    assert row.tally.wall_s is None and "never measured here" in row.wall_from


def test_an_api_backbones_time_comes_from_its_recorded_latencies(films, tmp_path: Path) -> None:
    lib, path = films
    bench = load_benchmark(path, library=lib)
    run_bench(bench, ["closed-book"], [ScriptedBackbone([JSON_REPLY], cycle=True)], tmp_path / "run", library=lib,
              cache=tmp_path / "cache")  # its replies recorded in the cache, each with its latency
    [row] = plan_bench(bench, ["subtitles"], [ScriptedBackbone([])], lib, cache=tmp_path / "cache")
    assert row.tally.cached == 0 and row.tally.wall_s is not None and row.tally.wall_s > 0
    # closed-book asks the same question of both films (no title): three distinct requests, three replies recorded
    assert row.wall_from.startswith("mean recorded latency") and "over 3 call(s)" in row.wall_from
    mean = row.speed.latency
    assert row.tally.wall_s == pytest.approx(6 * mean)


def test_a_local_model_never_measured_says_so_and_one_reading_letters_needs_no_writing_speed(films, tmp_path) -> None:
    lib, path = films
    bench = load_benchmark(path, library=lib)
    [never] = plan_bench(bench, ["subtitles"], [_local(tmp_path / "a", read=None, write=None)], lib)
    assert never.tally.wall_s is None and "run `moviemem doctor`" in never.wall_from
    assert plan_json([never])["rows"][0]["wall_s"] is None
    # letters from log-probabilities: one pass over the prompt, nothing written, so the reading speed is enough
    [letters] = plan_bench(bench, ["hybrid"], [_local(tmp_path / "b", write=None, logprobs=True)], lib)
    assert letters.tally.wall_s == pytest.approx(letters.tally.read_tokens / 100)
    assert "write speed not measured yet" in letters.wall_from


def test_a_saved_prefix_prices_a_films_first_read_as_a_restore(films, tmp_path: Path) -> None:
    lib, path = films
    bench = load_benchmark(path, library=lib)
    [row] = plan_bench(bench, ["subtitles"], [_local(tmp_path)], lib)
    [saved] = plan_bench(bench, ["subtitles"], [_local(tmp_path)], lib, saved_prefixes={"fake-local": {"keys2"}})
    before, after = row.firsts[1], saved.firsts[1]
    assert (after.film_id, after.restored, saved.firsts[0].restored) == ("keys2", True, False)
    assert after.tokens == before.tokens - before.prefix_tokens
    assert saved.tally.read_tokens == row.tally.read_tokens - before.prefix_tokens
    assert saved.tally.wall_s == pytest.approx(row.tally.wall_s - before.prefix_tokens / 100)
    assert "restore time not counted" in saved.wall_from
    first, prefix, wall = row.firsts[0], row.firsts[0].prefix_tokens, row.tally.wall_s
    seconds = first.seconds
    price_restores(row, {"keys"}, restore_s=lambda tokens: 2.0)  # the hook a prefix cache fills
    assert first.restored and first.seconds == pytest.approx(seconds - prefix / 100 + 2.0)
    assert row.tally.wall_s == pytest.approx(wall - prefix / 100 + 2.0) and "restore time" not in row.wall_from


def test_shared_prefix() -> None:
    assert shared_prefix("abcdef", "abcxyz") == 3 and shared_prefix("", "a") == 0 and shared_prefix("ab", "ab") == 2


def test_a_cached_call_leaves_the_held_prompt_as_it_was(tmp_path: Path) -> None:
    from moviemem.backbones import ReplayCache

    inner = _local(tmp_path)
    warm = ReplayCache(ScriptedBackbone(["ok"], name="fake-local"), tmp_path / "cache")
    long_a, long_b = "A" * 4000 + " one", "B" * 4000 + " two"
    warm.send(Request.build([user(long_b)], max_tokens=4))
    stand_in = PlanningBackbone(inner, "fake-local", tmp_path / "cache")
    tally = stand_in.begin("f")
    for text in (long_a, long_b, long_a + " again"):
        stand_in.send(Request.build([user(text)], max_tokens=4))
    assert tally.cached == 1  # long_b: the model never read it, so it still holds long_a
    assert tally.reused_tokens >= 1000 and tally.read_tokens < 1100



def test_a_marked_prefix_is_all_a_later_call_reuses(tmp_path: Path) -> None:
    """Two statements that open alike after the transcript: the local model reads the second from the marked
    prefix's end (the words they share after it were read in another batch), so the plan counts it so."""
    stand_in = PlanningBackbone(_local(tmp_path), "fake-local", tmp_path / "cache")
    tally = stand_in.begin("f")
    head = "T" * 4000 + "\n\n"
    reads = []
    for statement in ("Claim: " + "s" * 400 + " one", "Claim: " + "s" * 400 + " two"):
        before = tally.read_tokens
        stand_in.send(Request.build([user(head + statement)], max_tokens=4, shared_prefix=len(head)))
        reads.append(tally.read_tokens - before)
    assert reads[0] > 1100 and 100 <= reads[1] <= 110  # the second reads its whole statement (~103 tokens), not 1
    assert tally.reused_tokens == pytest.approx(4000 / 4, abs=5)  # the transcript, not the statements' shared start

# ----------------------------------------------------------------------------- the real local model

needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")


def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Speeds go to this test's own pace book (the model's process inherits the environment)."""
    models = get_settings().models_path
    monkeypatch.setenv("MOVIEMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MOVIEMEM_MODELS_DIR", str(models))


@needs_llama
def test_a_letter_read_from_log_probabilities_records_the_reading_speed(tmp_path: Path, monkeypatch) -> None:
    _own_home(tmp_path, monkeypatch)
    try:
        b = load("local-small", n_ctx=1536)  # a context of its own: a worker of its own, started here
    except MovieMemError as exc:
        pytest.skip(str(exc))
    reply = b.send(Request.build([user(" ".join(LINES) + " Where is the key? A, B, C or D?")], max_tokens=1, logprobs=5))
    assert isinstance(reply, Reply) and reply.logprobs
    pace = PaceBook(b.paces.path).get(b.pace_key)
    assert b.paces.path.is_relative_to(tmp_path) and pace.read_tok_s and pace.write_tok_s is None


@needs_llama
def test_after_doctor_measured_the_speeds_the_plan_has_a_wall_time(films, tmp_path: Path, monkeypatch) -> None:
    from moviemem.doctor.speed import measure_speed

    _own_home(tmp_path, monkeypatch)
    lib, path = films
    bench = load_benchmark(path, library=lib)
    try:
        [unmeasured] = plan_bench(bench, ["closed-book"], ["local-small"], lib, cache=tmp_path / "c")
    except MovieMemError as exc:
        pytest.skip(str(exc))
    assert unmeasured.tally.wall_s is None and "run `moviemem doctor`" in unmeasured.wall_from
    ok, detail, _ = measure_speed("local-small")
    assert ok is True, detail
    assert "tokens at" in detail and "/s" in detail
    [row] = plan_bench(bench, ["closed-book"], ["local-small"], lib, cache=tmp_path / "c")
    assert row.tally.wall_s is not None and row.tally.wall_s > 0 and "measured here" in row.wall_from
    # measured once: a later doctor reports the recorded speeds without loading the model
    from moviemem.backbones.llamacpp_backend import LlamaCppBackbone

    monkeypatch.setattr(LlamaCppBackbone, "send", lambda self, request: pytest.fail("the model was called again"))
    again = measure_speed("local-small")
    assert again[0] is True and "as recorded by earlier calls" in again[1]


def test_a_short_json_reply_times_the_writing_and_a_short_prompt_does_not_time_the_reading(tmp_path: Path) -> None:
    book = PaceBook(tmp_path / "pace.json")
    book.record("k", read=10, read_s=1.0, written=14, write_s=2.0)  # a full-context policy's JSON answer
    assert (book.get("k").read_tok_s, book.get("k").write_tok_s) == (None, 7.0)
    book.record("k", read=0, read_s=0.0, written=3, write_s=1.0)  # three tokens time the call, not the steps
    assert book.get("k").write_tok_s == 7.0


def test_the_plan_asks_the_prompt_state_cache_which_prefixes_are_saved(films, tmp_path: Path, monkeypatch) -> None:
    from moviemem.backbones import prefix_states

    lib, path = films
    asked: list[tuple[object, str]] = []
    monkeypatch.setattr(prefix_states, "saved_prefixes", lambda folder, backbone: asked.append((folder, backbone)) or {"keys"})
    [row] = plan_bench(load_benchmark(path, library=lib), ["subtitles"], [_local(tmp_path)], lib, cache=tmp_path / "c")
    assert asked == [(tmp_path / "c", "fake-local")]
    assert [f.restored for f in row.firsts] == [True, False] and "saved prefixes restored" in row.wall_from
    plan_bench(load_benchmark(path, library=lib), ["subtitles"], [ScriptedBackbone([])], lib, cache=tmp_path / "c")
    assert len(asked) == 1  # an API backbone keeps no prompt state
