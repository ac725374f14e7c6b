"""Runs on every machine it installs on (issue 53): the CPU probe, the build plan and its cache key,
the local model in a child process whose native crash is one line, and `moviemem doctor`."""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import sys
from pathlib import Path

import pytest
from scripts_loader import load_script

from moviemem.agents.types import Answer, Step
from moviemem.backbones import ScriptedBackbone, llamacpp_worker, user
from moviemem.backbones.llamacpp_backend import LlamaCppBackbone
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.runner import run_bench
from moviemem.foundation import cpu
from moviemem.foundation.errors import BackboneCrashed

ROOT = Path(__file__).resolve().parent.parent
# a stand-in for the worker that dies as an AMX kernel did on a guest that lists AMX: by SIGILL
DIES_BY_SIGILL = (sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)")
HANGS = (sys.executable, "-c", "import time; time.sleep(60)")


def _llama_build():
    return load_script("scripts/llama_build.py")


@pytest.mark.skipif(shutil.which("cc") is None, reason="the probe needs a C compiler")
def test_a_listed_feature_the_cpu_cannot_run_is_not_counted() -> None:
    real = cpu.cpu_flags()
    if "amx_tile" in real:
        pytest.skip("this CPU lists AMX itself")
    p = cpu.probe(flags=real | {"amx_tile"})  # as a guest that lists AMX it cannot run
    assert "amx" in p.listed and "amx" not in p.runnable
    assert p.failed["amx"] == "killed by SIGILL"
    assert "sse42" in p.runnable  # x86-64 machines of this project's kind all run SSE4.2


def test_the_plan_builds_only_what_runs_here_and_never_amx_or_native() -> None:
    lb = _llama_build()
    runs = frozenset({"sse42", "avx", "avx2", "fma", "f16c", "bmi2", "avx512vbmi", "amx"})
    plan = lb.make_plan("best", runs, "cc 12")
    assert plan.features == ["avx", "avx2", "bmi2", "f16c", "fma", "sse42"]  # VBMI without AVX-512 is dropped
    for arg in ("-DGGML_NATIVE=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AVX512=OFF",
                "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX2=ON"):
        assert arg in plan.cmake_args
    safe = lb.make_plan("safe", runs | {"avx512", "avx512vnni"}, "cc 12")
    assert "avx512" not in safe.features and "-DGGML_AVX512=OFF" in safe.cmake_args
    assert lb.make_plan("best", runs | {"avx512"}, "cc 12").key != plan.key  # the key follows the flags
    assert lb.make_plan("best", runs, "cc 13").key != plan.key  # and the compiler


def _cache(lb, tmp: Path, plan, features: list[str], key: str | None = None) -> Path:
    folder = tmp / plan.folder
    folder.mkdir(parents=True)
    (folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"wheel")
    (folder / "build.json").write_text(json.dumps({"key": key or plan.key, "features": features}))
    return folder


def test_a_cached_wheel_built_for_other_cpu_features_is_not_reused(tmp_path: Path) -> None:
    """A home shared by machines of different CPUs: the cache says what each wheel needs."""
    lb = _llama_build()
    here = frozenset({"sse42", "avx", "avx2", "fma", "f16c", "bmi2"})
    plan = lb.make_plan("best", here, "cc 12")
    folder = _cache(lb, tmp_path / "a", plan, plan.features)
    assert lb.cached_wheel(tmp_path / "a", plan, here) == next(folder.glob("*.whl"))
    _cache(lb, tmp_path / "b", plan, [*plan.features, "avx512"])  # recorded as needing AVX-512
    assert lb.cached_wheel(tmp_path / "b", plan, here) is None
    assert "avx512" in lb.reusable({"key": plan.key, "features": ["avx512"]}, plan, here)
    _cache(lb, tmp_path / "c", plan, plan.features, key="0" * 16)  # built another way under this name
    assert lb.cached_wheel(tmp_path / "c", plan, here) is None
    assert lb.cached_wheel(tmp_path / "empty", plan, here) is None


def _backbone(tmp_path: Path) -> LlamaCppBackbone:
    return LlamaCppBackbone(tmp_path / f"model-{tmp_path.name}.gguf", name="local-test", n_ctx=512)


