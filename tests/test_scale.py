"""Scale-out on a local Ray cluster (2 CPUs, 127.0.0.1 only): three films ingested on Ray equal
the serial ingest, a bench answered by Ray workers equals the serial run, and workers killed
mid-task are retried without a lost or duplicated row."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import threading
from pathlib import Path

import pytest
from conftest import make_video

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported: stay on loopback
import ray  # noqa: E402
from fake_servers import FakeOpenAI, FakeResponse, Recorded  # noqa: E402

from moviemem import Library  # noqa: E402
from moviemem.eval.formats import Benchmark, validate_rows  # noqa: E402
from moviemem.eval.log import read_log  # noqa: E402
from moviemem.eval.runner import run_bench
from moviemem.foundation.config import get_settings  # noqa: E402
from moviemem.foundation.errors import MovieMemError  # noqa: E402
from moviemem.memory.store import MemoryStore  # noqa: E402
from moviemem.memory.view import FilmMemory  # noqa: E402
from moviemem.scale.cluster import parse_address  # noqa: E402
from moviemem.scale.ray_bench import bench_on_ray  # noqa: E402
from moviemem.scale.ray_ingest import FilmJob, ingest_films  # noqa: E402

TABLES = ["films", "frames", "clip", "shots", "segments", "utterances", "captions", "onscreen"]
FILMS = {"ann": ("red", "blue", "green"), "bea": ("yellow", "white", "black"), "cid": ("blue", "red", "white")}
POLICIES = ["subtitles", "closed-book"]


class Server(FakeOpenAI):
    """Deterministic replies (a function of the request's text) and a gate: once armed with a
    marker, the first request containing it is held until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.marker: bytes | None = None
        self.held = threading.Event()
        self.release = threading.Event()

    def arm(self, marker: str) -> None:
        self.marker, self.held, self.release = marker.encode(), threading.Event(), threading.Event()

    def route(self, rec: Recorded) -> FakeResponse:
        if not (rec.method == "POST" and rec.path.rstrip("/").endswith("/chat/completions")):
            return super().route(rec)
        if self.marker is not None and self.marker in rec.body and not self.held.is_set():
            self.held.set()
            self.release.wait(60)
        body = rec.json
        texts = [p.get("text", "") if isinstance(p, dict) else "" for m in body["messages"]
                 for p in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])]
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
        if "response_format" in body and "caption" in json.dumps(body["response_format"]):
            return FakeResponse(body=self.completion(json.dumps({"caption": f"Caption {digest[:10]}", "characters": []})))
        return FakeResponse(body=self.completion("ABCD"[int(digest, 16) % 4]))

    def chat_calls(self, fragment: str = "") -> int:
        return sum(1 for r in self.calls("/chat/completions") if fragment.encode() in r.body)


def _srt(path: Path, name: str) -> Path:
    path.write_text("".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},800\n{name} says line {i}.\n\n" for i in range(1, 5)))
    return path


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def server():
    with Server() as srv:
        yield srv


@pytest.fixture(scope="module")
def films(tmp_path_factory: pytest.TempPathFactory) -> list[FilmJob]:
    d = tmp_path_factory.mktemp("films")
    return [FilmJob(make_video(d / f"{fid}.mp4", seconds=6, colours=colours), film_id=fid,
                    subtitles=_srt(d / f"{fid}.srt", fid.capitalize()))
            for fid, colours in FILMS.items()]


def _settings(lib: Path, server: Server):
    # CLIP has no weights here: the stage is recorded skipped, as on any machine without them
    return get_settings(library=lib, frame_pools=(16,), captioner=f"openai-compatible:{server.base_url}#vl")


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory, films: list[FilmJob], server: Server) -> Library:
    """The reference: the three films ingested one after another in this process."""
    lib_dir = tmp_path_factory.mktemp("serial") / "lib"
    lib = Library(lib_dir, _settings(lib_dir, server))
    for job in films:
        lib.ingest(job.path, film_id=job.film_id, subtitles=job.subtitles)
    return lib


