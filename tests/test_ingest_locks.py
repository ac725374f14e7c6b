"""lib.ingest waits on another process's film lock visibly and for a bounded time (issue 18, item 17)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from filelock import FileLock
from racing import race

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


def _srt(path: Path, line: str) -> Path:
    path.write_text(f"1\n00:00:05,000 --> 00:00:07,000\n{line}\n")
    return path


def test_two_processes_ingesting_one_new_id_from_two_sources_one_fails(tmp_path: Path) -> None:
    """Issue 54 item 4: each process read the library before taking the film's lock (its tables then stayed at
    that version), so the second one saw no film under the id and silently replaced the first one's."""
    lib = Library(tmp_path / "lib")
    lib.ingest_text(_srt(tmp_path / "other.srt", "Another film."), film_id="other")  # the tables exist before both start
    held = FileLock(str(lib.store.locks_dir() / "k.lock"))
    held.acquire()  # both processes read the library, then wait on the lock: the race, every time
    commands = [(name, ["ingest", "--library", str(tmp_path / "lib"), "--text", str(_srt(tmp_path / f"{name}.srt", line)),
                        "--film-id", "k"]) for name, line in (("a", "Where is Williams?"), ("b", "Hello there."))]
    codes, texts = race(held, commands, "being ingested by another process", tmp_path)
    assert sorted(codes) == [0, 2], texts
    failed = texts[codes.index(2)]
    errors = [ln for ln in failed.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "film id 'k' already holds another source" in errors[0], failed
    kept = "Where is Williams?" if codes[0] == 0 else "Hello there."
    assert [u.text for u in Library(tmp_path / "lib").film("k").utterances()] == [kept]