def test_a_native_crash_in_the_model_is_one_line_naming_the_backbone_and_doctor(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(llamacpp_worker, "COMMAND", DIES_BY_SIGILL)
    b = _backbone(tmp_path)
    with pytest.raises(BackboneCrashed) as caught:
        b.chat([user("hi")], max_tokens=1)
    message = str(caught.value)
    assert "\n" not in message and "local-test" in message and "SIGILL" in message and "moviemem doctor" in message


def test_a_hung_model_is_stopped_and_reported(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(llamacpp_worker, "COMMAND", (sys.executable, "-c",
                                                     "import sys, time\nfrom multiprocessing.connection import Connection\n"
                                                     "c = Connection(int(sys.argv[1])); c.recv(); c.send(('ok', None)); time.sleep(60)"))
    with pytest.raises(BackboneCrashed, match="did not answer within 1 s"):
        _backbone(tmp_path).load_check(timeout=1.0)


def test_ask_with_a_crashing_local_model_exits_2_with_one_line(cli, tmp_path, monkeypatch) -> None:
    srt = tmp_path / "f.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe letter came today.\n")
    assert cli("ingest", "--text", str(srt), "--film-id", "f").code == 0
    monkeypatch.setattr(llamacpp_worker, "COMMAND", DIES_BY_SIGILL)
    gguf = tmp_path / "m.gguf"
    r = cli("ask", "f", "What came?", "--policy", "closed-book", "--backbone", f"llamacpp:{gguf}")
    assert r.code == 2 and "Traceback" not in r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: ") and "SIGILL" in lines[-1] and "moviemem doctor" in lines[-1]


def _bench(n: int) -> Benchmark:
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Q{i}?", "options": ["a", "b"], "answer": "A"})
            for i in range(n)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl")


def test_a_bench_stops_at_a_crash_keeps_what_it_finished_and_resumes(tmp_path) -> None:
    asked: list[str] = []

    def answer(crash_at: str | None):
        def one(film_id, query, policy, backbone):
            if query.question == crash_at:
                raise BackboneCrashed("the local backbone local (llama.cpp) died with SIGILL; run `moviemem doctor`")
            asked.append(query.question)
            reply = backbone.chat([user(query.question)], max_tokens=4)
            return Answer(choice="A", text="a", confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                          usage=reply.usage, trace=[Step("parse", {"choice": "A", "invalid": False})])
        return one

    run = tmp_path / "run"
    with pytest.raises(BackboneCrashed, match="rerun to resume"):
        run_bench(_bench(4), ["p"], [ScriptedBackbone(["A"], cycle=True)], run, answerer=answer("Q2?"))
    assert asked == ["Q0?", "Q1?"]
    lines = [json.loads(ln) for ln in (run / "results.jsonl").read_text().splitlines() if ln.strip()]
    assert sorted(r["item_id"] for r in lines if "item_id" in r) == ["q0", "q1"]  # nothing recorded for the crash
    asked.clear()
    result = run_bench(_bench(4), ["p"], [ScriptedBackbone(["A"], cycle=True)], run, answerer=answer(None))
    assert asked == ["Q2?", "Q3?"] and result.answered == 4


def test_doctor_reports_a_missing_model_with_exit_2(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MOVIEMEM_MODELS_DIR", str(tmp_path / "no-models"))
    r = cli("doctor", "--only", "models", "--json")
    assert r.code == 2
    report = r.json()
    assert report["ok"] is False
    missing = [c for c in report["checks"] if c["name"] == "model smollm2-135m"][0]
    assert missing["ok"] is False and missing["fix"] == "moviemem models prepare smollm2-135m"


def test_doctor_reports_a_missing_ffmpeg_with_exit_2(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no ffmpeg, no tesseract
    r = cli("doctor", "--only", "tools")
    assert r.code == 2
    assert "FAIL ffmpeg: `ffmpeg` is not on PATH" in r.out and "fix: apt-get install ffmpeg" in r.out


def test_doctor_reports_a_crashing_backbone_with_exit_2(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(llamacpp_worker, "COMMAND", DIES_BY_SIGILL)
    r = cli("doctor", "--only", "llama", "--backbone", f"llamacpp:{tmp_path / 'm.gguf'}", "--json")
    assert r.code == 2
    runs = [c for c in r.json()["checks"] if c["name"].startswith("llama.cpp runs")][0]
    assert runs["ok"] is False and "SIGILL" in runs["detail"] and "make setup" in runs["fix"]


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed")
def test_doctor_passes_on_this_machine(cli) -> None:
    """The installed build loads local-small in a child and writes a token; every check passes here."""
    r = cli("doctor", "--json")
    report = r.json()
    assert r.code == 0 and report["ok"], [c for c in report["checks"] if c["ok"] is False]
    assert report["seconds"] < 30


def test_ending_names_signals() -> None:
    assert "SIGILL" in llamacpp_worker.ending(-int(signal.SIGILL))
    assert llamacpp_worker.ending(3) == "exit status 3"


def test_setup_reads_an_empty_cached_wheel_as_empty(tmp_path) -> None:
    """setup.sh splits the plan line with `read`: a missing wheel must read as empty, not as the next field
    (tabs, being whitespace to `read`, ran together and made the features look like a wheel)."""
    import subprocess

    if shutil.which("cc") is None:
        pytest.skip("the probe needs a C compiler")
    script = (f"IFS='|' read -r key wheel features < <({sys.executable} {ROOT / 'scripts' / 'llama_build.py'} plan "
              f"--wheels {tmp_path}); echo \"$key/[$wheel]/$features\"")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    key, wheel, features = out.split("/")
    assert len(key) == 16 and wheel == "[]" and "sse42" in features.split()
