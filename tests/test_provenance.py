"""Provenance in run.json and the report (issue 18, item 15, in part)."""

from __future__ import annotations

import json
from pathlib import Path

from moviemem import __version__
from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.report import write_report
from moviemem.eval.runner import run_bench


def _bench() -> Benchmark:
    rows = [(1, {"id": "q0", "film_id": "f", "question": "Q?", "options": ["a", "b"], "answer": "A"})]
    return Benchmark("mcq", validate_rows(rows, "mcq", "m.jsonl"), "m.jsonl", "jsonl")


def _answer(film_id, query, policy, backbone):
    reply = backbone.chat([user(query.question)], max_tokens=4)
    return Answer(choice="A", text="a", confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                  usage=reply.usage)


def test_run_json_and_report_record_what_produced_the_numbers_and_changes_are_said(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(_bench(), ["p[k=3]"], [ScriptedBackbone(["A"], cycle=True)], run, answerer=_answer)
    prov = json.loads((run / "run.json").read_text())["provenance"]
    assert prov["moviemem"] == __version__ and set(prov["engines"]) >= {"lancedb", "sentence-transformers"}
    assert prov["backbones"] == {"scripted": "scripted"} and prov["policies"] == {"p[k=3]": {"k": 3}}
    md = write_report(run, inspector=False)["report"].read_text()
    assert "## Provenance" in md and f"moviemem {__version__}" in md and "policy `p[k=3]`: settings {'k': 3}" in md

    prov["engines"]["lancedb"] = "0.0.1-older"  # as if the first run had used another lancedb
    manifest = json.loads((run / "run.json").read_text())
    manifest["provenance"] = prov
    (run / "run.json").write_text(json.dumps(manifest))
    again = run_bench(_bench(), ["p[k=3]"], [ScriptedBackbone(["A"], cycle=True)], run, answerer=_answer)
    assert any("provenance differs" in w and "engine lancedb: 0.0.1-older ->" in w for w in again.warnings)
    assert "changed during the run: engine lancedb: 0.0.1-older" in write_report(run, inspector=False)["report"].read_text()


def test_provenance_names_resolved_settings_prompts_films_and_weights(tmp_path: Path) -> None:
    from moviemem import Library
    from moviemem.backbones.llamacpp_backend import LlamaCppBackbone
    from moviemem.eval.provenance import backbone_identity

    srt = tmp_path / "f.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nThe key is under the mat.\n")
    lib = Library(tmp_path / "lib")
    lib.ingest_text(srt, film_id="f")
    run = tmp_path / "run"
    run_bench(_bench(), ["closed-book", "hybrid[reader=json,budget_tokens=300]"],
              [ScriptedBackbone(['{"answer": "A", "confidence": 3}'], cycle=True)], run, library=lib)
    prov = json.loads((run / "run.json").read_text())["provenance"]
    hyb = prov["policies"]["hybrid[reader=json,budget_tokens=300]"]
    assert hyb["budget_tokens"] == 300 and hyb["reader"] == "json" and hyb["units"] == "mixed"  # defaults resolved
    assert prov["prompts"] == {"closed-book": ["closed-book@v1"], "hybrid[reader=json,budget_tokens=300]": ["hybrid@v1"]}
    stages = prov["films"]["f"]
    assert stages["transcript"].startswith("done:") and stages["passages"].startswith("done:")
    md = write_report(run, inspector=False)["report"].read_text()
    assert "prompts of `closed-book`: closed-book@v1" in md and "film `f`: " in md
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF weights")
    ident = backbone_identity(LlamaCppBackbone(gguf, name="x"), "x")
    assert ident.endswith("sha256:" + __import__("hashlib").sha256(b"GGUF weights").hexdigest())
