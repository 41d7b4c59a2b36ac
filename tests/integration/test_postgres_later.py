"""A process that starts before PostgreSQL answers: its pool waits, then migrates.

Verifies, with a real PostgreSQL reached through a Unix socket that does not exist yet
(then a relay to the real server's socket appears there): `db.open_pool(lazy=True)`
yields a pool not yet migrated instead of failing; its watch is down and the pool refuses
at once (`Unavailable`); once PostgreSQL answers, the watch migrates the fresh database
and runs `prepare` once on the probe's connection before it says up, and the pool then
serves the migrated schema; a `prepare` that fails keeps the pool refused and is tried
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

from services.core.database import db
from services.core.model.errors import Unavailable
from services.core.runtime.settings import Settings
from tests.conftest import eventually

SOCKET = ".s.PGSQL.5432"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def relay(into: Path, real: Path) -> AsyncIterator[None]:
    """A Unix socket in `into` whose connections are passed to PostgreSQL's in `real`."""

    async def joined(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(real / SOCKET)
        await asyncio.gather(
            _pipe(reader, upstream_writer), _pipe(upstream_reader, writer),
            return_exceptions=True,
        )  # fmt: skip

    server = await asyncio.start_unix_server(joined, path=str(into / SOCKET))
    try:
        yield
    finally:
        server.close()


def _socket_dir(url: str) -> Path:
    return Path(parse_qs(urlsplit(url).query)["host"][0])


async def test_a_pool_opened_before_postgres_answers_migrates_and_serves_once_it_does(
    settings: Settings, tmp_path: Path
) -> None:
    real = _socket_dir(settings.database_url)
    later = tmp_path / "later"
    later.mkdir()
    url = settings.database_url.replace(f"host={real}", f"host={later}")
    waiting = dataclasses.replace(settings, database_url=url, database_timeout=2.0)
    prepared: list[int] = []

    async def prepare(conn: asyncpg.Connection) -> None:
        prepared.append(await conn.fetchval("SELECT count(*) FROM schema_migrations"))
        if len(prepared) == 1:
            raise Unavailable("not this time")

    async with (
        db.open_pool(waiting, size=2, lazy=True) as pool,
        db.watched(pool, waiting, prepare) as watch,
    ):
        assert not pool.migrated and not watch.up
        started = time.monotonic()
        with pytest.raises(Unavailable, match="PostgreSQL is not answering"):
            await pool.fetchval("SELECT 1")
        assert time.monotonic() - started < 0.5  # refused at once, not after a timeout

        async with relay(later, real):
            await eventually(lambda: watch.up, 20, "the watch up once PostgreSQL answers")
            assert len(prepared) == 2 and prepared[1] > 0, prepared  # migrated before
            tables = await pool.fetchval("SELECT count(*) FROM pg_tables WHERE tablename = 'jobs'")
            assert tables == 1
