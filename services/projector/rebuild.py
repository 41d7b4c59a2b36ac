"""`pressroom projector --rebuild`: throw the read model away and replay it from the log
(and the statements that empty and count the projection's tables for it).

Run it with every other projector stopped. Order matters for a crash half-way: the
`projector` durable is deleted first, then the tables are emptied, then the durable is
created again from the first message. A crash at any point leaves either the old, intact
projection or a consumer that replays the whole log into whatever is left, so starting
`pressroom projector` afterwards (or the rebuild again) always converges.

Batches (`batches`, `batch_events`) are rebuilt alike, their counts from their items'
ends; a batch's `complete`, which the projector publishes, is not published again (see
`batches.publish_complete`).

Only what the stream still holds (`PRESSROOM_STREAM_MAX_AGE`) comes back; values that
are not in the log, such as the reconciler's `redrives` count, restart at 0. A restore
(`pressroom restore`) rebuilds with `keep_history`: rows of jobs and batches whose whole
history precedes the log's first message stay as the restored database had them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import asyncpg
from nats.js import JetStreamContext

from services.core.database import db
from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.model import subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.runtime import lifecycle
from services.core.runtime.settings import Settings
from services.projector import consumer

log = logging.getLogger(__name__)

POLL = 0.2
"""Seconds between two looks at the consumer's backlog."""


@dataclass(frozen=True)
class Summary:
    """What a rebuild produced; `complete` is False if it was stopped before catching up."""

    events: int
    jobs: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    batches: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        state = "rebuilt" if self.complete else "rebuild INTERRUPTED"
        line = f"projection {state}: {self.events} events applied; jobs: {_tally(self.jobs)}"
        return f"{line}; batches: {_tally(self.batches)}" if self.batches else line


def _tally(by_status: dict[str, int]) -> str:
    return " ".join(f"{status}={n}" for status, n in by_status.items()) or "none"


async def rebuild(
    settings: Settings, stop: asyncio.Event, *, keep_history: bool = False
) -> Summary:
    """Empty the projection (but what precedes the log, with `keep_history`), replay the
    log until the projector durable has nothing pending or unacknowledged, and report.
    Returns early, `complete=False`, if `stop` is set."""
    async with (
        bus.open_bus(settings, name="projector-rebuild", role=Role.PROJECTOR) as (_, js),
        db.open_pool(settings, size=2) as pool,
    ):
        await _restart(js, pool, settings, keep_history)
        caught_up = asyncio.Event()
        watcher = asyncio.create_task(_watch(js, stop, caught_up))
        try:
            await consumer.run(consumer.Projection(js, pool, settings.free_tier), caught_up)
        finally:
            await lifecycle.cancelled(watcher)
        events_applied, jobs = await projection_counts(pool)
        batches = await batch_counts(pool)
    return Summary(events_applied, jobs, complete=not stop.is_set(), batches=batches)


async def _restart(
    js: JetStreamContext, pool: asyncpg.Pool, settings: Settings, keep_history: bool
) -> None:
    """Delete the durable, empty the tables, recreate the durable at the first message."""
    with contextlib.suppress(NotFound), bus.map_bus_errors():
        await js.delete_consumer(subjects.STREAM, subjects.PROJECTOR)
    with bus.map_bus_errors():
        first = (await js.stream_info(subjects.STREAM)).state.first_seq if keep_history else 0
    await truncate_projection(pool, keep_before=first)
    # `ensure_stream` recreates the missing durable (DeliverPolicy.ALL) with its usual config.
    await bus.ensure_stream(js, settings, Role.PROJECTOR)
    log.info("projection emptied; replaying the log")


async def _watch(js: JetStreamContext, stop: asyncio.Event, caught_up: asyncio.Event) -> None:
    """Set `caught_up` once the durable has nothing left, or as soon as `stop` is set.

    Acks follow the database commit, so "nothing pending and nothing awaiting an ack" means
    every message delivered so far is in Postgres.
    """
    while not stop.is_set() and not await _drained(js):
        await lifecycle.pause(stop, POLL)
    caught_up.set()


async def _drained(js: JetStreamContext) -> bool:
    try:
        with bus.map_bus_errors():
            info = await js.consumer_info(subjects.STREAM, subjects.PROJECTOR)
    except (Unavailable, NotFound) as exc:  # reconnecting: look again at the next poll
        log.warning("cannot read the projector's backlog: %s", exc)
        return False
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


# The projection's tables: emptied before a replay, counted after it.

_RECOUNT_USAGE = """
INSERT INTO usage_months (tenant_id, month, succeeded, failed, cancelled, pages, bytes,
                          render_ms)
SELECT tenant_id, month, count(*) FILTER (WHERE outcome = 'done'),
       count(*) FILTER (WHERE outcome = 'failed'), count(*) FILTER (WHERE outcome = 'cancelled'),
       sum(pages), sum(bytes), sum(render_ms)
FROM usage_documents GROUP BY tenant_id, month
"""


_KEEP_BEFORE = (
    "DELETE FROM job_events WHERE stream_seq >= $1",
    "DELETE FROM webhook_deliveries WHERE stream_seq >= $1",
    "DELETE FROM jobs WHERE last_seq >= $1",
    "DELETE FROM batch_events WHERE stream_seq >= $1",
    "DELETE FROM batches WHERE last_seq >= $1",
    "TRUNCATE usage_months",
)
"""What `truncate_projection(keep_before=…)` runs: every row the log from `keep_before`
on will make again goes, rows of jobs and batches whose whole history lies before it
stay."""


@db.map_db_errors()
async def truncate_projection(pool: asyncpg.Pool, keep_before: int = 0) -> None:
    """Empty every table the projector derives from the log (schema_migrations stays).

    Usage is the exception: `usage_documents` (one row per finished job) is kept, since it
    outlives the log's retention and bills, and `usage_months` is recounted from it; the
    replay then adds only jobs it does not hold yet, so each job still counts once.

    With `keep_before`, the log's first sequence when it no longer starts at the
    beginning (a restore: `pressroom restore`), what lies wholly before it is kept, so the
    jobs the log has aged out of stay readable; everything else is made again.
    """
    async with pool.acquire() as conn, conn.transaction():
        if keep_before > 1:
            for statement in _KEEP_BEFORE:
                await conn.execute(statement, *(() if "TRUNCATE" in statement else (keep_before,)))
        else:
            await conn.execute(
                "TRUNCATE jobs, job_events, webhook_deliveries, usage_months, batches, batch_events"
            )
        await conn.execute(_RECOUNT_USAGE)


@db.map_db_errors()
async def projection_counts(pool: asyncpg.Pool) -> tuple[int, dict[str, int]]:
    """(events recorded, jobs by status) of the projection."""
    events = int(await pool.fetchval("SELECT count(*) FROM job_events"))
    rows = await pool.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status ORDER BY 1")
    return events, {r["status"]: int(r["n"]) for r in rows}


@db.map_db_errors()
async def batch_counts(pool: asyncpg.Pool) -> dict[str, int]:
    """Batches by status in the projection."""
    rows = await pool.fetch("SELECT status, count(*) AS n FROM batches GROUP BY status ORDER BY 1")
    return {r["status"]: int(r["n"]) for r in rows}


async def main(settings: Settings, stop: asyncio.Event) -> None:
    """The `--rebuild` command: rebuild, print the one-line summary; exit 1 if interrupted."""
    summary = await rebuild(settings, stop)
    print(summary.line(), flush=True)
    if not summary.complete:
        raise SystemExit(1)
