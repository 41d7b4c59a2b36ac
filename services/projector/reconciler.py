"""Catch the system's own lie: jobs the projection shows unfinished that nothing drives.

A job should move while it is `queued` or `running`. One that has had no news for
`stale_after` seconds and that the log no longer drives was lost somewhere (its message
aged out or was lost by the log, a renderer hung, an advisory never came). "No longer
drives" matters: in a backlog (a month-end run, renderers down for a while) a job may wait
in the log far longer than `stale_after`, and that is not a stall. A single job waits in
its tenant's durable (`singles-<tenant>`; before lanes, in `renderer`): while that durable
has messages pending or unacknowledged, a job whose last event is past its ack floor (its
`submitted` message may be among them) is left alone; only jobs at or below the floor, or
any job once the durable has nothing outstanding, are stale.
For a stale job the reconciler re-publishes its `submitted` event,
rebuilt from the row's recorded input, under a new dedup id `<job>.redrive.<n>`; after
`max_redrives` it publishes `failed` ("stalled") instead. Re-driving a job that is in fact
still being rendered is harmless: object keys derive from the job id and terminal events
are deduplicated.

The items of a batch wait in their batch's own durable (`bulk-<batch_id>`), not the
renderers' one: they are judged by that durable's floor, and a paused batch's items are
never stale (they wait by request).

Each sweep also releases the quota holds no work will end (`quota.py`).

Each sweep holds a Postgres advisory lock, so with several projectors only one sweeps at a
time, and it skips while the projector lags far behind the log (then "no news" in Postgres
may only mean "not projected yet").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import asyncpg
import msgspec
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from services.core.database import db
from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.model.errortypes import ErrorType
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings
from services.projector import quota, staledb
from services.projector.consumer import BATCH as PROJECTOR_BATCH

log = logging.getLogger(__name__)

SWEEP_LIMIT = 500
"""Jobs acted on per sweep (and per batch); the rest stay stale and are taken by the next
sweep."""
BATCHES_PER_SWEEP = 20
"""Batches whose stale items a sweep looks at; the others are taken by later sweeps."""


async def run(
    js: JetStreamContext, pool: asyncpg.Pool, settings: Settings, stop: asyncio.Event
) -> None:
    """Sweep every `reconcile_interval` seconds until `stop` is set.

    NATS or Postgres trouble only skips a sweep: stale jobs stay stale and are found again.
    """
    floors: Floors | None = None  # the log's reading of the previous turn
    while not stop.is_set():
        try:
            reading = await singles_floors(js)
            if floors is not None:
                await sweep(js, pool, settings, floors)
            floors = reading
        except (Unavailable, NotFound) as exc:
            log.warning("reconciler: sweep skipped: %s", exc)
        await lifecycle.pause(stop, settings.reconcile_interval)


@dataclass(frozen=True)
class Floor:
    """Where the renderers stood in one durable: `seq` is its ack floor while it had work
    outstanding, None when it had none (then it drives no job at all)."""

    seq: int | None


def _floor(info: ConsumerInfo) -> Floor:
    if bus.outstanding(info) == 0:
        return Floor(None)
    return Floor(int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0)


async def log_floor(js: JetStreamContext, durable: str) -> Floor:
    """One durable's floor now (a batch's items')."""
    with bus.map_bus_errors():
        info = await js.consumer_info(subjects.STREAM, durable)
    return _floor(info)


@dataclass(frozen=True)
class Floors:
    """Where the renderers stood in the single jobs' durables: the legacy `renderer`
    durable's floor, and each tenant's whose durable had work outstanding. A sweep uses
    the reading of one interval earlier: a job acknowledged since may not have had its
    last events projected yet."""

    legacy: int | None = None
    tenants: dict[str, int] = field(default_factory=dict)

    def of_tenants(self) -> dict[str, int]:
        """The floor to judge each listed tenant's jobs by: its own, or the legacy
        durable's if lower (a job submitted before lanes waits there). A tenant not
        listed is judged by the legacy floor alone."""
        if self.legacy is None:
            return dict(self.tenants)
        return {t: min(seq, self.legacy) for t, seq in self.tenants.items()}


async def singles_floors(js: JetStreamContext) -> Floors:
    """The floors of every durable of single jobs, in one listing."""
    legacy: int | None = None
    tenants: dict[str, int] = {}
    async for info in bus.durables(js):
        name = info.name or ""
        if name == subjects.RENDERER:
            legacy = _floor(info).seq
        elif name.startswith(subjects.SINGLES):
            tenant = ((info.config.metadata if info.config else None) or {}).get("tenant")
            seq = _floor(info).seq
            if tenant is not None and seq is not None:
                tenants[tenant] = seq
    return Floors(legacy, tenants)


