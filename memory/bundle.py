"""Export and import one film's memory as a tar bundle (Parquet tables + JPEGs + manifest).

No pickle anywhere: a bundle from a stranger is data, not code. Import appends the stage rows
last in one write, so a half-finished import is invisible and a rerun cleans it up.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
import lzma
import math
import tarfile
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from ..foundation._version import __version__
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_path
from ..foundation.limits import MAX_BUNDLE_BYTES, MAX_MANIFEST_BYTES, MAX_MEMBER_BYTES, MAX_MEMBERS, MAX_STILL_BYTES
from ..foundation.timefmt import check_time
from .schema import ROW_MODELS, TABLE_OWNER, PassageRow, Row, check_film_id, vector_columns
from .store import MemoryStore, sql_str

log = logging.getLogger(__name__)
FORMAT = "moviemem-film"
FORMAT_VERSION = 1
# table -> its column naming a picture under the film's media folder (bundled on export; checked and renamed on import)
MEDIA_COLUMNS = {"frames": "image", "faces": "thumbnail"}
JPEG_MAGIC = b"\xff\xd8\xff"


def export_film(store: MemoryStore, film_id: str, out: Path) -> Path:
    check_film_id(film_id)
    runs = store.finished_runs(film_id)
    if "probe" not in runs:
        raise MovieMemError(f"film {film_id!r} is not in the library at {store.uri}")
    out = Path(out)
    if out.is_dir():
        raise MovieMemError(f"{out} is a directory; give a .tar file path")
    if out.is_symlink() or (out.exists() and not out.is_file()):  # /dev/full would be replaced by a tar
        raise MovieMemError(f"{out} is not a regular file; an export replaces only a file (give a .tar file path)")
    manifest: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "moviemem": __version__, "film_id": film_id,
                      "tables": {}, "media": []}
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp, tarfile.open(tmp, "w") as tar:  # the user's export: 0644 like any file they write
        for table, stage in [*TABLE_OWNER.items(), ("stages", "")]:
            if table == "stages":
                where = f"film_id = {sql_str(film_id)} AND run_id IN ({', '.join(sql_str(r.run_id) for r in runs.values())})"
            else:
                run = runs.get(stage)
                if run is None or run.status != "done":
                    continue
                where = f"film_id = {sql_str(film_id)} AND run_id = {sql_str(run.run_id)}"
            data = store.query(table, where)
            if data.num_rows == 0:
                continue
            buf = io.BytesIO()
            pq.write_table(data, buf)
            _add_bytes(tar, f"tables/{table}.parquet", buf.getvalue())
            dim = store.vector_dim(table) if vector_columns(ROW_MODELS[table]) else None
            manifest["tables"][table] = {"file": f"tables/{table}.parquet", "rows": data.num_rows, "vector_dim": dim}
            media_column = MEDIA_COLUMNS.get(table)
            if media_column:
                rels: list[str] = [r for r in data.column(media_column).to_pylist() if r]
                for rel in rels:
                    src = store.root / rel
                    if src.is_file():
                        tar.add(str(src), arcname=f"media/{rel}")
                        manifest["media"].append(rel)
        _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
    return out


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


MAX_STILL_SIDE = 8192  # pixels a side of one still: frames are 512 by default (setting frame_max_side), 8K at most
# a compressed bundle may unpack to at most this many times the compressed bytes read so far, plus
# EXPANSION_SLACK: Parquet and JPEG are compressed already (an export gzips to ~1.1x), while a
# compression bomb expands hundreds of times
MAX_EXPANSION = 20
EXPANSION_SLACK = 16 * 2**20
_CHUNK = 2**20
# what a damaged tar or compressed stream raises while it is read
_UNREADABLE = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)
# what tarfile unpacks, by the stream's first bytes
_COMPRESSED: dict[bytes, Callable[[BinaryIO], io.BufferedIOBase]] = {
    b"\x1f\x8b": lambda f: gzip.GzipFile(fileobj=f, mode="rb"),
    b"BZh": lambda f: bz2.BZ2File(f),
    b"\xfd7zXZ\x00": lambda f: lzma.LZMAFile(f),
}


class _Inflated:
    """The unpacked stream of a compressed bundle, refused (MovieMemError) as soon as it grows past
    MAX_BUNDLE_BYTES or past MAX_EXPANSION times the compressed bytes read so far: a bomb fails
    while it is being read, after a few megabytes, never after it was unpacked into memory."""

    def __init__(self, raw: BinaryIO, unpack: Callable[[BinaryIO], io.BufferedIOBase], fail: Callable[[str], MovieMemError]):
        self.raw, self.inner, self.fail = raw, unpack(raw), fail

    def tell(self) -> int:
        return self.inner.tell()

    def read(self, size: int | None = -1) -> bytes:
        parts, want = [], -1 if size is None else size
        while want:
            part = self.inner.read(_CHUNK if want < 0 else min(want, _CHUNK))
            if not part:
                break
            self._check()
            parts.append(part)
            want = want - len(part) if want > 0 else want
        return b"".join(parts)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            raise io.UnsupportedOperation("a compressed bundle is read from its start")
        target = offset + (self.tell() if whence == io.SEEK_CUR else 0)
        if target <= self.tell():  # unpacked again from the start, up to where the checks already passed
            return self.inner.seek(target)
        while self.tell() < target and self.read(min(target - self.tell(), _CHUNK)):
            pass
        return self.tell()

    def _check(self) -> None:
        unpacked, packed = self.inner.tell(), self.raw.tell()
        if unpacked > MAX_BUNDLE_BYTES:
            raise self.fail(f"it unpacks to more than {MAX_BUNDLE_BYTES >> 20:,} MB")
        if unpacked > MAX_EXPANSION * packed + EXPANSION_SLACK:
            raise self.fail(f"{packed:,} compressed bytes unpack to over {unpacked:,} (more than {MAX_EXPANSION} times: "
                            "a compression bomb, or not a moviemem export)")


def _open_tar(bundle: Path, fail: Callable[[str], MovieMemError], stack: ExitStack) -> tarfile.TarFile:
    """The bundle as a tar, plain or compressed (gzip, bzip2, xz), its unpacked size bounded while it is read."""
    raw = stack.enter_context(open(bundle, "rb"))
    head = raw.read(6)
    raw.seek(0)
    unpack = next((u for magic, u in _COMPRESSED.items() if head.startswith(magic)), None)
    fileobj: BinaryIO = raw if unpack is None else cast(BinaryIO, _Inflated(raw, unpack, fail))
    try:
        return stack.enter_context(tarfile.open(fileobj=fileobj, mode="r:"))
    except _UNREADABLE:
        raise fail("not a tar bundle") from None


class _Reader:
    """Members of an untrusted tar: regular files only, at most MAX_MEMBERS, each and all together
    under a size bound."""

    def __init__(self, bundle: Path, stack: ExitStack):
        self.bundle, self.total = bundle, 0
        tar = _open_tar(bundle, self.fail, stack)
        self.members: dict[str, tarfile.TarInfo] = {}
        try:
            for member in tar:
                if len(self.members) >= MAX_MEMBERS:
                    raise self.fail(f"it holds more than {MAX_MEMBERS:,} members")
                self.members[member.name] = member
        except _UNREADABLE as exc:
            raise self.fail(f"not a tar bundle ({type(exc).__name__})") from None
        self.tar = tar

    def fail(self, why: str) -> MovieMemError:
        return MovieMemError(f"cannot import {self.bundle}: {why}")

    def member(self, name: str, limit: int | None = None) -> tarfile.TarInfo:
        """The member `name`, a regular file under the bounds (`limit`: MAX_MEMBER_BYTES), counted towards the total."""
        limit = limit or MAX_MEMBER_BYTES
        member = self.members.get(name)
        if member is None:
            raise self.fail(f"member {name!r} is missing")
        if not member.isreg():
            raise self.fail(f"member {name!r} is not a regular file (links are refused)")
        self.total += member.size
        if member.size > limit or self.total > MAX_BUNDLE_BYTES:
            raise self.fail(f"member {name!r} is too large ({member.size} bytes; at most {limit >> 20} MB "
                            f"each and {MAX_BUNDLE_BYTES >> 30} GB in all)")
        return member

    def read(self, member: tarfile.TarInfo | str) -> bytes:
        if isinstance(member, str):
            member = self.member(member)
        f = self.tar.extractfile(member)
        if f is None:  # member() refuses all but regular files, which always have one
            raise self.fail(f"member {member.name!r} is not a regular file")
        with f:
            return f.read(member.size)


def import_film(store: MemoryStore, bundle: Path, *, film_id: str | None = None, replace: bool = False) -> str:
    """Import a bundle. Everything is read and checked before anything is written (tables,
    row models, every frame path inside the film's own bundled media), so a bad bundle fails in
    one line and leaves nothing behind."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise MovieMemError(f"cannot import {bundle}: no such file")
    with ExitStack() as stack:
        reader = _Reader(bundle, stack)
        size = getattr(reader.members.get("manifest.json"), "size", 0)
        if size > MAX_MANIFEST_BYTES:  # said before it is read
            raise reader.fail(f"its manifest.json holds {size:,} bytes (at most {MAX_MANIFEST_BYTES >> 20} MiB)")
        try:
            manifest = json.loads(reader.read("manifest.json"))
        except (MovieMemError, ValueError, RecursionError, tarfile.TarError, OSError, EOFError):
            raise reader.fail("no valid manifest.json (not a moviemem film bundle)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            got = manifest if not isinstance(manifest, dict) else f"{manifest.get('format')} v{manifest.get('version')}"
            raise reader.fail(f"unsupported bundle format {got}")
        metas, media = manifest.get("tables"), manifest.get("media")
        if not isinstance(metas, dict) or not isinstance(media, list) or "stages" not in metas:
            raise reader.fail("the manifest needs a 'tables' object with a stages table and a 'media' list")
        src_id = check_film_id(str(manifest.get("film_id")))
        dst_id = check_film_id(film_id or src_id)
        rows, used = _checked_rows(reader, store, metas, media, src_id, dst_id)
        _check_references(reader, rows)
        stills = _checked_media(reader, media, src_id, used)
        with _film_lock(store, dst_id):
            # the id is checked as of now, under the lock (as ingest does): a table opened before it (the
            # vector check above) stays at that version and would hide an import that finished meanwhile
            store.reopen()
            if store.film_row(dst_id) is not None and not replace:
                raise MovieMemError(f"film {dst_id!r} is already in the library; pass --replace or --film-id")
            store.delete_film(dst_id)  # also removes what an interrupted import left
            try:
                for parts, data in stills:
                    dest = store.media_dir(dst_id).joinpath(*parts)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(data)
                for table, table_rows in rows.items():
                    if table != "stages":
                        store.append(table_rows)
                store.append(rows["stages"])  # last: until it is written the film is not visible
            except BaseException:
                store.delete_film(dst_id)
                raise
    return dst_id


@contextmanager
def _film_lock(store: MemoryStore, film_id: str) -> Iterator[None]:
    """Hold the film's lock (the one ingest takes); a wait for another process's write is said, not silent."""
    lock = FileLock(str(store.locks_dir() / f"{film_id}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("film %r is being written by another process; waiting for it to finish", film_id)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _checked_media(reader: _Reader, media: list[Any], src_id: str, used: set[str]) -> list[tuple[tuple[str, ...], bytes]]:
    """(path parts below the film's media folder, bytes) of each bundled still: one a row names
    (`used`), a JPEG (what the frames and faces stages write) of at most MAX_STILL_BYTES."""
    out = []
    for rel in media:
        parts = Path(str(rel)).parts
        if len(parts) < 3 or parts[0] != "media" or parts[1] != src_id or ".." in parts or Path(str(rel)).is_absolute():
            raise reader.fail(f"unexpected media path {rel!r}")
        member = reader.member(f"media/{rel}", MAX_STILL_BYTES)
        if rel not in used:
            raise reader.fail(f"media {rel!r} is no image of any row (only the stills rows use are imported)")
        data = reader.read(member)
        if Path(rel).suffix.lower() not in (".jpg", ".jpeg") or not data.startswith(JPEG_MAGIC):
            raise reader.fail(f"media {rel!r} is not a JPEG still")
        _check_still_size(reader, rel, data)
        out.append((parts[2:], data))
    return out


def _check_still_size(reader: _Reader, rel: Any, data: bytes) -> None:
    """A still's header names at most MAX_STILL_SIDE pixels a side: a 16x16 JPEG whose header claims
    30000x30000 is a decompression bomb for every later reader (the inspector, a notebook). Only the
    header is read here, nothing is decoded."""
    from PIL import Image

    try:
        with warnings.catch_warnings():  # PIL's own bomb warning: the cap below says it in one line
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
                width, height = im.size
    except Image.DecompressionBombError:  # over twice PIL's own limit: it names no size
        raise reader.fail(f"media {rel!r} claims over {2 * (Image.MAX_IMAGE_PIXELS or 0):,} pixels; a still has at most "
                          f"{MAX_STILL_SIDE} a side") from None
    except (OSError, SyntaxError, ValueError):  # PIL's parsers raise these on a damaged header
        raise reader.fail(f"media {rel!r} is not a readable JPEG still") from None
    if max(width, height) > MAX_STILL_SIDE:
        raise reader.fail(f"media {rel!r} claims {width}x{height} pixels; a still has at most {MAX_STILL_SIDE} a side")


def _checked_rows(reader: _Reader, store: MemoryStore, metas: dict[str, Any], media: list[Any], src_id: str,
                  dst_id: str) -> tuple[dict[str, list[Row]], set[str]]:
    """Every table parsed and every row validated; frame images must be bundled media of the film.
    Also returns the images the rows name."""
    bundled, used = {str(m) for m in media}, set()
    rows: dict[str, list[Row]] = {}
    for table, meta in metas.items():
        if table not in ROW_MODELS or not isinstance(meta, dict):
            raise reader.fail(f"unknown table {table!r}")
        have = store.vector_dim(table)
        if meta.get("vector_dim") and have and have != meta["vector_dim"]:
            raise reader.fail(f"its {table} vectors are {meta['vector_dim']}-d, this library's are {have}-d")
        try:
            data = pq.read_table(io.BytesIO(reader.read(str(meta.get("file")))))
        except (pa.ArrowException, OSError) as exc:
            raise reader.fail(f"table {table!r} is not valid Parquet ({str(exc).splitlines()[0][:120]})") from None
        column = MEDIA_COLUMNS.get(table)
        for image in data.column(column).to_pylist() if column in data.column_names else []:
            if image and image not in bundled:  # a face row without a crop has ""
                raise reader.fail(f"{table} image {image!r} is not a still of film {src_id!r} in the bundle")
            used.add(image)
        try:
            rows[table] = _rows(table, data, src_id, dst_id)
        except (ValueError, TypeError, MovieMemError) as exc:
            raise reader.fail(f"table {table!r} has a bad row ({str(exc).splitlines()[0][:160]})") from None
    return rows, used


# (table, first field, last field or None) -> (the table the fields index, its index field); -1 is "none"
# where the field's default is -1. A passage's rows index the utterances or captions its `source` names.
REFERENCES: dict[tuple[str, str, str | None], tuple[str, str]] = {
    ("segments", "first_shot", "last_shot"): ("shots", "shot_idx"),
    ("voices", "utt_idx", None): ("utterances", "idx"),
    ("speaker_lines", "utt_idx", None): ("utterances", "idx"),
}
PASSAGE_SOURCES = {"utterance": "utterances", "caption": "captions"}


def _check_references(reader: _Reader, rows: dict[str, list[Row]]) -> None:
    """Every row index a table holds names a row of the table it points into, and a range runs forward
    and spans no more indices than that table has rows: a passage's `last_row` of 10**12 would have a
    loop over its range walk a trillion rows, even with an utterance of idx 10**12 at its far end."""
    indices: dict[tuple[str, str], set[int]] = {}

    def known(table: str, field: str) -> set[int]:
        if (table, field) not in indices:
            indices[table, field] = {int(getattr(r, field)) for r in rows.get(table, [])}
        return indices[table, field]

    def check(table: str, i: int, first: int, last: int, target: str, field: str, none_ok: bool) -> None:
        if none_ok and first == last == -1:
            return
        have = known(target, field)
        span = f"{first}" if first == last else f"{first}..{last}"
        if first not in have or last not in have or first > last:
            raise reader.fail(f"{table} row {i} points at {target} {span}, which the bundle's {target} table does not hold")
        if last - first >= len(rows.get(target, [])):
            raise reader.fail(f"{table} row {i} spans {target} {span}, more indices than the bundle's "
                              f"{len(rows.get(target, []))} {target} rows")

    for (table, first_field, last_field), (target, field) in REFERENCES.items():
        for i, row in enumerate(rows.get(table, [])):
            first = int(getattr(row, first_field))
            check(table, i, first, int(getattr(row, last_field)) if last_field else first, target, field,
                  none_ok=last_field is not None)
    for i, row in enumerate(rows.get("passages", [])):
        passage = cast(PassageRow, row)
        source = PASSAGE_SOURCES.get(passage.source)
        if source is None:
            raise reader.fail(f"passages row {i} has the unknown source {passage.source[:40]!r}")
        check("passages", i, passage.first_row, passage.last_row, source, "idx", none_ok=False)


def _rows(table: str, data: pa.Table, src_id: str, dst_id: str) -> list[Row]:
    model = ROW_MODELS[table]
    rows = []
    for i, rec in enumerate(data.to_pylist()):
        rec["film_id"] = dst_id
        if table == "films":
            rec["source_path"] = ""  # an imported film's source is not on this machine: a path there names a stranger's file
        column = MEDIA_COLUMNS.get(table)
        if column and src_id != dst_id and rec.get(column):
            rec[column] = rec[column].replace(f"media/{src_id}/", f"media/{dst_id}/", 1)
        rows.append(_checked_values(model.model_validate(rec), f"row {i}:"))
    return rows


# the fields that hold a film time or a length of film time, and those that hold JSON text
TIME_FIELDS = frozenset({"start", "end", "t", "duration_s", "screen_time_s", "first_s", "last_s"})
JSON_FIELDS = frozenset({"meta", "params", "words", "turns", "args", "links"})


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    if not math.isfinite(value := float(text)):
        raise ValueError(f"{text} is not a finite number")
    return value


def _checked_values(row: Row, where: str) -> Row:
    """A bundle's row holds only what an ingest writes: every time passes the check an ingested cue
    passes (timefmt.check_time), an end is not before its start, every other number and vector
    value is finite and JSON text has no NaN or Infinity, so no output made from it can either."""
    values = dict(row)
    for name, value in values.items():
        if name in TIME_FIELDS:
            check_time(value, f"{where} {name}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where} {name} {value!r} is not a finite number")
        elif isinstance(value, list) and value and isinstance(value[0], float) and not all(map(math.isfinite, value)):
            raise ValueError(f"{where} {name} holds a value that is not a finite number")
        elif name in JSON_FIELDS and value:
            try:
                json.loads(value, parse_constant=_no_constant, parse_float=_finite)
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"{where} {name} is not valid JSON ({exc})") from None
    if values.get("end", 0.0) < values.get("start", 0.0):
        raise ValueError(f"{where} end {values['end']!r} is before its start {values['start']!r}")
    return row
