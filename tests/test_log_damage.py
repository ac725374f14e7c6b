"""A run directory from a newer moviemem, or with a damaged items.jsonl, fails in one line (issue 54)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compare import ROWS, _bench, _run

from moviemem.backbones import ScriptedBackbone
from moviemem.eval.log import read_header, read_log
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and not p.name.startswith(".")}


def _set_version(path: Path, version: int, line: int | None = None) -> None:
    if line is None:
        path.write_text(json.dumps({**json.loads(path.read_text()), "log_version": version}))
        return
    lines = path.read_text().splitlines()
    lines[line] = json.dumps({**json.loads(lines[line]), "log_version": version})
    path.write_text("\n".join(lines) + "\n")


def test_a_newer_log_version_is_refused_in_one_line(tmp_path: Path, cli) -> None:
    run = _run(tmp_path / "run", right={0})
    other = _run(tmp_path / "other", right={1})
    _set_version(run / "results.jsonl", 99, line=3)
    with pytest.raises(MovieMemError, match=r"results.jsonl: line 4: log_version 99 is newer than this moviemem "
                                            r"supports \(2\)"):
        read_log(run)
    for args in (("report", str(run)), ("compare", str(run), str(other))):
        r = cli(*args, library=False)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "log_version 99 is newer" in r.err, r.err
    _set_version(run / "results.jsonl", 2, line=3)
    _set_version(run / "run.json", 99)
    with pytest.raises(MovieMemError, match=r"run.json: log_version 99 is newer"):
        read_header(run)
    before = _files(run)
    with pytest.raises(MovieMemError, match="log_version 99 is newer"):
        _run(run, right=set())  # a rerun writes nothing
    assert _files(run) == before


@pytest.mark.parametrize(("damage", "says"), [
    ('{"id": "q0", "film_id": "f0", "question": ', "line 2 is not JSON"),
    ("[1, 2]", "line 2 is not an item"),
])
def test_a_damaged_items_file_is_one_line_naming_it(tmp_path: Path, cli, damage: str, says: str) -> None:
    run = _run(tmp_path / "run", right={0})
    other = _run(tmp_path / "other", right={1})
    lines = (run / "items.jsonl").read_text().splitlines()
    lines[1] = damage
    (run / "items.jsonl").write_text("\n".join(lines) + "\n")
    for args in (("report", str(run)), ("compare", str(run), str(other))):
        r = cli(*args, library=False)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
        assert f"items.jsonl: {says}" in r.err
    before = _files(run)
    with pytest.raises(MovieMemError, match=says):
        _run(run, right=set(), rows=ROWS)
    assert _files(run) == before


def test_a_damaged_items_file_stops_a_rerun_before_it_drops_records(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", right={0}, invalid=frozenset({2}))
    (run / "items.jsonl").write_text("{\n")
    before = _files(run)
    with pytest.raises(MovieMemError, match="items.jsonl: line 1 is not JSON"):
        run_bench(_bench(), ["p"], [ScriptedBackbone(["A"], cycle=True)], run, answerer=lambda *a: None,
                  retry_invalid=True)  # would drop the invalid record first
    assert _files(run) == before
