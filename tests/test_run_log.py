"""The typed run log (eval/records.py): new lines and run.json carry the log version, a run written
before the version (tests/data/run_v1, written by moviemem at 540a6bd) reads and reports as it did,
records round-trip, and the inspector's templates ship inside the package."""

from __future__ import annotations

import fnmatch
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval import inspector, report
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.log import RESULTS, read_header, read_log
from moviemem.eval.records import LOG_VERSION, ResultRecord, RunHeader, parse
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError

V1 = Path(__file__).parent / "data" / "run_v1"


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / RESULTS).read_text().splitlines()]


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(V1, tmp_path / name))


def _answer(film_id, query, policy, backbone):
    reply = backbone.chat([user(query.question)], max_tokens=4)
    return Answer(choice="A", text="Attic", confidence=None, invalid=False, policy=policy, backbone=backbone.name,
                  usage=reply.usage)


def _v1_bench() -> Benchmark:
    rows = [json.loads(line) for line in (V1 / "items.jsonl").read_text().splitlines()]
    return Benchmark("mcq", validate_rows(list(enumerate(rows, 1)), "mcq", "v1.jsonl"), "v1.jsonl", "jsonl")


def test_new_lines_and_run_json_carry_the_version_and_todays_keys(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(_v1_bench(), ["closed-book"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=_answer)
    lines, old = _lines(run), _lines(V1)
    assert lines and all(line["log_version"] == LOG_VERSION for line in lines)
    assert all("log_version" not in line for line in old)
    # the keys written before the version, in their order, and no other but the item digest added since:
    # today's readers read new files
    added = {"item_digest"}
    assert [k for k in lines[0] if k not in added] == ["log_version", *old[0]]
    assert list(lines[0]["answers"]["answer"]) == list(old[0]["answers"]["answer"])
    header = json.loads((run / "run.json").read_text())
    assert header["log_version"] == LOG_VERSION
    assert header.keys() == json.loads((V1 / "run.json").read_text()).keys() | {"log_version"}


def test_a_version_1_run_reads_and_reports_as_the_same_run_written_as_version_2(tmp_path: Path) -> None:
    v1, v2 = _copy(tmp_path, "v1"), _copy(tmp_path, "v2")
    (v2 / RESULTS).write_text("".join(json.dumps({"log_version": 2, **line}) + "\n" for line in _lines(v1)))
    header = json.loads((v1 / "run.json").read_text())
    (v2 / "run.json").write_text(json.dumps({"log_version": 2, **header}))
    assert {r.log_version for r in read_log(v1)} == {1} and read_header(v1).log_version == 1
    assert {r.log_version for r in read_log(v2)} == {2}

    assert RunLog(v1).rows == RunLog(v2).rows
    md = [report.write_report(run, baseline="closed-book")["report"].read_text().replace(str(run), "RUN")
          for run in (v1, v2)]
    assert md[0] == md[1]
    assert "| hybrid | scripted | 6 | 0 | 100.0 [61.0, 100.0] |" in md[0]
    assert "| agent | scripted | 5 | 1 |" in md[0] or "| agent | scripted | 5 |" in md[0]
    assert "| hybrid | scripted | 6 | +66.7 [+13.1, +90.3] |" in md[0]  # Newcombe's interval, within 100 (issue 61)
    pages = [sorted(p.relative_to(run).as_posix() for p in (run / "inspector").rglob("*.html")) for run in (v1, v2)]
    assert pages[0] == pages[1] and "inspector/items/6.html" in pages[0]
    for page in pages[0]:
        assert (v1 / page).read_text() == (v2 / page).read_text(), page
    item = (v1 / "inspector" / "items" / "6.html").read_text()
    assert "Invalid: the reply names no option &lt;script&gt;x&lt;/script&gt;" in item and "<script>x" not in item


def test_a_record_round_trips_with_the_keys_it_was_read_with() -> None:
    for obj in _lines(V1):
        rec = ResultRecord.model_validate(obj)
        assert rec.line() == obj and "log_version" not in rec.line()
        assert parse(ResultRecord, json.dumps(rec.line()), "line") == rec
    rec = ResultRecord.model_validate(_lines(V1)[0])
    assert (rec.config, rec.status, rec.correct, rec.usage.input_tokens) == (("closed-book", "scripted"), "answered", True, 7)
    assert rec.answers["answer"].grounded is False and rec.evidence is not None and rec.evidence.outcome == "lucky"
    header = parse(RunHeader, (V1 / "run.json").read_text(), "run.json")
    assert header.line() == json.loads((V1 / "run.json").read_text()) and header.retired_spend.calls == 0


def test_unknown_keys_are_kept_a_newer_version_refused_and_a_damaged_header_fails_in_one_line(tmp_path: Path) -> None:
    line = {**_lines(V1)[0], "log_version": LOG_VERSION, "judged_by": {"model": "m"}}
    rec = parse(ResultRecord, json.dumps(line), "line")
    assert rec.log_version == LOG_VERSION and rec.line()["judged_by"] == {"model": "m"}
    with pytest.raises(MovieMemError, match="newer than this moviemem supports"):
        parse(ResultRecord, json.dumps({**line, "log_version": LOG_VERSION + 1}), "line")
    run = _copy(tmp_path, "run")
    header = json.loads((run / "run.json").read_text())
    del header["format"]
    (run / "run.json").write_text(json.dumps(header))
    with pytest.raises(MovieMemError, match=r"run\.json: format: field required; the file was edited or is damaged$"):
        read_header(run)


def test_a_resumed_version_1_run_keeps_its_old_lines_as_they_were(tmp_path: Path) -> None:
    run = _copy(tmp_path, "run")
    before = _lines(run)
    res = run_bench(_v1_bench(), ["closed-book", "hybrid", "agent"], [ScriptedBackbone(["x"], cycle=True)], run,
                    answerer=_answer, retry_invalid=True)
    assert res.spend.calls == 2 and res.answered == res.total == 18  # the agent's invalid and unfit items, asked again
    after = _lines(run)
    kept = [line for line in before if line["status"] == "answered"]
    assert after[: len(kept)] == kept  # rewritten without them: still version-1 lines, key for key
    assert [line["log_version"] for line in after[len(kept):]] == [LOG_VERSION] * 2
    assert read_header(run).log_version == LOG_VERSION and read_header(run).created == "2026-11-27T22:35:12Z"


def test_the_inspector_templates_ship_inside_the_package() -> None:
    """The templates load from the package's own folder, which the wheel fills from pyproject's package-data
    (test_audit_data builds and installs that wheel)."""
    import moviemem

    pkg = Path(moviemem.__file__).parent
    assert inspector.TEMPLATES == pkg / "eval" / "templates"
    names = sorted(p.name for p in inspector.TEMPLATES.iterdir())
    assert names == ["base.html.j2", "compare.html.j2", "film.html.j2", "index.html.j2", "item.html.j2"]
    assert sorted(inspector._env().list_templates()) == names
    shipped = tomllib.loads((pkg / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["moviemem.eval"]
    assert all(any(fnmatch.fnmatch(f"templates/{n}", glob) for glob in shipped) for n in names)
