"""Export and import one film's memory as a tar bundle (Parquet tables + JPEGs + manifest).

No pickle anywhere: a bundle from a stranger is data, not code. Import appends the stage rows
last in one write, so a half-finished import is invisible and a rerun cleans it up.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from .. import __version__
from ..errors import MovieMemError
from .schema import ROW_MODELS, check_film_id, vector_columns
from .store import MemoryStore, sql_str
from .view import _OWNER

FORMAT = "moviemem-film"
FORMAT_VERSION = 1


def export_film(store: MemoryStore, film_id: str, out: Path) -> Path:
    check_film_id(film_id)
    runs = store.finished_runs(film_id)
    if "probe" not in runs:
        raise MovieMemError(f"film {film_id!r} is not in the library at {store.uri}")
    out = Path(out)
    if out.is_dir():
        raise MovieMemError(f"{out} is a directory; give a .tar file path")
    manifest: dict = {"format": FORMAT, "version": FORMAT_VERSION, "moviemem": __version__, "film_id": film_id,
                      "tables": {}, "media": []}
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w") as tar:
            for table, stage in [*_OWNER.items(), ("stages", None)]:
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
                if table == "frames":
                    for rel in data.column("image").to_pylist():
                        src = store.root / rel
                        if src.is_file():
                            tar.add(str(src), arcname=f"media/{rel}")
                            manifest["media"].append(rel)
            _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def import_film(store: MemoryStore, bundle: Path, *, film_id: str | None = None, replace: bool = False) -> str:
    bundle = Path(bundle)
    if not bundle.is_file():
        raise MovieMemError(f"cannot import {bundle}: no such file")
    try:
        tar = tarfile.open(bundle, "r")
    except (tarfile.TarError, OSError):
        raise MovieMemError(f"cannot import {bundle}: not a tar bundle") from None
    with tar:
        try:
            manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        except (KeyError, AttributeError, ValueError):
            raise MovieMemError(f"cannot import {bundle}: no valid manifest.json (not a moviemem film bundle)") from None
        if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            raise MovieMemError(f"cannot import {bundle}: unsupported bundle format {manifest.get('format')} v{manifest.get('version')}")
        src_id = check_film_id(manifest["film_id"])
        dst_id = check_film_id(film_id or src_id)
        for table, meta in manifest["tables"].items():
            if table not in ROW_MODELS:
                raise MovieMemError(f"cannot import {bundle}: unknown table {table!r}")
            have = store.vector_dim(table)
            if meta.get("vector_dim") and have and have != meta["vector_dim"]:
                raise MovieMemError(f"cannot import {bundle}: its {table} vectors are {meta['vector_dim']}-d, this library's are {have}-d")
        with FileLock(str(store.locks_dir() / f"{dst_id}.lock")):
            if store.film_row(dst_id) is not None:
                if not replace:
                    raise MovieMemError(f"film {dst_id!r} is already in the library; pass --replace or --film-id")
            store.delete_film(dst_id)  # also removes what an interrupted import left
            tables = {t: pq.read_table(io.BytesIO(tar.extractfile(m["file"]).read())) for t, m in manifest["tables"].items()}  # type: ignore[union-attr]
            for rel in manifest["media"]:
                member = tar.getmember(f"media/{rel}")
                parts = Path(rel).parts
                if len(parts) < 3 or parts[0] != "media" or parts[1] != src_id or ".." in parts:
                    raise MovieMemError(f"cannot import {bundle}: unexpected media path {rel!r}")
                dest = store.media_dir(dst_id).joinpath(*parts[2:])
                dest.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src:  # type: ignore[union-attr]
                    dest.write_bytes(src.read())
            for table, data in tables.items():
                if table == "stages":
                    continue
                _append(store, table, data, src_id, dst_id)
            _append(store, "stages", tables["stages"], src_id, dst_id)
    return dst_id


def _append(store: MemoryStore, table: str, data: pa.Table, src_id: str, dst_id: str) -> None:
    model = ROW_MODELS[table]
    rows = []
    for rec in data.to_pylist():
        rec["film_id"] = dst_id
        if table == "frames" and src_id != dst_id:
            rec["image"] = rec["image"].replace(f"media/{src_id}/", f"media/{dst_id}/", 1)
        rows.append(model.model_validate(rec))
    store.append(rows)
