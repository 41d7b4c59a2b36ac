"""Statuses and error types are enum types in PostgreSQL, holding what the code's enums
hold: a status or error type no member has cannot be stored, an error type a release adds
is added by `migrate` alone, and an upgrade keeps every row (an unknown stored error type
becomes `internal`, as answers already showed it)."""

from __future__ import annotations

import asyncpg
import pytest

from services.core.database import db
from services.core.database.schema import MIGRATIONS
from services.core.model.errortypes import ErrorType
from services.core.model.status import BatchStatus, JobStatus


async def labels(conn: asyncpg.Connection, sql_type: str) -> list[str]:
    query = f"SELECT unnest(enum_range(NULL::{sql_type}))::text AS v"
    return [row["v"] for row in await conn.fetch(query)]


async def test_the_sql_enum_types_hold_the_code_s_members(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await db.migrate(conn)
        assert await labels(conn, "job_status") == [str(s) for s in JobStatus]
        assert await labels(conn, "batch_status") == [str(s) for s in BatchStatus]
        assert set(await labels(conn, "error_type")) == {str(t) for t in ErrorType}
        with pytest.raises(asyncpg.InvalidTextRepresentationError):
            await conn.execute(
                "INSERT INTO jobs (id, status, created_at) VALUES ('j', 'finished', now())"
            )
        with pytest.raises(asyncpg.InvalidTextRepresentationError):
            await conn.execute(
                "INSERT INTO jobs (id, status, error_type, created_at) "
                "VALUES ('j', 'failed', 'oops', now())"
            )
    finally:
        await conn.close()


async def test_an_error_type_the_code_gained_is_added_by_migrate(database_url: str) -> None:
    """A type made before the code's newest member (as an older release left it) gets the
    member on the next `migrate`, and migrating again changes nothing."""
    conn = await asyncpg.connect(database_url)
    try:
        await db.migrate(conn)
        newest = list(ErrorType)[-1]
        await conn.execute(
            "DELETE FROM pg_enum WHERE enumtypid = 'error_type'::regtype AND enumlabel = $1",
            str(newest),
        )
        assert str(newest) not in await labels(conn, "error_type")
        await db.migrate(conn)
        await db.migrate(conn)
        assert set(await labels(conn, "error_type")) == {str(t) for t in ErrorType}
    finally:
        await conn.close()


async def test_an_upgrade_keeps_every_row_and_names_unknown_error_types_internal(
    database_url: str,
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY)")
        for version, sql in enumerate(MIGRATIONS[: db.ENUMS_SINCE - 1], start=1):
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1)", version)
        await conn.execute(
            "INSERT INTO jobs (id, tenant_id, status, error_type, created_at) VALUES "
            "('a', 't', 'failed', 'timeout', now()), ('b', 't', 'failed', 'retired_type', now()),"
            " ('c', 't', 'running', NULL, now())"
        )
        await db.migrate(conn)
        rows = await conn.fetch("SELECT id, status::text, error_type::text FROM jobs ORDER BY id")
        assert [tuple(row) for row in rows] == [
            ("a", "failed", "timeout"),
            ("b", "failed", "internal"),
            ("c", "running", None),
        ]
        indexes = "SELECT count(*) FROM pg_indexes WHERE indexname = ANY($1::text[])"
        made_again = ["jobs_unfinished", "batches_unfinished"]
        assert await conn.fetchval(indexes, made_again) == 2
    finally:
        await conn.close()
