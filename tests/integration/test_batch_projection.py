"""The projector's side of batches: events published onto a real log, projected by the
real projector into a real PostgreSQL.

Verifies: a batch is `queued` until an item starts, then `running`; each item's end
counts once in `done`/`failed`/`cancelled` (a second terminal copy of an item counts
nothing); when every item has ended the projector publishes exactly one
`batches.<id>.complete`; the terminal event ends the batch for good, with its archive;
items' job rows carry their batch and index; pause and resume move an open batch and
never an ended one; a batch's recorded events hold neither its template nor its secret;
replaying the whole log into the same tables (a redelivery) and rebuilding the projection
from it give the same rows and no second `complete`, even past the dedup window.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import pytest
from nats.js import JetStreamContext

from services.core.database import db
from services.core.log import bus
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.projector import rebuild
from tests.conftest import Stack, eventually

TENANT = "acme"
ARCHIVE = "batches/acme/archive.zip"


def batch_id(n: int) -> str:
    return "b" + f"{n:x}".rjust(31, "0")


def submitted(batch: str, total: int, **fields: Any) -> events.BatchSubmitted:
    return events.BatchSubmitted(
        batch_id=batch, tenant=TENANT, total=total, items_key=f"batches/{TENANT}/{batch}/i",
        template="<p>{{ n }}</p>", **fields,
    )  # fmt: skip


def item(batch: str, index: int) -> events.JobSubmitted:
    return events.JobSubmitted(
        job_id=subjects.item_job_id(batch, index), tenant=TENANT, batch_id=batch, index=index,
        filename=f"{index}.pdf", data={"n": index},
    )  # fmt: skip


def started(batch: str, index: int) -> events.JobStarted:
    return events.JobStarted(
        job_id=subjects.item_job_id(batch, index), tenant=TENANT, attempt=1, worker="w"
    )


def done(batch: str, index: int) -> events.JobDone:
    job = subjects.item_job_id(batch, index)
    return events.JobDone(job_id=job, tenant=TENANT, attempt=1, object_key=f"jobs/{job}.pdf",
                          bytes=100, pages=1, render_ms=5)  # fmt: skip


def failed(batch: str, index: int) -> events.JobFailed:
    error = events.ErrorInfo("template", "undefined n")
    return events.JobFailed(
        job_id=subjects.item_job_id(batch, index), tenant=TENANT, attempt=1, error=error
    )


def batch_done(batch: str) -> events.BatchDone:
    return events.BatchDone(batch_id=batch, tenant=TENANT, total=3, done=2, failed=1,
                            cancelled=0, object_key=ARCHIVE, bytes=4096)  # fmt: skip


async def publish(js: JetStreamContext, *logged: events.LogEvent) -> None:
    for event in logged:
        if isinstance(event, events.BatchEvent):
            await bus.publish_batch(js, event)
        else:
            await bus.publish(js, event)


@contextlib.asynccontextmanager
async def projector(
    settings: Settings,
) -> AsyncIterator[tuple[JetStreamContext, asyncpg.Pool]]:
    """The projector running in this process, and a connection to its log and database."""
    stack = Stack(settings)
    await stack.start("projector")
    try:
        async with (
            bus.open_bus(settings, name="test") as (_, js),
            db.open_pool(settings, size=2) as pool,
        ):
            yield js, pool
    finally:
        await stack.close()


async def row_when(pool: asyncpg.Pool, batch: str, what: str, **expected: Any) -> db.BatchRow:
    """The batch's row once its fields have the `expected` values."""

    async def check() -> db.BatchRow | None:
        row = await db.get_batch(pool, batch)
        if row is None or any(getattr(row, k) != v for k, v in expected.items()):
            return None
        return row

    found: db.BatchRow = await eventually(check, 15, what)
    return found


async def recorded(pool: asyncpg.Pool, batch: str) -> list[str]:
    """The types of the batch's events in `batch_events`, in stream order."""
    rows = await pool.fetch(
        "SELECT type FROM batch_events WHERE batch_id = $1 ORDER BY stream_seq", batch
    )
    return [r["type"] for r in rows]


async def recorded_all(pool: asyncpg.Pool, batch: str, count: int) -> None:
    """Return once the batch's first `count` events are recorded."""

    async def enough() -> bool:
        return len(await recorded(pool, batch)) >= count

    await eventually(enough, 15, f"{count} events of {batch} recorded")


