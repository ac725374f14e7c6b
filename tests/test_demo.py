"""`make demo` runs `moviemem demo`: the README's main command must work end to end."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_renders_ingests_asks_benches_and_reports(tmp_path):
    out, lib = tmp_path / "demo", tmp_path / "library"
    cmd = [sys.executable, "-c", "from moviemem.cli import main; main()", "demo", "--out", str(out), "--library", str(lib),
           "--backbone", "local-small", "--questions", "1", "--bench-items", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Q " in proc.stdout and "input tokens" in proc.stdout  # the asked question, its answer and usage
    for step in ("1/4", "2/4", "3/4", "4/4"):
        assert step in proc.stderr
    run = out / "run"
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted({r["policy"] for r in results}) == ["closed-book", "hybrid", "subtitles"]
    assert len(results) == 3 * 2  # three policies x two items, each answered or recorded invalid
    report = (run / "report.md").read_text()
    assert "hybrid" in report and "subtitles" in report
    assert (run / "accuracy_vs_tokens.png").stat().st_size > 0
    assert (run / "inspector" / "index.html").is_file()
