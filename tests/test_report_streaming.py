"""`report` and `compare --html` read a run a line at a time and hold a few configurations' records (the report's
tables), an item's (the inspector) or a pair (the compare page) at once, never the log's (issue 62: 1.0 and 1.2 GB
on a 200 MB log); and what they write is what they wrote before, to the byte."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moviemem.bench.report_memory import BACKBONES, POLICIES, write_run
from moviemem.eval import report
from moviemem.eval.compare import Side
from moviemem.eval.compare_page import write_compare_page
from moviemem.eval.log import read_log
from moviemem.eval.records import CallLine, ResultRecord

# sha256 of each output of the run below as written before the streaming change (commit cc8f516), the run folder's
# path read as RUN. A deliberate change to a template or a table changes them: write them again then.
BEFORE = {
    "report.md": "82f662a5767a61a4dbc588c77993961bbf8d1e6bda387307b74aa1047f6cdfd8",
    "inspector/index.html": "1708fc4df5f9bc0d4c9346ea0d6fc69fbe46b2c0b9d757fbec222470f538b66e",
    "inspector/items/1.html": "b8824004a5a2a34ca5cd843a13e70f98f2b559d58d6a7f81ae4c8161d2e0ca47",
    "inspector/items/8.html": "156cca8f5ae57c34627aad86dde07f12df3e39e9e4b49dbf4256011dbd8bfb1a",
    "compare.html": "a5d6f7664bdd95de9c8d4fb2c6152e320d1996e20fd06bef05b897e9d444cd17",
}


class Live:
    """How many values of a type are alive at once at most, counted as they are made and let go."""

    def __init__(self) -> None:
        self.now = self.most = 0

    def made(self, value: Any) -> Any:
        self.now += 1
        self.most = max(self.most, self.now)
        weakref.finalize(value, self._gone)
        return value

    def _gone(self) -> None:
        self.now -= 1

    def take(self) -> int:
        """The most since the last take."""
        most, self.most = self.most, self.now
        return most


def _counted(mp: pytest.MonkeyPatch, kind: type[Any], method: str) -> Live:
    live = Live()
    original: Callable[..., Any] = getattr(kind, method)
    mp.setattr(kind, method, classmethod(lambda cls, *a, **k: live.made(original(*a, **k))))
    return live


def outputs(run: Path, page: Path) -> dict[str, str]:
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes().replace(str(run).encode(), b"RUN")).hexdigest()

    return {name: digest(page if name == "compare.html" else run / name) for name in BEFORE}


def write_all(run: Path) -> None:
    report.write_report(run)
    write_compare_page(Side(run, POLICIES[0], BACKBONES[0]), Side(run, POLICIES[1], BACKBONES[0]), run / "compare.html")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("streaming") / "run"
    write_run(run, 0.3)  # 6 configurations, calls as sent, a few invalid answers and prompts too long for the context
    return run


@pytest.fixture(scope="module")
def most(run: Path) -> dict[str, int]:
    """report, its inspector and the compare page written once, with the most records and calls alive in each."""
    out: dict[str, int] = {}
    with pytest.MonkeyPatch.context() as mp:
        records, calls = _counted(mp, ResultRecord, "model_validate_json"), _counted(mp, CallLine, "model_validate")
        inspector = report.write_inspector

        def timed_inspector(run_dir: Path) -> Path:
            out["report"], out["report calls"] = records.take(), calls.take()
            try:
                return inspector(run_dir)
            finally:
                out["inspector"], out["inspector calls"] = records.take(), calls.take()

        mp.setattr(report, "write_inspector", timed_inspector)
        write_all(run)
        out["page"], out["page calls"] = records.take(), calls.take()
    return out


def test_the_outputs_are_those_written_before(run: Path, most: dict[str, int]) -> None:
    assert outputs(run, run / "compare.html") == BEFORE


def test_no_output_holds_the_logs_records(run: Path, most: dict[str, int]) -> None:
    records = read_log(run)
    configs = len({r.config for r in records})
    per_config = len(records) // configs
    assert configs == 6 and per_config >= 10
    # the report's summary and tables read one configuration's records at a time; read whole, every record was alive
    assert most["report"] <= per_config + 1 < len(records) / 3
    assert most["inspector"] <= 2 * configs  # an item's records, read again by their offsets for its page
    assert most["page"] <= 3  # the pair being shown (and the record being read to pick its configuration)
    # the calls as sent are indexed by where each starts and read for the page that shows them: one answer's
    assert most["inspector calls"] <= 2 and most["report calls"] == most["page calls"] == 0