def _content(lib: str | Path, film_id: str) -> dict:
    """What a film's memory holds, without run ids, timestamps or vectors."""
    f = FilmMemory(MemoryStore(lib), film_id)
    return {
        "counts": f.summary()["counts"],
        "frames": [(r["frame_idx"], r["t"], r["pools"], r["strip"]) for r in f.arrow("frames").to_pylist()],
        "shots": [(r["start"], r["end"]) for r in f.arrow("shots").to_pylist()],
        "utterances": [(r["start"], r["end"], r["text"]) for r in f.arrow("utterances").to_pylist()],
        "captions": sorted((r["kind"], r["start"], r["end"], r["text"]) for r in f.arrow("captions").to_pylist()),
        "stages": sorted((s.stage, s.status, s.rows) for s in f.store.finished_runs(film_id).values()),
    }


def _raw(lib: str | Path) -> dict[str, int]:
    """Every row of every table, visible or not: a duplicate or a leftover of a dead attempt shows here."""
    store = MemoryStore(lib)
    return {t: store.query(t).num_rows for t in [*TABLES, "stages"]}


def test_ray_ingest_equals_serial_and_a_killed_worker_is_retried(cluster, server, films, serial, tmp_path):
    lib_dir = tmp_path / "lib"
    settings = _settings(lib_dir, server)
    killed: list[int] = []

    def kill_bea_mid_captions(ev) -> None:  # bea's caption request is held by the server: kill the worker sending it
        if ev.film_id == "bea" and ev.kind == "start" and ev.stage == "captions" and not killed:
            assert server.held.wait(60), "bea's caption request never reached the server"
            os.kill(ev.pid, signal.SIGKILL)
            killed.append(ev.pid)
            server.release.set()

    server.arm("Bea says")
    outcomes = ingest_films(lib_dir, films, settings=settings, on_event=kill_bea_mid_captions)
    server.marker = None
    assert [o.film_id for o in outcomes] == ["ann", "bea", "cid"]
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert killed and {o.film_id: o.attempts for o in outcomes} == {"ann": 1, "bea": 2, "cid": 1}
    assert outcomes[1].stages["captions"][0] == "done"

    for fid in FILMS:
        assert _content(lib_dir, fid) == _content(serial.path, fid), fid
    assert _raw(lib_dir) == _raw(serial.path)  # nothing duplicated, nothing left behind by the killed attempt

    again = ingest_films(lib_dir, films, settings=settings)  # resumable: every stage is found finished
    assert all(o.ok for o in again)
    assert {s for o in again for s, _ in o.stages.values()} == {"cached"}
    assert _raw(lib_dir) == _raw(serial.path)


