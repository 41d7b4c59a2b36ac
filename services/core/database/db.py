"""PostgreSQL adapter: the pool, applying the schema's migrations (`schema.py`), and the
read model's queries.

The job tables (`jobs`, `job_events`, `webhook_deliveries`) are a projection of the log:
the projector is their only writer; the gateway reads them. The template tables
(`templates`, `template_versions`) are configuration, not job events: the gateway writes
them directly, and a rebuild of the projection leaves them alone. So does it leave
`batch_webhook_deliveries`, which the notifier writes directly (no log event carries a
batch's webhook attempts). Migrations run at start under an advisory lock, so several
pods can start at once.

Size: it holds the pool with the migrations, and the read model's queries with their row
Structs; the queries and their rows are the part that would split out next.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any, TypeVar

import asyncpg
import msgspec

from services.core.database.pgwatch import Prepare, Watch
from services.core.database.schema import MIGRATIONS
from services.core.model.errors import PressroomError, Refused, Unavailable
from services.core.model.errortypes import ErrorType
from services.core.model.status import BatchStatus, JobStatus
from services.core.runtime import lifecycle
from services.core.runtime.boundary import ErrorMap, describe
from services.core.runtime.settings import Settings


class JobState(msgspec.Struct, kw_only=True, frozen=True):
    """What every job has, even one only the log knows yet (`queued`, nothing else)."""

    id: str
    tenant_id: str
    status: JobStatus
    object_key: str | None = None
    webhook_url: str | None = None


class JobRow(JobState, kw_only=True, frozen=True):
    """A row of `jobs`: one job as the projection holds it."""

    attempts: int
    error_type: str | None
    error_message: str | None
    bytes: int | None
    pages: int | None
    render_ms: int | None
    idempotency_key: str | None
    input: dict[str, Any] | None  # what the reconciler re-drives it from
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    updated_at: dt.datetime
    last_seq: int
    redrives: int
    batch_id: str | None = None
    item_index: int | None = None


class BatchRow(msgspec.Struct, kw_only=True, frozen=True):
    """A row of `batches`: one batch and its items' counts as the projection holds them."""

    id: str
    tenant_id: str
    status: BatchStatus
    total: int
    done: int
    failed: int
    cancelled: int
    output: str
    object_key: str | None
    bytes: int | None
    error_type: str | None
    error_message: str | None
    webhook_url: str | None
    idempotency_key: str | None
    template_id: str | None
    template_version: int | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    updated_at: dt.datetime
    last_seq: int
    progress_webhooks: bool = False


class WebhookDelivery(msgspec.Struct, kw_only=True, frozen=True):
    """A row of `webhook_deliveries`: one attempt to send a job's webhook."""

    stream_seq: int
    job_id: str
    webhook_id: str
    attempt: int
    url: str
    outcome: str  # delivered, retrying or gave_up
    status_code: int | None
    error: str | None
    latency_ms: int
    at: dt.datetime


class BatchWebhookAttempt(msgspec.Struct, kw_only=True, frozen=True):
    """One attempt to send a batch's webhook, as the notifier records it."""

    batch_id: str
    tenant_id: str
    webhook_id: str
    event: str  # batch.done, batch.failed, batch.cancelled or batch.progress
    attempt: int
    url: str
    outcome: str  # delivered, retrying or gave_up
    status_code: int | None
    error: str | None
    latency_ms: int


class BatchWebhookDelivery(BatchWebhookAttempt, kw_only=True, frozen=True):
    """A row of `batch_webhook_deliveries`: a recorded attempt, and when (PostgreSQL's
    clock: the notifier writes it, not the projector)."""

    id: int
    at: dt.datetime


_Row = TypeVar("_Row", bound=msgspec.Struct)


def typed(record: asyncpg.Record, kind: type[_Row]) -> _Row:
    """A row as `kind` (columns it does not name are ignored)."""
    return msgspec.convert(dict(record), kind)


async def fetch_typed(pool: asyncpg.Pool, kind: type[_Row], query: str, *args: Any) -> list[_Row]:
    """Every row `query` returns, each as `kind` (a listing's rows)."""
    return [typed(record, kind) for record in await pool.fetch(query, *args)]