async def completes(js: JetStreamContext, batch: str) -> int:
    """How many `complete` events of the batch the log holds."""
    subject = subjects.batch_subject(batch, "complete")
    info = await js.stream_info(subjects.STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def job_events_recorded(pool: asyncpg.Pool, job_id: str, count: int) -> None:
    """Return once the job's first `count` events are recorded."""

    async def enough() -> bool:
        query = "SELECT count(*) FROM job_events WHERE job_id = $1"
        return int(await pool.fetchval(query, job_id)) >= count

    await eventually(enough, 15, f"{count} events of {job_id} recorded")


async def test_items_move_their_batch_count_once_and_complete_it_once(settings: Settings):
    batch = batch_id(1)
    async with projector(settings) as (js, pool):
        await publish(
            js,
            submitted(batch, 3, webhook_url="https://example.com/h", idempotency_key="k1",
                      template_id="invoice", template_version=2,
                      webhook_secret="sealed1:not-for-the-projection"),
            *(item(batch, i) for i in range(3)),
        )  # fmt: skip
        queued = await row_when(pool, batch, "a queued batch", status="queued")
        assert (queued.tenant_id, queued.total, queued.output) == (TENANT, 3, "zip")
        assert (queued.webhook_url, queued.idempotency_key) == ("https://example.com/h", "k1")
        assert (queued.template_id, queued.template_version) == ("invoice", 2)
        assert queued.started_at is None and queued.finished_at is None

        await publish(js, started(batch, 0))
        running = await row_when(pool, batch, "a running batch", status="running")
        assert running.started_at is not None
        await publish(js, done(batch, 0), done(batch, 1))
        await row_when(pool, batch, "two items done", done=2)
        assert await completes(js, batch) == 0
        await publish(js, failed(batch, 2))
        ended = await row_when(pool, batch, "every item ended", done=2, failed=1)
        assert (ended.status, ended.cancelled) == ("running", 0)
        await eventually(lambda: completes(js, batch), 15, "the batch's complete event")

        # A second end of an item stored after the dedup window (another Nats-Msg-Id)
        # changes no count and completes nothing again.
        late = events.JobCancelled(job_id=subjects.item_job_id(batch, 0), tenant=TENANT)
        await js.publish(events.subject_of(late), events.encode(late), stream=subjects.STREAM,
                         headers={"Nats-Msg-Id": "a-late-copy"})  # fmt: skip
        await job_events_recorded(pool, subjects.item_job_id(batch, 0), 4)

        await publish(js, batch_done(batch))
        final = await row_when(pool, batch, "a done batch", status="done")
        assert (final.object_key, final.bytes, final.error_type) == (ARCHIVE, 4096, None)
        assert final.finished_at is not None and final.finished_at >= final.started_at
        assert (final.done, final.failed, final.cancelled) == (2, 1, 0)

        # An ended batch never changes status again.
        await publish(js, events.BatchPaused(batch_id=batch, tenant=TENANT))
        await recorded_all(pool, batch, 4)
        assert (await db.get_batch(pool, batch)).status == "done"  # type: ignore[union-attr]
        assert await recorded(pool, batch) == ["submitted", "complete", "done", "paused"]
        assert await completes(js, batch) == 1

        items = await pool.fetch(
            "SELECT id, batch_id, item_index, status FROM jobs WHERE batch_id = $1 "
            "ORDER BY item_index",
            batch,
        )
        bodies = await pool.fetch("SELECT body::text AS b FROM batch_events")
    assert [(r["id"], r["batch_id"], r["item_index"], r["status"]) for r in items] == [
        (f"{batch}.0", batch, 0, "done"),
        (f"{batch}.1", batch, 1, "done"),
        (f"{batch}.2", batch, 2, "failed"),
    ]
    assert all("sealed1" not in r["b"] and "{{ n }}" not in r["b"] for r in bodies)
    assert all('"at"' not in r["b"] for r in bodies)


async def test_pause_and_resume_move_an_open_batch_and_never_an_ended_one(settings: Settings):
    batch, broken = batch_id(2), batch_id(3)
    async with projector(settings) as (js, pool):
        await publish(js, submitted(batch, 2), item(batch, 0), item(batch, 1))
        await row_when(pool, batch, "queued", status="queued")
        await publish(js, events.BatchPaused(batch_id=batch, tenant=TENANT))
        await row_when(pool, batch, "paused before it started", status="paused")
        await publish(js, events.BatchResumed(batch_id=batch, tenant=TENANT))
        await row_when(pool, batch, "resumed, not started: queued", status="queued")
        await publish(js, started(batch, 0), events.BatchPaused(batch_id=batch, tenant=TENANT))
        await row_when(pool, batch, "paused while running", status="paused")
        # An item already rendering starts or ends while paused: the batch stays paused.
        await publish(js, started(batch, 1), done(batch, 0))
        await row_when(pool, batch, "an item ended while paused", status="paused", done=1)
        await publish(js, events.BatchResumed(batch_id=batch, tenant=TENANT))
        await row_when(pool, batch, "resumed after a start: running", status="running")
        # A cancel request keeps the status until the batch's terminal event.
        await publish(js, events.BatchCancel(batch_id=batch, tenant=TENANT))
        await recorded_all(pool, batch, 6)
        assert (await db.get_batch(pool, batch)).status == "running"  # type: ignore[union-attr]
        # The conductor cancels the items not ended; then every item has ended.
        await publish(js, events.JobCancelled(job_id=f"{batch}.1", tenant=TENANT))
        await eventually(lambda: completes(js, batch), 15, "the batch's complete event")
        end = events.BatchCancelled(batch_id=batch, tenant=TENANT, total=2, done=1, failed=0,
                                    cancelled=1, object_key=ARCHIVE, bytes=10)  # fmt: skip
        await publish(js, end, events.BatchResumed(batch_id=batch, tenant=TENANT))
        await recorded_all(pool, batch, 9)
        row = await row_when(pool, batch, "cancelled", status="cancelled")
        assert (row.done, row.failed, row.cancelled) == (1, 0, 1)
        assert (row.object_key, row.bytes) == (ARCHIVE, 10)

        error = events.ErrorInfo("no_documents", "no item produced a document")
        await publish(
            js,
            submitted(broken, 1),
            events.BatchFailed(batch_id=broken, tenant=TENANT, total=1, done=0, failed=1,
                               cancelled=0, error=error, object_key=ARCHIVE),
        )  # fmt: skip
        gone = await row_when(pool, broken, "a failed batch", status="failed")
        assert (gone.error_type, gone.error_message) == ("no_documents", error.message)
        assert gone.finished_at is not None and gone.bytes is None
        assert await recorded(pool, batch) == [
            "submitted", "paused", "resumed", "paused", "resumed", "cancel", "complete",
            "cancelled", "resumed",
        ]  # fmt: skip


async def snapshot(pool: asyncpg.Pool) -> dict[str, Any]:
    """The batch tables and the items' rows, without the database's own clock."""
    batches = await pool.fetch("SELECT * FROM batches ORDER BY id")
    return {
        "batches": [{k: v for k, v in r.items() if k != "updated_at"} for r in batches],
        "events": [dict(r) for r in await pool.fetch("SELECT * FROM batch_events ORDER BY 1")],
        "items": [
            dict(r)
            for r in await pool.fetch(
                "SELECT id, status, batch_id, item_index FROM jobs ORDER BY id"
            )
        ],
    }


async def drained(js: JetStreamContext) -> bool:
    info = await js.consumer_info(subjects.STREAM, subjects.PROJECTOR)
    return info.num_pending == 0 and info.num_ack_pending == 0


@pytest.fixture
def short_window(settings: Settings) -> Settings:
    """A dedup window of one second: the log itself drops no second `complete` after it."""
    return replace(settings, dedup_window=1.0)


async def test_replaying_the_log_counts_nothing_twice_and_completes_once(short_window: Settings):
    settings, batch = short_window, batch_id(4)
    async with projector(settings) as (js, pool):
        await publish(js, submitted(batch, 3), *(item(batch, i) for i in range(3)))
        await publish(js, started(batch, 0), done(batch, 0), done(batch, 1), failed(batch, 2))
        await eventually(lambda: completes(js, batch), 15, "the batch's complete event")
        await publish(js, batch_done(batch))
        await row_when(pool, batch, "done", status="done", done=2, failed=1)
        await eventually(lambda: drained(js), 15, "the projector caught up")
        before = await snapshot(pool)
    await asyncio.sleep(1.5)  # the dedup window passes: only the projector can hold back

    # Every event delivered again into the same tables, as after a crash before the acks.
    async with bus.open_bus(settings, name="test") as (_, js):
        await js.delete_consumer(subjects.STREAM, subjects.PROJECTOR)
    async with projector(settings) as (js, pool):
        await eventually(lambda: drained(js), 15, "the projector replayed the log")
        assert await snapshot(pool) == before
        assert await completes(js, batch) == 1

    summary = await rebuild.rebuild(settings, asyncio.Event())
    assert summary.complete and summary.batches == {"done": 1}
    assert summary.line().endswith("; batches: done=1")
    async with bus.open_bus(settings, name="test") as (_, js), db.open_pool(settings) as pool:
        assert await snapshot(pool) == before
        assert await completes(js, batch) == 1
