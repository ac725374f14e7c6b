"""foundation/files.py: a target is whole or absent, a failed write leaves the old file and no temporary,
permissions are the ones asked for, and racing writers never show a reader half a file."""

from __future__ import annotations

import stat
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from moviemem.foundation.errors import MovieMemError
from moviemem.foundation.files import PRIVATE, PUBLIC, atomic_path, atomic_write, atomic_write_text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_the_content_with_the_promised_mode(tmp_path):
    public = atomic_write_text(tmp_path / "a.json", "{\"é\": 1}\n")
    private = atomic_write(tmp_path / "b.bin", lambda f: f.write(b"\x00\x01"), mode=PRIVATE)
    assert public.read_text(encoding="utf-8") == "{\"é\": 1}\n" and _mode(public) == PUBLIC == 0o644
    assert private.read_bytes() == b"\x00\x01" and _mode(private) == PRIVATE == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.bin"]  # no temporary left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "pack.arrow"
    target.write_bytes(b"old")

    def half(f: BinaryIO) -> None:
        f.write(b"new but not all of it")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(target, half)
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:  # an interrupt cleans up too
        tmp.write_bytes(b"new")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["pack.arrow"]


def test_a_failed_first_write_creates_nothing(tmp_path):
    with pytest.raises(ValueError), atomic_path(tmp_path / "clip.mp4", suffix=".mp4") as tmp:
        raise ValueError("ffmpeg failed")
    assert list(tmp_path.iterdir()) == []
    assert not tmp.exists()


def test_atomic_path_gives_a_fresh_hidden_file_beside_the_target_with_the_suffix(tmp_path):
    target = tmp_path / "clip.mp4"
    with atomic_path(target, suffix=".mp4") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".clip.mp4.") and tmp.suffix == ".mp4"
        assert tmp.exists() and tmp.stat().st_size == 0 and not target.exists()
        tmp.write_bytes(b"video")
    assert target.read_bytes() == b"video" and not tmp.exists() and _mode(target) == 0o644


def test_a_missing_folder_is_an_error_that_names_the_target(tmp_path):
    target = tmp_path / "no" / "such.txt"
    with pytest.raises(MovieMemError, match=f"cannot write {target}: No such file or directory") as caught:
        atomic_write_text(target, "x")
    assert isinstance(caught.value, OSError)  # code that tolerates an unwritable folder still catches it


def test_racing_writers_never_show_a_reader_half_a_file(tmp_path):
    target = tmp_path / "catalog.json"
    chunk = 64 << 10
    payloads = [bytes([65 + i]) * (8 * chunk) for i in range(4)]
    atomic_write(target, lambda f: f.write(payloads[0]))
    seen: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(payload: bytes) -> None:
        def chunked(f: BinaryIO) -> None:  # many small writes: a plain write would expose a prefix
            for i in range(0, len(payload), chunk):
                f.write(payload[i:i + chunk])
                f.flush()
        try:
            for _ in range(25):
                atomic_write(target, chunked)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(target.read_bytes())
            except OSError as exc:  # never missing: the rename replaces it in one step
                errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert seen and all(data in payloads for data in seen)
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.json"]