DB_DOWN = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # asyncpg 0.32 raises this ("cannot switch to state 11; another operation (2) is in
    # progress") from a pooled connection the server terminated while it sat idle.
    asyncpg.InternalClientError,
    asyncio.TimeoutError,
)
"""What asyncpg raises when the server is down, restarting, dropped the connection or is
too slow to answer."""

REFUSED = (
    asyncpg.DataError,  # SQLSTATE class 22, and arguments asyncpg cannot encode
    asyncpg.IntegrityConstraintViolationError,  # 23
    asyncpg.ProgramLimitExceededError,  # 54
)
"""What PostgreSQL answers when it refuses the data itself (`Refused`): the same statement
fails the same way until something changes on the server's side."""


def map_db_errors(context: str = "PostgreSQL") -> ErrorMap:
    """`with`, `async with` or a decorator: asyncpg's errors inside become `Refused` (the
    data) or `Unavailable` (everything else in `DB_DOWN`), "{context}: {type}: {text}".
    Every function here that talks to PostgreSQL is wrapped in it."""

    def translate(exc: Exception) -> PressroomError | None:
        if isinstance(exc, REFUSED):
            return Refused(f"{context}: {describe(exc)}")
        if isinstance(exc, DB_DOWN):
            return Unavailable(f"{context}: {describe(exc)}")
        return None

    return ErrorMap(translate)


_LOCK_ID = 0x7072657373  # "press": serialises migrations across pods


@map_db_errors()
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
        if len(MIGRATIONS) >= ENUMS_SINCE:
            await _add_enum_values(conn)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_ID)


ENUMS_SINCE = 11
"""The migration that made the enum types of `ENUM_TYPES`."""

ENUM_TYPES: dict[str, type[StrEnum]] = {
    "job_status": JobStatus,
    "batch_status": BatchStatus,
    "error_type": ErrorType,
}
"""Each SQL enum type and the code's enum it holds the values of."""


async def _add_enum_values(conn: asyncpg.Connection) -> None:
    """Add to each SQL enum type the values its code enum has gained since (an error type
    a release adds): the type follows the code without a migration per member. Values are
    only ever added; one the code dropped stays readable in old rows."""
    for sql_type, members in ENUM_TYPES.items():
        query = f"SELECT unnest(enum_range(NULL::{sql_type}))::text AS v"
        have = {r["v"] for r in await conn.fetch(query)}
        for member in members:
            if member.value not in have:
                literal = member.value.replace("'", "''")
                await conn.execute(f"ALTER TYPE {sql_type} ADD VALUE IF NOT EXISTS '{literal}'")