def test_one_bad_film_fails_alone(cluster, server, films, tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video at all")
    lib_dir = tmp_path / "lib"
    outcomes = ingest_films(lib_dir, [FilmJob(bad), films[0]], settings=_settings(lib_dir, server),
                            stages=["frames", "shots", "segments"])
    assert [o.ok for o in outcomes] == [False, True]
    assert outcomes[0].film_id == "broken" and "broken.mp4" in outcomes[0].error
    assert FilmMemory(MemoryStore(lib_dir), films[0].film_id).summary()["counts"]["shots"] == 3
    assert MemoryStore(lib_dir).film_row("broken") is None


def _bench() -> Benchmark:
    rows = []
    for fid in FILMS:
        name = fid.capitalize()
        for k in (1, 2, 3):
            rows.append({"id": f"{fid}-{k}", "film_id": fid, "question": f"What does {name} say in scene {k}?",
                         "options": [f"{name} says line {i}." for i in (1, 2, 3, 4)], "answer": "ABCD"[k - 1]})
    return Benchmark("mcq", validate_rows(list(enumerate(rows, 1)), "mcq", "mem"), "mem.jsonl", "jsonl")


def _normal(run_dir: Path) -> dict[str, dict]:
    """Records without what differs between any two runs (timings, dates)."""
    out = {}
    for r in read_log(run_dir):
        answers = {k: {f: getattr(a, f) for f in ("choice", "text", "invalid", "error", "policy", "backbone", "evidence")}
                   for k, a in r.answers.items()}
        out[r.key] = {f: getattr(r, f) for f in ("status", "reason", "correct", "detail", "film_id", "category")} | {"answers": answers}
    return out


def _entries(cache_dir: Path) -> int:
    with sqlite3.connect(cache_dir / "replies.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]


def _keys(run_dir: Path) -> list[str]:
    return [json.loads(line)["key"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def serial_bench(serial: Library, server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    d = tmp_path_factory.mktemp("bench")
    spec = f"openai-compatible:{server.base_url}#qa"
    res = run_bench(_bench(), POLICIES, [spec], d / "serial", library=serial, cache=d / "cache", cache_mode="readwrite")
    assert res.complete and res.spend.calls == 18
    return d / "serial", d / "cache", spec


def test_ray_bench_equals_serial_despite_killed_workers_and_shares_one_cache(cluster, server, serial, serial_bench,
                                                                            tmp_path):
    serial_dir, serial_cache, spec = serial_bench
    pids: list[int] = []
    pools: list = []

    def started(answerer) -> None:
        pools.append(answerer)
        pids.extend(ray.get([a.pid.remote() for a in answerer.actors]))

    def kill_when_held() -> None:  # the server holds one request: kill every worker, one of them mid-request
        if server.held.wait(120):
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        server.release.set()

    question = "What does Cid say in scene 2?"
    server.arm(question)
    killer = threading.Thread(target=kill_when_held, daemon=True)
    killer.start()
    before = server.chat_calls(question)
    res = bench_on_ray(_bench(), POLICIES, [spec], tmp_path / "ray", library=serial.path, settings=serial.settings,
                       cache=tmp_path / "cache", cache_mode="readwrite", on_start=started)
    killer.join(10)
    server.marker = None
    assert res.complete and res.answered + res.invalid == 18
    assert server.chat_calls(question) - before == 3  # both policies ask it; the held one is asked again
    assert set(pools[0].pids) - set(pids)  # restarted workers answered
    assert _keys(tmp_path / "ray") == list(dict.fromkeys(_keys(tmp_path / "ray")))  # no key twice
    assert _normal(tmp_path / "ray") == _normal(serial_dir)
    manifest = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert manifest["library"] == str(Path(serial.path).resolve())

    # every worker's writes reached the one cache: as many entries as the serial run's own cache
    assert _entries(tmp_path / "cache") == _entries(serial_cache) == 18
    calls = server.chat_calls()
    replay = bench_on_ray(_bench(), POLICIES, [spec], tmp_path / "replay", library=serial.path,
                          settings=serial.settings, cache=tmp_path / "cache", cache_mode="replay-only", workers=1)
    assert server.chat_calls() == calls and replay.spend.cache_hits == 18 and replay.spend.calls == 0
    assert _normal(tmp_path / "replay") == _normal(serial_dir)


def test_concurrent_commits_from_workers_lose_nothing(cluster, tmp_path):
    """Many small stage commits from two workers at once into one library (LanceDB commit
    conflicts are retried): every run is there once, with its rows."""

    @ray.remote(num_cpus=1)
    def commits(lib: str, film_id: str, n: int) -> int:
        from moviemem.memory.schema import ShotRow
        from moviemem.memory.store import MemoryStore

        store = MemoryStore(lib)
        for i in range(n):
            run = store.begin_run(film_id, "shots", {"i": i}, f"h{i}")
            store.append([ShotRow(film_id=film_id, run_id=run, shot_idx=k, start=float(k), end=k + 1.0) for k in range(3)])
            store.finish_run(film_id, "shots", run, ["shots"], rows=3)
        return n

    lib = str(tmp_path / "lib")
    assert ray.get([commits.remote(lib, f, 12) for f in ("a", "b", "c", "d")]) == [12] * 4
    store = MemoryStore(lib)
    for f in ("a", "b", "c", "d"):
        runs = store.stage_rows(f)
        assert len(runs) == 1 and runs[0].status == "done" and json.loads(runs[0].params) == {"i": 11}
        assert sorted(r.shot_idx for r in store.rows("shots", f"film_id = '{f}'")) == [0, 1, 2]


def test_ray_address_and_cli_errors(cluster, cli, films, tmp_path):
    for good in ("auto", "local", "ray://head:10001", "10.0.0.5:6379", "[::1]:6379"):
        assert parse_address(good) == good
    for bad in ("", "head", "ray://head", "http://head:10001", "head:99999", "head:port"):
        with pytest.raises(MovieMemError, match="bad --ray address"):
            parse_address(bad)
    r = cli("ingest", str(films[0].path), "--ray", "nowhere")
    assert r.code == 2 and r.err.count("\n") == 1 and "bad --ray address 'nowhere'" in r.err
    r = cli("ingest", str(films[0].path), "--ray", "auto", "--ray-resources", '{"transcript": {"gpus": 1}}')
    assert r.code == 2 and "unknown resource 'gpus'" in r.err
    r = cli("ingest", str(films[0].path), "--ray", "auto", "--ray-resources", '{"clip": {"num_gpus": 1}}')
    assert r.code == 2 and "no node of the Ray cluster has one" in r.err
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "q", "film_id": "ann", "question": "Who?", "options": ["a", "b"], "answer": "A"}) + "\n")
    r = cli("bench", str(bench), "--ray-workers", "2")
    assert r.code == 2 and "--ray-workers needs --ray" in r.err
    r = cli("bench", str(bench), "--ray", "ray://:1")
    assert r.code == 2 and "bad --ray address" in r.err


def test_cli_ingest_on_ray_reports_failures_and_resumes(cluster, cli, films, lib_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("MOVIEMEM_FRAME_POOLS", "[16]")
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"nope")
    args = ("ingest", str(films[2].path), str(bad), "--stages", "frames,shots,segments", "--ray", "auto", "--json")
    r = cli(*args)
    assert r.code == 2 and "1 of 2 film(s) failed" in r.err and "broken" in r.err
    out = r.json()
    assert [f["film_id"] for f in out["films"]] == ["cid"] and out["films"][0]["counts"]["shots"] == 3
    assert [f["film_id"] for f in out["failed"]] == ["broken"]
    r = cli("ingest", str(films[2].path), "--stages", "frames,shots,segments", "--ray", "auto", "--json")
    assert r.code == 0 and r.json()["failed"] == [] and r.json()["films"][0]["counts"]["shots"] == 3


def test_a_server_a_worker_could_not_reach_comes_back_as_one_so_the_item_is_asked_again() -> None:
    """A worker returns errors as values; an UnreachableError (Letta down) must not come back as a
    plain error, which the runner would record as invalid instead of a transport fault."""
    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.budget import Budget, MeteredBackbone
    from moviemem.foundation.errors import UnreachableError
    from moviemem.scale.ray_bench import AnswerWorker

    def down(*_: object) -> object:
        raise UnreachableError("the Letta server at http://127.0.0.1:1 did not answer")

    worker = object.__new__(AnswerWorker)  # the actor's body without an actor: its answer() alone
    worker.answerer = down
    worker._backbone = lambda spec: MeteredBackbone(ScriptedBackbone(["A"]), Budget(), spec)  # type: ignore[method-assign]
    kind, payload, _, _ = worker.answer("f", None, "letta", "scripted")  # type: ignore[arg-type]
    assert kind == "unreachable" and "did not answer" in payload