async def sweep(
    js: JetStreamContext, pool: asyncpg.Pool, settings: Settings, floors: Floors
) -> dict[str, str] | None:
    """One pass over the stale jobs: {job id: "redrive" or "fail"} for each one acted on.
    A job past its durable's floor (`floors`, read one interval earlier) may still wait in
    the log: not stale.

    None when this projector did not sweep: another one holds the lock, or the projection
    is more than a batch behind the log.
    """
    if await _projection_lags(js):
        log.info("reconciler: the projection is catching up with the log; sweep skipped")
        return None
    async with db.connection(pool) as conn:
        if not await staledb.try_advisory_lock(conn, staledb.RECONCILER_LOCK_ID):
            return None
        try:
            rows = await staledb.stale_jobs(
                conn,
                settings.stale_after,
                SWEEP_LIMIT,
                up_to_seq=floors.legacy,
                tenant_floors=floors.of_tenants(),
            )
            acted = {row.id: await reconcile(js, conn, settings, row) for row in rows}
            for batch_id in await staledb.batches_with_stale_items(
                conn, settings.stale_after, BATCHES_PER_SWEEP
            ):
                items = await _stale_items(js, conn, settings, batch_id)
                acted |= {row.id: await reconcile(js, conn, settings, row) for row in items}
            await quota.sweep(js, conn)
            return acted
        finally:
            await staledb.advisory_unlock(conn, staledb.RECONCILER_LOCK_ID)


async def _stale_items(
    js: JetStreamContext, conn: asyncpg.Connection, settings: Settings, batch_id: str
) -> list[staledb.StaleJob]:
    """The stale items of one batch, judged by its own durable: items past its ack floor
    wait in it (a long batch, or one behind others), which is no stall. A durable that is
    gone drives nothing. Read now rather than an interval earlier: an item acknowledged
    just since had its `started` projected moments ago, so it is not old enough to be
    stale anyway."""
    try:
        floor = await log_floor(js, subjects.bulk_durable(batch_id))
    except NotFound:
        floor = Floor(None)
    return await staledb.stale_jobs(
        conn, settings.stale_after, SWEEP_LIMIT, up_to_seq=floor.seq, batch_id=batch_id
    )


async def reconcile(
    js: JetStreamContext, conn: asyncpg.Connection, settings: Settings, row: staledb.StaleJob
) -> str:
    """Re-drive one stale job, or fail it once its re-drives are used up; returns which.

    The event is published (and acknowledged) before the row is updated: a crash in between
    repeats the same publish, which the dedup id absorbs.
    """
    job_id, redrives = row.id, row.redrives
    job = resubmission(row)
    if job is not None and redrives < settings.max_redrives:
        if job.batch_id is None:  # its tenant's durable may have been deleted by hand
            await bus.SinglesLanes(settings).ensure(js, job.tenant)
        await bus.publish(js, job, msg_id=f"{job_id}.redrive.{redrives + 1}")
        await staledb.mark_redriven(conn, job_id, redrives + 1)
        action = "redrive"
    else:
        # Touched so that it is not found again before the projector applies the failure.
        await bus.publish_terminal(js, stalled(row, has_input=job is not None))
        await staledb.touch_job(conn, job_id)
        action = "fail"
    metrics.RECONCILER_ACTIONS.labels(action).inc()
    log.warning(
        "job %s: %s, no news for over %.0fs: %s",
        job_id,
        row.status,
        settings.stale_after,
        action,
    )
    return action


def resubmission(row: staledb.StaleJob) -> events.JobSubmitted | None:
    """The job's `submitted` event rebuilt from its row, None if the row lacks its input.

    `at` is the original creation time, so projecting the copy keeps `created_at`.
    """
    if row.input is None:
        return None
    fields = {
        **row.input,
        "job_id": row.id,
        "tenant": row.tenant_id,
        "at": row.created_at.timestamp(),
        "webhook_url": row.webhook_url,
        "idempotency_key": row.idempotency_key,
    }
    try:
        return msgspec.convert(fields, events.JobSubmitted)
    except msgspec.ValidationError as exc:
        log.error("job %s: recorded input cannot be re-driven: %s", row.id, exc)
        return None


def stalled(row: staledb.StaleJob, *, has_input: bool) -> events.JobFailed:
    """The terminal event of a job the log no longer drives."""
    if has_input:
        message = f"no progress after {row.redrives} re-drives: the log no longer drives this job"
    else:
        message = "no progress and no recorded input to re-drive: the log no longer drives this job"
    return events.JobFailed(
        job_id=row.id,
        tenant=row.tenant_id,
        attempt=row.attempts,
        error=events.ErrorInfo(type=ErrorType.STALLED, message=message),
        webhook_url=row.webhook_url,
    )


async def _projection_lags(js: JetStreamContext) -> bool:
    """Whether the projector has more than a batch of the log still to apply."""
    with bus.map_bus_errors():
        info = await js.consumer_info(subjects.STREAM, subjects.PROJECTOR)
    return (info.num_pending or 0) > PROJECTOR_BATCH
