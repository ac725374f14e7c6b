"""A film's searchable rows of one table as one small file beside its media: the first query on
a film reads it in about a millisecond instead of asking LanceDB (4-6 ms a table, 20-30 ms for a
film's four text tables on this machine's two cores).

The pack holds the rows' ids, times and text (what word search indexes) and their vectors as int8 codes (a quarter of
float32), compressed with zstd: about 0.4 KB a row. Search always scores the codes, whether they came from the pack or were just
quantized from LanceDB's rows, so a film's first query and its later ones rank alike. The cosine
error of int8 codes on unit vectors is about 5e-4, far below the gaps between ranked rows that
matter (measured on the MF² dev set: same recall; see bench/retrieval_latency.py for speed).

Packs are written at the end of every ingest (search.write_packs) and, for a film that has none
(an older library, an imported bundle), by its first query. A pack is named by the format version,
the table and the film's finished run (`base`), so a rerun stage gets a new pack; the old ones are
removed when it is written. Rows of a finished run never
change (store.py's protocol), so a pack is never stale. Local libraries only.

A pack ends with the SHA-256 of the Arrow file before it, checked on every read: a pack damaged on
disk (a flipped byte may still parse, as other numbers or a crash deep in numpy) is bypassed, said
on stderr, and rewritten from LanceDB, never trusted.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ..foundation.files import atomic_path

log = logging.getLogger(__name__)
PACK_VERSION = 3  # 2: every row of the run, a row without a vector holding zero codes (word search finds it); 3: a checksum
DIGEST = hashlib.sha256().digest_size
FOLDER = "search"


def quantize(matrix: np.ndarray) -> np.ndarray:
    """Rows to int8 codes, each row scaled so that its largest component is +-127. Cosine does
    not depend on a row's length, so the scale is not kept."""
    peak = np.abs(matrix).max(axis=1, keepdims=True) if len(matrix) else np.ones((0, 1), dtype=np.float32)
    return np.clip(np.rint(matrix * (127.0 / np.where(peak > 0, peak, 1.0))), -127, 127).astype(np.int8)


def unit_rows(codes: np.ndarray) -> np.ndarray:
    """The codes as float32 rows of unit length (what search scores)."""
    matrix = codes.astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    matrix *= (1.0 / np.where(norms > 0, norms, 1.0))[:, None]
    return matrix


def buffer_view(arr: pa.Array, dtype: type[np.number]) -> np.ndarray:
    """A null-free primitive Arrow array as numpy, on its own buffer: Array.to_numpy imports pandas
    (0.15 s), which `moviemem search` otherwise never needs."""
    if arr.null_count:
        raise ValueError(f"a search pack column of {arr.type} holds nulls")
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def pack_path(media_dir: Path, table: str, base: str) -> Path:
    digest = hashlib.sha256(f"{PACK_VERSION}|{table}|{base}".encode()).hexdigest()[:20]
    return media_dir / FOLDER / f"{table}-{digest}.arrow"


def read(path: Path, columns: list[str]) -> tuple[pa.Table, np.ndarray] | None:
    """The rows (`columns`, without codes) and the codes of a pack; None when there is none. A pack
    that does not verify against its checksum, cannot be read, or holds other columns than these and
    int8 codes, is reported (stderr) and treated as missing: it is rewritten from LanceDB."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        _bypassed(path, str(exc))
        return None
    body, digest = blob[:-DIGEST], blob[-DIGEST:]
    if len(blob) <= DIGEST or hashlib.sha256(body).digest() != digest:
        _bypassed(path, "its checksum does not match: the file is damaged")
        return None
    try:
        data = ipc.open_file(pa.py_buffer(body)).read_all()
        if why := _unlike(data.schema, columns):
            _bypassed(path, why)
            return None
        # every size and offset checked against its buffers before any of them reaches numpy or a string
        # read: the IPC reader checks the file's layout, not the values of offsets inside its buffers
        data.validate(full=True)
        if any(data.column(t).null_count for t in ("start", "end")):  # search reads times as plain float64 buffers
            _bypassed(path, "times that are null")
            return None
        codes_col = data.column("codes").combine_chunks()
        dim = codes_col.type.list_size
        codes = buffer_view(codes_col.flatten(), np.int8).reshape(len(data), dim)
        rows = data.drop_columns(["codes"]).combine_chunks()
    except (pa.ArrowException, ValueError, OSError) as exc:  # a damaged IPC layout is an OSError ("Invalid IPC file")
        _bypassed(path, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        return None
    return rows, codes


def _bypassed(path: Path, why: str) -> None:
    log.warning("search pack %s unreadable (%s); bypassed: reading the rows from LanceDB and rewriting it", path, why)


def _unlike(schema: pa.Schema, columns: list[str]) -> str | None:
    """What makes a pack's schema other than the one `write` gives `columns` rows, or None."""
    if schema.names != [*columns, "codes"]:
        return f"columns {schema.names}, not {[*columns, 'codes']}"
    codes = schema.field("codes").type
    if not pa.types.is_fixed_size_list(codes) or codes.value_type != pa.int8():
        return f"codes of {codes}, not fixed-size lists of int8"
    if not all(pa.types.is_floating(schema.field(t).type) for t in ("start", "end")):
        return "times that are not floating-point numbers"
    return None


def write(path: Path, rows: pa.Table, codes: np.ndarray) -> None:
    """Write a pack atomically and remove the table's older packs for this film. A library that
    cannot be written to keeps answering from LanceDB (logged once per pack)."""
    dim = codes.shape[1] if codes.ndim == 2 else 0
    flat = pa.array(codes.reshape(-1), type=pa.int8())
    data = rows.append_column("codes", pa.FixedSizeListArray.from_arrays(flat, dim))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # 0644 (atomic_path's default): readable like the library's other files
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, data.schema, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
            writer.write_table(data)
        body = sink.getvalue().to_pybytes()
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            fh.write(body + hashlib.sha256(body).digest())
        table = path.name.rsplit("-", 1)[0]
        for old in path.parent.glob(f"{table}-*.arrow"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("search pack %s not written (%s); this film's first query reads LanceDB", path, exc)