async def _init_connection(conn: asyncpg.Connection) -> None:
    # msgspec's encoder is cheaper than json.dumps (docs/benchmarks.md); the projector
    # writes a lot of jsonb.
    await conn.set_type_codec(
        "jsonb", encoder=_encode_json, decoder=msgspec.json.decode, schema="pg_catalog"
    )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release a connection without asyncpg's reset query (`RESET ALL`, `UNLISTEN *`, …):
    one round trip per query saved. Nothing here leaves session state behind (`migrate`
    releases its advisory lock itself) and asyncpg still rolls back an open transaction."""


def _encode_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class Pool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg has no type hints
    """asyncpg's pool, as `create_pool` makes it, with two bounds on taking a connection:
    at most `acquire_timeout` seconds of waiting for one, and, once a `pgwatch.Watch` is
    set, none at all while the watch says PostgreSQL is down (`Unavailable` at once)."""

    watch: Watch | None = None
    acquire_timeout: float | None = None
    migrated = True  # False for a lazy pool made while PostgreSQL was down (`open_pool`)

    def acquire(self, *, timeout: float | None = None) -> Any:
        if self.watch is not None:
            self.watch.require()
        return super().acquire(timeout=timeout if timeout is not None else self.acquire_timeout)


def pool_size(settings: Settings, default: int) -> tuple[int, int]:
    """(min, max) connections of a process whose own default is `default`:
    `PRESSROOM_DATABASE_POOL_MAX` when set, the minimum never above the maximum."""
    most = settings.database_pool_max or default
    return min(settings.database_pool_min, most), most


@contextlib.asynccontextmanager
async def open_pool(
    settings: Settings, *, size: int = 4, migrate_schema: bool = True, lazy: bool = False
) -> AsyncIterator[Pool]:
    """A migrated pool (unless `migrate_schema` is False: a backup reads the database as
    it is) of at most `size` connections (or `PRESSROOM_DATABASE_POOL_MAX`); closed on
    exit. Raises `Unavailable` if Postgres cannot be reached within
    `PRESSROOM_DATABASE_TIMEOUT`, which also bounds each statement and each wait for a
    connection; with `lazy` it yields instead a pool that connects on demand and is not
    migrated yet (`migrated` False: `watched` migrates it once PostgreSQL answers)."""
    least, most = pool_size(settings, size)
    try:
        pool = await _new_pool(settings, least, most)
    except Unavailable:
        if not lazy:
            raise
        pool = await _new_pool(settings, 0, most)  # no connection made here
        pool.migrated = False
    try:
        if migrate_schema and pool.migrated:
            async with map_db_errors(), pool.acquire() as conn:
                await migrate(conn)
        yield pool
    finally:
        await pool.close()


@map_db_errors("cannot reach PostgreSQL")
async def _new_pool(settings: Settings, least: int, most: int) -> Pool:
    pool: Pool = await Pool(
        settings.database_url,
        min_size=least,
        max_size=most,
        max_queries=50_000,  # create_pool's defaults, which it passes the same way
        max_inactive_connection_lifetime=300.0,
        init=_init_connection,
        reset=_keep_session,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        command_timeout=settings.database_timeout,
        timeout=settings.database_timeout,
    )
    pool.acquire_timeout = settings.database_timeout
    return pool


@contextlib.asynccontextmanager
async def watched(
    pool: Pool, settings: Settings, prepare: Prepare | None = None
) -> AsyncIterator[Watch]:
    """Watch PostgreSQL for this pool (`pgwatch`) while the block runs: the pool refuses
    at once while it does not answer. A pool not `migrated` yet stays refused until a
    probe is answered, the migrations have run and then `prepare`."""

    async def migrated(conn: asyncpg.Connection) -> None:
        await migrate(conn)
        if prepare is not None:
            await prepare(conn)

    watch = Watch(settings.database_url, None if pool.migrated else migrated)
    pool.watch = watch
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    try:
        yield watch
    finally:
        stop.set()
        pool.watch = None
        await lifecycle.cancelled(task)


@contextlib.asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection of `pool` in a transaction, committed when the block ends without an
    error; PostgreSQL's errors inside it (and in taking the connection) come out mapped
    (`map_db_errors`)."""
    async with map_db_errors(), pool.acquire() as conn, conn.transaction():
        yield conn


@contextlib.asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection of `pool` for several statements (a session-level advisory lock);
    PostgreSQL's errors inside the block come out mapped (`map_db_errors`)."""
    async with map_db_errors(), pool.acquire() as conn:
        yield conn


@map_db_errors()
async def ping(pool: asyncpg.Pool, timeout: float) -> None:
    """Return once PostgreSQL answers a query; `Unavailable` if not within `timeout` s."""
    await pool.fetchval("SELECT 1", timeout=timeout)


@map_db_errors()
async def get_job(pool: asyncpg.Pool, job_id: str) -> JobRow | None:
    row = await pool.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    return typed(row, JobRow) if row is not None else None


@map_db_errors()
async def get_jobs(pool: asyncpg.Pool, job_ids: list[str]) -> dict[str, JobRow]:
    """The rows of `job_ids` that exist, by id: one query however many are named."""
    rows = await pool.fetch("SELECT * FROM jobs WHERE id = ANY($1::text[])", job_ids)
    return {row["id"]: typed(row, JobRow) for row in rows}


