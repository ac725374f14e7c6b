"""lib.ingest waits on another process's film lock visibly and for a bounded time (issue 18, item 17)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from filelock import FileLock

from moviemem import Library
from moviemem.foundation.errors import FilmBusyError


def test_python_api_logs_the_wait_and_gives_up_after_its_timeout(tmp_path: Path, caplog) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n")
    lib = Library(tmp_path / "lib")
    with FileLock(str(lib.store.locks_dir() / "a.lock")), caplog.at_level(logging.WARNING, logger="moviemem.ingest"):
        t0 = time.monotonic()
        with pytest.raises(FilmBusyError, match="still being ingested by another process after 1 s"):
            lib.ingest_text(srt, lock_wait_s=1.0)
        assert time.monotonic() - t0 < 10
    assert any("being ingested by another process; waiting up to 1 s" in r.getMessage() for r in caplog.records)
    assert lib.ingest_text(srt).utterances()  # free again
