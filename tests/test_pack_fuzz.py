"""Issue 62 (low): a search pack with flipped bytes must never crash the process. The pack's checksum
stops a flip made by the disk; these tests flip bytes and then fix the checksum (what a hand-made pack
can do), so the Arrow reader and the numpy views behind it see damaged sizes and offsets. Each batch runs
in a child process under faulthandler: a native crash (SIGSEGV) is a failed test with its traceback,
not a dead test run. `MOVIEMEM_FUZZ_PACKS` sets how many damaged packs a run reads (longer on demand)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from moviemem.memory import vector_pack

COLUMNS = ["idx", "start", "end", "text", "source", "first_row", "last_row"]
COUNT = int(os.environ.get("MOVIEMEM_FUZZ_PACKS", "400"))

CHILD = r"""
import faulthandler, hashlib, random, sys
from pathlib import Path
faulthandler.enable()
import numpy as np
from moviemem.memory import vector_pack
from moviemem.memory.search import _seconds

good, out, first, count = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
columns = sys.argv[5].split(",")
body = good[:-vector_pack.DIGEST]
read = 0
for seed in range(first, first + count):
    rng = random.Random(seed)
    damaged = bytearray(body)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        at = rng.randrange(len(damaged))
        damaged[at] = rng.choice((damaged[at] ^ (1 << rng.randrange(8)), rng.randrange(256), 0, 255))
    out.write_bytes(bytes(damaged) + hashlib.sha256(damaged).digest())
    print(seed, flush=True)  # the seed that crashed is the last one printed
    got = vector_pack.read(out, columns)
    if got is None:
        continue
    rows, codes = got
    read += 1
    # what search does with a pack's rows (memory/search.py): times, text, unit vectors
    _seconds(rows, "start"), _seconds(rows, "end")
    for name in rows.column_names:
        rows.column(name).to_pylist()
    vector_pack.unit_rows(codes).sum()
print("done", read, flush=True)
"""


def _pack(tmp_path: Path, n: int = 40, dim: int = 24, compressed: bool = True) -> Path:
    """A pack as `write` makes it (zstd), or the same rows uncompressed (a pack made by hand): there a
    flipped byte lands in offsets and sizes themselves, not in a compressed stream that fails to unpack."""
    rng = np.random.default_rng(0)
    rows = pa.table({"idx": pa.array(range(n), pa.int64()), "start": pa.array(np.arange(n) * 2.0),
                     "end": pa.array(np.arange(n) * 2.0 + 1.5), "text": [f"line {i} of the film, said twice" for i in range(n)],
                     "source": ["utterance"] * n, "first_row": pa.array(range(n), pa.int64()),
                     "last_row": pa.array(range(1, n + 1), pa.int64())})
    path = tmp_path / "search" / "passages-0.arrow"
    codes = vector_pack.quantize(rng.standard_normal((n, dim)).astype(np.float32))
    vector_pack.write(path, rows, codes)
    if not compressed:
        data = rows.append_column("codes", pa.FixedSizeListArray.from_arrays(pa.array(codes.reshape(-1), pa.int8()), dim))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, data.schema) as writer:
            writer.write_table(data)
        body = sink.getvalue().to_pybytes()
        path.write_bytes(body + hashlib.sha256(body).digest())
    assert vector_pack.read(path, COLUMNS) is not None
    return path


@pytest.mark.parametrize("compressed", [True, False])
def test_a_pack_with_flipped_bytes_and_a_fixed_checksum_never_crashes_the_reader(tmp_path: Path, compressed: bool) -> None:
    good = _pack(tmp_path, compressed=compressed)
    done = subprocess.run([sys.executable, "-c", CHILD, str(good), str(tmp_path / "damaged.arrow"), "0", str(COUNT),
                           ",".join(COLUMNS)], capture_output=True, text=True, timeout=600)
    last = (done.stdout.strip().splitlines() or ["?"])[-1]
    assert done.returncode == 0, f"crashed (rc {done.returncode}) reading the pack of seed {last}:\n{done.stderr[-3000:]}"
    assert last.startswith("done"), done.stdout[-500:]


def test_a_pack_whose_columns_hold_other_types_or_bad_offsets_is_bypassed(tmp_path: Path, caplog) -> None:
    """Sizes and offsets are validated before any buffer reaches numpy: a pack whose text offsets
    point past its data is bypassed (logged), not read."""
    good = _pack(tmp_path)
    rows, codes = vector_pack.read(good, COLUMNS)  # type: ignore[misc]
    text = rows.column("text").combine_chunks()
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32).copy()
    offsets[5] = 10**6  # past the end of the characters
    bad_text = pa.StringArray.from_buffers(len(text), pa.py_buffer(offsets.tobytes()), text.buffers()[2])
    bad = rows.set_column(rows.column_names.index("text"), "text", bad_text)
    path = tmp_path / "search" / "passages-1.arrow"
    flat = pa.array(codes.reshape(-1), type=pa.int8())
    data = bad.append_column("codes", pa.FixedSizeListArray.from_arrays(flat, codes.shape[1]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, data.schema) as writer:
        writer.write_table(data)
    body = sink.getvalue().to_pybytes()
    path.write_bytes(body + hashlib.sha256(body).digest())
    assert vector_pack.read(path, COLUMNS) is None
    assert "unreadable" in caplog.text and "bypassed" in caplog.text

