"""Export and import one film's memory as a tar bundle (Parquet tables + JPEGs + manifest).

No pickle anywhere: a bundle from a stranger is data, not code. Import appends the stage rows
last in one write, so a half-finished import is invisible and a rerun cleans it up.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from .._version import __version__
from ..errors import MovieMemError
from ..files import atomic_path
from .schema import ROW_MODELS, TABLE_OWNER, Row, check_film_id, vector_columns
from .store import MemoryStore, sql_str

FORMAT = "moviemem-film"
FORMAT_VERSION = 1
# table -> its column naming a picture under the film's media folder (bundled on export; checked and renamed on import)
MEDIA_COLUMNS = {"frames": "image", "faces": "thumbnail"}


def export_film(store: MemoryStore, film_id: str, out: Path) -> Path:
    check_film_id(film_id)
    runs = store.finished_runs(film_id)
    if "probe" not in runs:
        raise MovieMemError(f"film {film_id!r} is not in the library at {store.uri}")
    out = Path(out)
    if out.is_dir():
        raise MovieMemError(f"{out} is a directory; give a .tar file path")
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


MAX_MEMBER_BYTES = 512 * 2**20  # one table or one still
MAX_BUNDLE_BYTES = 4 * 2**30  # everything a bundle unpacks to


class _Reader:
    """Members of an untrusted tar: regular files only, each and all together under a size bound."""

    def __init__(self, tar: tarfile.TarFile, bundle: Path):
        self.tar, self.bundle, self.total = tar, bundle, 0

    def fail(self, why: str) -> MovieMemError:
        return MovieMemError(f"cannot import {self.bundle}: {why}")

    def read(self, name: str) -> bytes:
        try:
            member = self.tar.getmember(name)
        except KeyError:
            raise self.fail(f"member {name!r} is missing") from None
        if not member.isreg():
            raise self.fail(f"member {name!r} is not a regular file (links are refused)")
        self.total += member.size
        if member.size > MAX_MEMBER_BYTES or self.total > MAX_BUNDLE_BYTES:
            raise self.fail(f"member {name!r} is too large ({member.size} bytes; at most {MAX_MEMBER_BYTES >> 20} MB "
                            f"each and {MAX_BUNDLE_BYTES >> 30} GB in all)")
        with self.tar.extractfile(member) as f:  # type: ignore[union-attr]  # a regular member (checked above) always has a file
            return f.read(MAX_MEMBER_BYTES + 1)


def import_film(store: MemoryStore, bundle: Path, *, film_id: str | None = None, replace: bool = False) -> str:
    """Import a bundle. Everything is read and checked before anything is written (tables,
    row models, every frame path inside the film's own bundled media), so a bad bundle fails in
    one line and leaves nothing behind."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise MovieMemError(f"cannot import {bundle}: no such file")
    try:
        tar = tarfile.open(bundle, "r")
    except (tarfile.TarError, OSError, EOFError):
        raise MovieMemError(f"cannot import {bundle}: not a tar bundle") from None
    with tar:
        reader = _Reader(tar, bundle)
        try:
            manifest = json.loads(reader.read("manifest.json"))
        except (MovieMemError, ValueError, tarfile.TarError, OSError, EOFError):
            raise reader.fail("no valid manifest.json (not a moviemem film bundle)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            got = manifest if not isinstance(manifest, dict) else f"{manifest.get('format')} v{manifest.get('version')}"
            raise reader.fail(f"unsupported bundle format {got}")
        metas, media = manifest.get("tables"), manifest.get("media")
        if not isinstance(metas, dict) or not isinstance(media, list) or "stages" not in metas:
            raise reader.fail("the manifest needs a 'tables' object with a stages table and a 'media' list")
        src_id = check_film_id(str(manifest.get("film_id")))
        dst_id = check_film_id(film_id or src_id)
        rows = _checked_rows(reader, store, metas, media, src_id, dst_id)
        stills = _checked_media(reader, media, src_id)
        with FileLock(str(store.locks_dir() / f"{dst_id}.lock")):
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


def _checked_media(reader: _Reader, media: list[Any], src_id: str) -> list[tuple[tuple[str, ...], bytes]]:
    """(path parts below the film's media folder, bytes) of each bundled still."""
    out = []
    for rel in media:
        parts = Path(str(rel)).parts
        if len(parts) < 3 or parts[0] != "media" or parts[1] != src_id or ".." in parts or Path(str(rel)).is_absolute():
            raise reader.fail(f"unexpected media path {rel!r}")
        out.append((parts[2:], reader.read(f"media/{rel}")))
    return out


def _checked_rows(reader: _Reader, store: MemoryStore, metas: dict[str, Any], media: list[Any], src_id: str,
                  dst_id: str) -> dict[str, list[Row]]:
    """Every table parsed and every row validated; frame images must be bundled media of the film."""
    bundled = {str(m) for m in media}
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
        try:
            rows[table] = _rows(table, data, src_id, dst_id)
        except (ValueError, TypeError) as exc:
            raise reader.fail(f"table {table!r} has a bad row ({str(exc).splitlines()[0][:160]})") from None
    return rows


def _rows(table: str, data: pa.Table, src_id: str, dst_id: str) -> list[Row]:
    model = ROW_MODELS[table]
    rows = []
    for rec in data.to_pylist():
        rec["film_id"] = dst_id
        column = MEDIA_COLUMNS.get(table)
        if column and src_id != dst_id and rec.get(column):
            rec[column] = rec[column].replace(f"media/{src_id}/", f"media/{dst_id}/", 1)
        rows.append(model.model_validate(rec))
    return rows
