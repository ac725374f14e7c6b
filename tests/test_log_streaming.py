"""compare and the report's summaries read a large results.jsonl a line at a time and keep only what they
need (issue 54: 8 GB of RSS for a 1.5 GB log)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moviemem.bench.log_memory import write_run
from moviemem.eval.compare import Side, compare
from moviemem.eval.log import log_grid
from moviemem.eval.run import RunLog


def _peak(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated by a second call: the first imports what it uses."""
    fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_compare_and_summaries_hold_a_fraction_of_the_log(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, 3, seed=1)
    write_run(b, 3, seed=2)
    size = (a / "results.jsonl").stat().st_size
    [row] = compare(Side(a), Side(b))
    assert row.n > 400 and row.unmatched == 0  # the runs share ids, films and questions: every item paired
    # read whole, the log took 6.8 (compare) and 4.8 (summarise) times its size here; streamed, 0.5 and 1.7
    assert _peak(lambda: compare(Side(a), Side(b))) < size
    assert _peak(lambda: RunLog(a).rows) < 3 * size
    _, grid = log_grid(a, slim=True)
    [recs] = grid.values()
    assert all(not ans.evidence and all(s.kind == "parse" for s in ans.trace)
               for r in recs for ans in r.answers.values())
    _, full = log_grid(a)
    assert all(ans.evidence for r in next(iter(full.values())) for ans in r.answers.values())  # the inspector's


def test_the_inspector_reads_each_items_records_alone(tmp_path: Path) -> None:
    """`report` writes the inspector by default: its index reads lean records and each item's page reads
    that item's records by their place in the log, so the whole log is never held (read whole: 6.6 times
    the log's size here; streamed: 2.5)."""
    from moviemem.eval.inspector import write_inspector

    a = tmp_path / "a"
    write_run(a, 1, seed=1)
    size = (a / "results.jsonl").stat().st_size
    assert _peak(lambda: write_inspector(a)) < 4 * size
    page = (a / "inspector" / "items" / "1.html").read_text()
    assert "Where is the key 0?" in page and "<svg" in page  # the page still shows its evidence on the timeline
