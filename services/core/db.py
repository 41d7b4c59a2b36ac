"""PostgreSQL adapter: the pool, schema migrations, and the read model's queries.

The tables are a projection of the log. The projector is their only writer; the gateway
reads them. Migrations run at start under an advisory lock, so several pods can start at
once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from services.core.errors import Unavailable
from services.core.settings import Settings

MIGRATIONS: list[str] = [
    """
    CREATE TABLE jobs (
        id              text PRIMARY KEY,
        status          text NOT NULL,
        attempts        integer NOT NULL DEFAULT 0,
        error_type      text,
        error_message   text,
        object_key      text,
        bytes           bigint,
        pages           integer,
        render_ms       integer,
        webhook_url     text,
        idempotency_key text,
        input           jsonb,
        created_at      timestamptz NOT NULL,
        started_at      timestamptz,
        finished_at     timestamptz,
        updated_at      timestamptz NOT NULL DEFAULT now(),
        last_seq        bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX jobs_unfinished ON jobs (status, updated_at)
        WHERE status IN ('queued', 'running');
    CREATE TABLE job_events (
        stream_seq  bigint PRIMARY KEY,
        job_id      text NOT NULL,
        type        text NOT NULL,
        at          timestamptz NOT NULL,
        body        jsonb NOT NULL
    );
    CREATE INDEX job_events_job ON job_events (job_id, stream_seq);
    CREATE TABLE webhook_deliveries (
        stream_seq   bigint PRIMARY KEY,
        job_id       text NOT NULL,
        webhook_id   text NOT NULL,
        attempt      integer NOT NULL,
        url          text NOT NULL,
        outcome      text NOT NULL,
        status_code  integer,
        error        text,
        latency_ms   integer NOT NULL,
        at           timestamptz NOT NULL
    );
    CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, stream_seq);
    """,
    # 2: how often the reconciler re-published a stalled job. Not derivable from the log:
    # a rebuild of the projection starts it again at 0.
    """
    ALTER TABLE jobs ADD COLUMN redrives integer NOT NULL DEFAULT 0;
    """,
]

_LOCK_ID = 0x7072657373  # "press": serialises migrations across pods
RECONCILER_LOCK_ID = 0x7265636F6E  # "recon": one projector sweeps for stalled jobs at a time


async def migrate(conn: asyncpg.Connection) -> None:
    """Apply every migration not yet applied, in order, each in its own transaction."""
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_ID)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY)"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, sql in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations VALUES ($1)", version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_ID)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


@contextlib.asynccontextmanager
async def open_pool(settings: Settings, *, size: int = 4) -> AsyncIterator[asyncpg.Pool]:
    """A migrated pool; closed on exit. Raises `Unavailable` if Postgres cannot be reached."""
    try:
        pool = await asyncpg.create_pool(
            settings.database_url,
            min_size=1,
            max_size=size,
            init=_init_connection,
            command_timeout=10,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise Unavailable(f"cannot reach PostgreSQL: {exc}") from exc
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        yield pool
    finally:
        await pool.close()


async def get_job(pool: asyncpg.Pool, job_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    return dict(row) if row is not None else None


async def webhook_deliveries(pool: asyncpg.Pool, job_id: str) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT * FROM webhook_deliveries WHERE job_id = $1 ORDER BY stream_seq", job_id
    )
    return [dict(r) for r in rows]


async def job_status(pool: asyncpg.Pool, job_id: str) -> str | None:
    """The projected status of a job, None if the projection has no row for it."""
    status: str | None = await pool.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)
    return status


async def try_advisory_lock(conn: asyncpg.Connection, key: int) -> bool:
    """Take a session-level advisory lock if nobody holds it; never waits."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", key))


async def advisory_unlock(conn: asyncpg.Connection, key: int) -> None:
    await conn.execute("SELECT pg_advisory_unlock($1)", key)


async def stale_jobs(
    conn: asyncpg.Connection, older_than: float, limit: int
) -> list[dict[str, Any]]:
    """Unfinished jobs (`queued`, `running`) not updated for `older_than` seconds, oldest
    first; the predicate matches the partial index `jobs_unfinished`."""
    rows = await conn.fetch(
        """
        SELECT id, status, attempts, input, webhook_url, idempotency_key, created_at, redrives
        FROM jobs
        WHERE status IN ('queued', 'running')
          AND updated_at < now() - make_interval(secs => $1::double precision)
        ORDER BY updated_at
        LIMIT $2
        """,
        older_than,
        limit,
    )
    return [dict(r) for r in rows]


async def mark_redriven(conn: asyncpg.Connection, job_id: str, redrives: int) -> None:
    """Record the `redrives`-th re-drive and restart the job's staleness clock."""
    await conn.execute(
        "UPDATE jobs SET redrives = GREATEST(redrives, $2::integer), updated_at = now() "
        "WHERE id = $1",
        job_id,
        redrives,
    )


async def touch_job(conn: asyncpg.Connection, job_id: str) -> None:
    """Restart a job's staleness clock (its terminal event is on the way to the projector)."""
    await conn.execute("UPDATE jobs SET updated_at = now() WHERE id = $1", job_id)


async def truncate_projection(pool: asyncpg.Pool) -> None:
    """Empty every table the projector derives from the log (schema_migrations stays)."""
    await pool.execute("TRUNCATE jobs, job_events, webhook_deliveries")


async def projection_counts(pool: asyncpg.Pool) -> tuple[int, dict[str, int]]:
    """(events recorded, jobs by status) of the projection."""
    events = int(await pool.fetchval("SELECT count(*) FROM job_events"))
    rows = await pool.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status ORDER BY 1")
    return events, {r["status"]: int(r["n"]) for r in rows}
