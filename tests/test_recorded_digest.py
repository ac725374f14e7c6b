"""A file's digest recorded with its stamp: a new process trusts it while the file is unchanged (issue 65:
the weights' SHA-256 in a saved state's key cost every process a GB read)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import moviemem.foundation.digests as digests


def _counting(monkeypatch) -> list[str]:
    hashed: list[str] = []
    real = digests.file_sha256

    def counted(path):
        hashed.append(str(path))
        digests._digest.cache_clear()  # each call stands for a new process
        return real(path)

    monkeypatch.setattr(digests, "file_sha256", counted)
    return hashed


def test_a_recorded_digest_is_trusted_until_the_file_changes(tmp_path: Path, monkeypatch) -> None:
    weights, record = tmp_path / "w.gguf", tmp_path / "states" / "model-digests.json"
    weights.write_bytes(b"a" * 4096)
    hashed = _counting(monkeypatch)
    first = digests.recorded_sha256(weights, record)
    assert first == hashlib.sha256(b"a" * 4096).hexdigest() and len(hashed) == 1
    assert json.loads(record.read_text())[str(weights.resolve())]["sha256"] == first
    assert digests.recorded_sha256(weights, record) == first and len(hashed) == 1  # trusted: not read again
    # rewritten in place with the same size and its old modification time: the change time still differs
    st = weights.stat()
    weights.write_bytes(b"b" * 4096)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert digests.recorded_sha256(weights, record) == hashlib.sha256(b"b" * 4096).hexdigest() and len(hashed) == 2


def test_a_damaged_or_unwritable_record_costs_a_hash_not_an_error(tmp_path: Path, monkeypatch) -> None:
    weights, record = tmp_path / "w.gguf", tmp_path / "model-digests.json"
    weights.write_bytes(b"x" * 100)
    record.write_text("{not json")
    hashed = _counting(monkeypatch)
    assert digests.recorded_sha256(weights, record) == hashlib.sha256(b"x" * 100).hexdigest() and len(hashed) == 1
    assert str(weights.resolve()) in json.loads(record.read_text())  # rebuilt
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert digests.recorded_sha256(weights, blocked / "model-digests.json") == hashlib.sha256(b"x" * 100).hexdigest()