@map_db_errors()
async def list_jobs(
    pool: asyncpg.Pool,
    tenant: str,
    status: str | None,
    prefix: str | None,
    limit: int,
    offset: int,
) -> list[JobRow]:
    """A tenant's single jobs (never batch items nor previews), newest first, optionally
    only those in `status` and those whose id starts with `prefix` (the partial index
    `jobs_tenant_recent`)."""
    rows = await pool.fetch(
        "SELECT * FROM jobs WHERE tenant_id = $1 AND batch_id IS NULL "
        "AND preview IS NULL "
        "AND ($2::job_status IS NULL OR status = $2) AND ($3::text IS NULL OR starts_with(id, $3)) "
        "ORDER BY created_at DESC, id LIMIT $4 OFFSET $5",
        tenant,
        status,
        prefix,
        limit,
        offset,
    )
    return [typed(r, JobRow) for r in rows]


@map_db_errors()
async def get_batch(pool: asyncpg.Pool, batch_id: str) -> BatchRow | None:
    row = await pool.fetchrow("SELECT * FROM batches WHERE id = $1", batch_id)
    return typed(row, BatchRow) if row is not None else None


@map_db_errors()
async def webhook_deliveries(pool: asyncpg.Pool, job_id: str) -> list[WebhookDelivery]:
    rows = await pool.fetch(
        "SELECT * FROM webhook_deliveries WHERE job_id = $1 ORDER BY stream_seq", job_id
    )
    return [typed(r, WebhookDelivery) for r in rows]


@map_db_errors()
async def record_batch_webhook(pool: asyncpg.Pool, attempt: BatchWebhookAttempt) -> None:
    await pool.execute(
        "INSERT INTO batch_webhook_deliveries (batch_id, tenant_id, webhook_id, event, attempt, "
        "url, outcome, status_code, error, latency_ms) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        *msgspec.structs.astuple(attempt),
    )


@map_db_errors()
async def batch_webhook_deliveries(
    pool: asyncpg.Pool, tenant: str, batch_id: str
) -> list[BatchWebhookDelivery]:
    """Every recorded attempt of `tenant`'s batch's webhooks, oldest first."""
    rows = await pool.fetch(
        "SELECT * FROM batch_webhook_deliveries WHERE batch_id = $1 AND tenant_id = $2 ORDER BY id",
        batch_id,
        tenant,
    )
    return [typed(r, BatchWebhookDelivery) for r in rows]


@map_db_errors()
async def job_status(pool: asyncpg.Pool, job_id: str) -> JobStatus | None:
    """The projected status of a job, None if the projection has no row for it."""
    status: str | None = await pool.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)
    return JobStatus(status) if status is not None else None


class BatchItemRow(msgspec.Struct, kw_only=True, frozen=True):
    """One item of a batch as `GET /batches/{id}/items` shows it: an item the conductor
    has not expanded yet is `queued`, with no filename known here."""

    index: int
    job_id: str
    status: JobStatus
    filename: str | None
    attempts: int
    error_type: str | None
    error_message: str | None


@map_db_errors()
async def list_batches(
    pool: asyncpg.Pool, tenant: str, status: str | None, limit: int, offset: int
) -> list[BatchRow]:
    """A tenant's batches, newest first, optionally only those in `status`."""
    rows = await pool.fetch(
        "SELECT * FROM batches WHERE tenant_id = $1 AND ($2::batch_status IS NULL OR status = $2) "
        "ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
        tenant,
        status,
        limit,
        offset,
    )
    return [typed(r, BatchRow) for r in rows]


@map_db_errors()
async def batch_items(
    pool: asyncpg.Pool, batch: BatchRow, status: str | None, limit: int, offset: int
) -> list[BatchItemRow]:
    """The items of `batch` in index order, every index from 0 to `total - 1` (an item
    not yet projected is `queued`), optionally only those in `status`."""
    rows = await pool.fetch(
        """
        SELECT i AS index, $1 || '.' || i AS job_id, COALESCE(j.status, 'queued') AS status,
               j.input->>'filename' AS filename, COALESCE(j.attempts, 0) AS attempts,
               j.error_type, j.error_message
        FROM generate_series(0, $2::integer - 1) AS i
        LEFT JOIN jobs AS j ON j.id = $1 || '.' || i
        WHERE $3::job_status IS NULL OR COALESCE(j.status, 'queued') = $3
        ORDER BY i LIMIT $4 OFFSET $5
        """,
        batch.id,
        batch.total,
        status,
        limit,
        offset,
    )
    return [typed(r, BatchItemRow) for r in rows]
