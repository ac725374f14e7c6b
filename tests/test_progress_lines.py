"""Progress a log can follow (issue 61 item 2): plain lines on a stderr that is no terminal, after each item and at
least every progress_interval_s while a call is in flight; --quiet silences them."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path

import pytest
from text_film import text_film_bench

from moviemem import register
from moviemem.backbones import Request, ScriptedBackbone, user
from moviemem.foundation.progress import CallBoard, LineReporter, ProgressLines, span

CUES = [(float(10 * i), float(10 * i + 4), line) for i, line in enumerate(
    ["Anna hid the key in the attic.", "Tom searched the cellar all night.", "The inn burned down in winter."])]
ROWS = [{"id": f"q{i}", "film_id": "keys", "question": q, "options": ["the attic", "the cellar", "the inn", "the shop"],
         "answer": a} for i, (q, a) in enumerate([("Where did Anna hide the key?", "A"), ("Where did Tom search?", "B")])]
JSON_REPLY = '{"answer": "A", "confidence": 2}'


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_an_item_line_has_the_counts_the_elapsed_time_and_the_eta() -> None:
    clock, out = Clock(), []
    lines = ProgressLines(out.append, "bench mcq", interval=30, board=CallBoard(clock), clock=clock)
    lines.begin("k1", "subtitles x local, film f1, item q1", done=0, total=4)
    clock.t += 60
    lines.end("k1", done=1, total=4)
    assert out == ["[bench mcq] 1/4, elapsed 1m00s, ETA 3m00s | subtitles x local, film f1, item q1 in 1m00s"]
    lines.begin("k2", "subtitles x local, film f1, item q2")
    clock.t += 30
    lines.end("k2", "done with q2", done=4, total=4)  # a resumed run: two were answered before
    assert out[-1] == "[bench mcq] 4/4, elapsed 1m30s, ETA 0s | done with q2 in 30s"
    assert [span(s) for s in (0.4, 59, 61, 3600 + 125)] == ["0s", "59s", "1m01s", "1h02m"]


def test_the_heartbeat_names_the_item_and_the_prompt_being_read() -> None:
    clock, out = Clock(), []
    board = CallBoard(clock)
    lines = ProgressLines(out.append, "ask", interval=30, total=1, board=board, clock=clock)
    lines.begin("ask", "subtitles x local, film mf2-6")
    with board.call("local", 12_000, read_tok_s=50.0):
        clock.t += 100
        lines.heartbeat()
        assert "waiting: subtitles x local, film mf2-6 (1m40s so far)" in out[-1]
        assert "local call 1m40s in: a prompt of ~12,000 tokens, ~5,000 read (estimated at the 50 tokens/s measured here)" in out[-1]
        board.reading(3_000, 11_800)  # a backbone that reads in batches says how far it got
        lines.heartbeat()
        assert "read 3,000 of 11,800 prompt tokens" in out[-1]
    lines.heartbeat()
    assert "call" not in out[-1]  # the call ended: no longer named
    with board.call("openai:gpt-x", 900):
        lines.heartbeat()
        assert "a prompt of ~900 tokens (reading speed not measured yet)" in out[-1]


def _slow_backbone(seconds: float) -> ScriptedBackbone:
    def slow(request: Request) -> str:
        time.sleep(seconds)
        return JSON_REPLY

    return ScriptedBackbone(slow, name="slow", max_attempts=1)


def test_the_heartbeat_fires_while_a_slow_call_is_in_flight() -> None:
    out: list[str] = []
    backbone = _slow_backbone(0.6)
    with ProgressLines(out.append, "ask", interval=0.1, total=1) as lines:
        lines.begin("ask", "closed-book x slow, film f")
        backbone.send(Request.build([user("x" * 4000)]))
        lines.end("ask")
    beats = [line for line in out if "waiting:" in line]
    assert len(beats) >= 2, out
    assert "slow call" in beats[0] and "a prompt of ~1,000 tokens" in beats[0]  # ProviderBackbone registered the call
    assert out[-1].startswith("[ask] 1/1")
    assert not any("slow call" in line for line in out[-1:])


def test_a_reporter_gives_an_ingest_stage_lines() -> None:
    clock, out = Clock(), []
    lines = ProgressLines(out.append, "ingest", interval=30, total=1, board=CallBoard(clock), clock=clock)
    rep = LineReporter(lines, "synth")
    rep.start("frames", 240)
    rep.update(10, 240)  # within the interval: no line
    clock.t += 31
    rep.update(120, 240, "3 s")
    rep.finish("frames", "done", "240 frames")
    rep.warn("no CLIP weights")
    assert [line.split(" | ")[1] for line in out] == ["synth: frames 120/240 3 s", "synth: frames done (240 frames) in 31s",
                                                      "warning: no CLIP weights"]
    assert out[0].startswith("[ingest] 0/1")  # a stage is not one of the films counted


@pytest.fixture(scope="module")
def film(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    return text_film_bench(tmp_path_factory.mktemp("progress"), CUES, ROWS, "keys", "Keys")


def _use(backbone: ScriptedBackbone) -> str:
    name = f"test-progress-{uuid.uuid4().hex[:8]}"
    register("backbone", name)(lambda arg, **options: backbone)
    return name


def test_a_bench_in_a_log_writes_a_line_per_item_and_quiet_writes_none(film, cli, tmp_path: Path) -> None:
    lib, path = film
    args = ("bench", str(path), "--policies", "closed-book,subtitles", "--backbones", "scripted",
            "--library", str(lib.path))
    r = cli(*args, "--out", str(tmp_path / "run"), library=False)  # the runner captures stderr: no terminal
    assert r.code == 0, r.err
    lines = [line for line in r.err.splitlines() if line.startswith("[bench mcq]")]
    assert len(lines) == 4, r.err
    assert re.match(r"\[bench mcq\] 1/4, elapsed \d+s, ETA \d+s \| closed-book x scripted, film keys, item q0: \w+; "
                    r"\d+ model calls, 0 cached, \$0\.0000 so far", lines[0]), lines[0]
    assert lines[-1].startswith("[bench mcq] 4/4") and "subtitles x scripted, film keys, item q1" in lines[-1]
    q = cli(*args, "--out", str(tmp_path / "quiet"), "--quiet", library=False)
    assert q.code == 0 and "[bench" not in q.err and "answered" in q.err


def test_a_slow_bench_item_gets_heartbeats(film, cli, tmp_path: Path, monkeypatch) -> None:
    lib, path = film
    monkeypatch.setenv("MOVIEMEM_PROGRESS_INTERVAL_S", "0.1")
    name = _use(_slow_backbone(0.5))
    r = cli("bench", str(path), "--policies", "closed-book", "--backbones", name, "--limit", "1", "--library",
            str(lib.path), "--out", str(tmp_path / "run"), library=False)
    assert r.code == 0, r.err
    beats = [line for line in r.err.splitlines() if "waiting:" in line and "item q0" in line]
    assert any(f"closed-book x {name}, film keys, item q0" in b and "slow call" in b for b in beats), r.err
    assert beats[0].startswith("[bench mcq] 0/1")


def test_ask_in_a_log_says_what_it_waits_for_and_quiet_says_nothing(film, cli, monkeypatch) -> None:
    lib, _ = film
    monkeypatch.setenv("MOVIEMEM_PROGRESS_INTERVAL_S", "0.1")
    name = _use(_slow_backbone(0.4))
    args = ("ask", "keys", "Where did Anna hide the key?", "--option", "the attic", "--option", "the cellar",
            "--policy", "closed-book", "--backbone", name, "--library", str(lib.path))
    r = cli(*args, library=False)
    assert r.code == 0, r.err
    ask = [line for line in r.err.splitlines() if line.startswith("[ask]")]
    # no line before the first step (input refused before any work stays one error line); the heartbeat names it
    assert any("waiting:" in line and f"closed-book x {name}, film keys" in line and "slow call" in line
               for line in ask), r.err
    assert ask[-1].startswith("[ask] 1/1") and "answered" in ask[-1]
    q = cli(*args, "--quiet", library=False)
    assert q.code == 0 and "[ask]" not in q.err


def test_import_collection_in_a_log_writes_a_line_per_film(cli, tmp_path: Path) -> None:
    root = tmp_path / "mf2"
    (root / "transcripts").mkdir(parents=True)
    for n in (6, 51):
        (root / "transcripts" / f"{n}.srt").write_text("1\n00:00:01,000 --> 00:00:03,000\nHello there.\n")
    r = cli("import-collection", "mf2", str(root))
    assert r.code == 0, r.err
    lines = [line for line in r.err.splitlines() if line.startswith("[importing mf2]")]
    assert [line.split(", ")[0] for line in lines] == ["[importing mf2] 1/2", "[importing mf2] 2/2"], r.err
    q = cli("import-collection", "mf2", str(root), "--quiet")
    assert q.code == 0 and "[importing" not in q.err


def test_a_heartbeat_never_runs_on_after_its_lines_close() -> None:
    out: list[str] = []
    with ProgressLines(out.append, "x", interval=0.05):
        pass
    n = len(out)
    time.sleep(0.15)
    assert len(out) == n and not any(t.name == "progress-heartbeat" for t in threading.enumerate())
