"""The reconciler's queries: unfinished jobs with no news for a while, the batches that
have such items, and the marks a re-drive leaves; one projector at a time sweeps, under
a session-level advisory lock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import asyncpg
import msgspec

from services.core.database.db import map_db_errors, typed
from services.core.model.status import JobStatus

RECONCILER_LOCK_ID = 0x7265636F6E  # "recon": one projector sweeps for stalled jobs at a time


class StaleJob(msgspec.Struct, kw_only=True, frozen=True):
    """An unfinished job with no news for a while, with what it takes to re-drive it."""

    id: str
    tenant_id: str
    status: JobStatus
    attempts: int
    input: dict[str, Any] | None
    webhook_url: str | None
    idempotency_key: str | None
    created_at: dt.datetime
    redrives: int


@map_db_errors()
async def try_advisory_lock(conn: asyncpg.Connection, key: int) -> bool:
    """Take a session-level advisory lock if nobody holds it; never waits."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", key))


@map_db_errors()
async def advisory_unlock(conn: asyncpg.Connection, key: int) -> None:
    await conn.execute("SELECT pg_advisory_unlock($1)", key)


@map_db_errors()
async def stale_jobs(
    conn: asyncpg.Connection,
    older_than: float,
    limit: int,
    *,
    up_to_seq: int | None = None,
    batch_id: str | None = None,
    tenant_floors: Mapping[str, int] | None = None,
) -> list[StaleJob]:
    """Unfinished jobs (`queued`, `running`) not updated for `older_than` seconds, oldest
    first; with `up_to_seq`, only those whose last event is at or below that stream
    sequence (the others may still be waiting in the log), and a tenant in
    `tenant_floors` by its own sequence there instead. Single jobs by default, the items
    of `batch_id` with it: each kind waits in its own durable, so each is judged by its own
    durable's floor. The predicate matches the partial index `jobs_unfinished`."""
    floors = tenant_floors or {}
    rows = await conn.fetch(
        """
        SELECT id, tenant_id, status, attempts, input, webhook_url, idempotency_key, created_at,
               redrives
        FROM jobs
        LEFT JOIN unnest($5::text[], $6::bigint[]) AS lane(tenant, floor)
               ON lane.tenant = jobs.tenant_id
        WHERE status IN ('queued', 'running')
          AND updated_at < now() - make_interval(secs => $1::double precision)
          AND (COALESCE(lane.floor, $3::bigint) IS NULL
               OR last_seq <= COALESCE(lane.floor, $3::bigint))
          AND batch_id IS NOT DISTINCT FROM $4::text
        ORDER BY updated_at
        LIMIT $2
        """,
        older_than,
        limit,
        up_to_seq,
        batch_id,
        list(floors),
        list(floors.values()),
    )
    return [typed(r, StaleJob) for r in rows]


@map_db_errors()
async def batches_with_stale_items(
    conn: asyncpg.Connection, older_than: float, limit: int
) -> list[str]:
    """Batches that are meant to move (`queued` or `running`, not `paused` and not ended)
    with items not updated for `older_than` seconds. A paused batch's items wait by
    request, however long: they are never stale."""
    rows = await conn.fetch(
        """
        SELECT DISTINCT j.batch_id
        FROM jobs AS j JOIN batches AS b ON b.id = j.batch_id
        WHERE j.status IN ('queued', 'running')
          AND j.updated_at < now() - make_interval(secs => $1::double precision)
          AND b.status IN ('queued', 'running')
        LIMIT $2
        """,
        older_than,
        limit,
    )
    return [str(r["batch_id"]) for r in rows]


@map_db_errors()
async def mark_redriven(conn: asyncpg.Connection, job_id: str, redrives: int) -> None:
    """Record the `redrives`-th re-drive and restart the job's staleness clock."""
    await conn.execute(
        "UPDATE jobs SET redrives = GREATEST(redrives, $2::integer), updated_at = now() "
        "WHERE id = $1",
        job_id,
        redrives,
    )


@map_db_errors()
async def touch_job(conn: asyncpg.Connection, job_id: str) -> None:
    """Restart a job's staleness clock (its terminal event is on the way to the projector)."""
    await conn.execute("UPDATE jobs SET updated_at = now() WHERE id = $1", job_id)
