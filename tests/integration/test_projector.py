"""The projection is idempotent, follows stream order, and never moves a terminal status."""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg
import msgspec
from prometheus_client import REGISTRY

from services.core.database import db
from services.core.log import bus
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.projector import consumer
from services.projector.apply import apply
from tests.conftest import NatsServer, eventually


async def project(database_url: str, batch: list[tuple[int, events.AnyEvent]]) -> dict:
    async with db.open_pool(Settings(database_url=database_url)) as pool:
        async with pool.acquire() as conn, conn.transaction():
            for seq, event in batch:  # as if the log stored event `seq` `seq` s after 1970
                await apply(conn, seq, event, dt.datetime.fromtimestamp(seq, dt.UTC))
        row = await db.get_job(pool, "j1")
        count = await pool.fetchval("SELECT count(*) FROM job_events")
    assert row is not None
    return {**msgspec.structs.asdict(row), "events": count}


SUBMITTED = events.JobSubmitted(job_id="j1", template="<p>{{x}}</p>", data={"x": 1})
STARTED = events.JobStarted(job_id="j1", attempt=1, worker="w")
DONE = events.JobDone(job_id="j1", attempt=1, object_key="jobs/j1.pdf", bytes=10, pages=1,
                      render_ms=5)  # fmt: skip
FAILED = events.JobFailed(job_id="j1", attempt=2, error=events.ErrorInfo("browser", "crash"))


async def test_replaying_events_changes_nothing(database_url: str):
    batch = [(1, SUBMITTED), (2, STARTED), (3, DONE)]
    first = await project(database_url, batch)
    again = await project(database_url, batch)
    assert first["status"] == again["status"] == "done"
    assert again["events"] == 3
    assert again["input"] == {"template": "<p>{{x}}</p>", "data": {"x": 1}, "options": {}}


async def test_terminal_status_never_regresses(database_url: str):
    row = await project(database_url, [(1, SUBMITTED), (3, DONE), (4, STARTED), (5, FAILED)])
    assert row["status"] == "done"
    assert row["error_message"] is None
    assert row["object_key"] == "jobs/j1.pdf"


async def test_events_arriving_before_submission_still_build_the_row(database_url: str):
    row = await project(database_url, [(2, STARTED), (1, SUBMITTED)])
    assert row["status"] == "running"
    assert row["input"]["template"] == "<p>{{x}}</p>"


async def test_migrations_apply_once(database_url: str):
    for _ in range(2):
        async with db.open_pool(Settings(database_url=database_url)):
            pass
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(db.MIGRATIONS)
    finally:
        await conn.close()


RETRYING = events.JobRetrying(
    job_id="j1", attempt=1, worker="w", error=events.ErrorInfo("storage", "down"), delay=2.0
)


async def test_retry_requeues_then_a_later_attempt_runs_and_fails(database_url: str):
    queued = await project(database_url, [(1, SUBMITTED), (2, STARTED), (3, RETRYING)])
    assert (queued["status"], queued["attempts"]) == ("queued", 1)
    assert queued["started_at"] is not None
    second = events.JobStarted(job_id="j1", attempt=2, worker="w")
    failed = await project(database_url, [(4, second), (5, FAILED)])
    assert (failed["status"], failed["attempts"]) == ("failed", 2)
    assert (failed["error_type"], failed["error_message"]) == ("browser", "crash")
    assert failed["finished_at"] is not None


async def test_a_progress_event_older_than_the_status_does_not_move_it(database_url: str):
    row = await project(database_url, [(1, SUBMITTED), (3, RETRYING), (2, STARTED)])
    assert row["status"] == "queued"


async def test_a_cancel_wins_over_a_later_done(database_url: str):
    cancelled = events.JobCancelled(job_id="j1")
    row = await project(database_url, [(1, SUBMITTED), (2, cancelled), (3, DONE)])
    assert (row["status"], row["error_type"]) == ("cancelled", "cancelled")
    assert row["object_key"] is None


async def test_a_deleted_event_clears_the_file_it_names(database_url: str):
    row = await project(database_url, [(1, SUBMITTED), (2, DONE)])
    assert row["object_key"] == "jobs/j1.pdf"
    row = await project(database_url, [(3, events.JobDeleted(job_id="j1", object_key="x.pdf"))])
    assert row["object_key"] == "jobs/j1.pdf"
    deleted = events.JobDeleted(job_id="j1", object_key="jobs/j1.pdf")
    row = await project(database_url, [(4, deleted)])
    assert (row["object_key"], row["status"]) == (None, "done")


async def test_webhook_attempts_are_recorded_once(database_url: str):
    attempt = events.WebhookAttempted(
        job_id="j1", webhook_id="msg_1", attempt=1, url="https://example.com/h",
        outcome="failed", status_code=500, error="HTTP 500", latency_ms=12,
    )  # fmt: skip
    for _ in range(2):
        await project(database_url, [(1, SUBMITTED), (2, DONE), (3, attempt)])
    async with db.open_pool(Settings(database_url=database_url)) as pool:
        rows = await db.webhook_deliveries(pool, "j1")
    assert [(r.attempt, r.outcome, r.status_code) for r in rows] == [(1, "failed", 500)]


async def test_an_event_logged_with_a_nul_is_stored_with_a_replacement_character(
    nats_server: NatsServer, database_url: str
):
    """An event whose strings hold NUL (jsonb cannot), as an older version could log one
    (the log carries none now: `events.encode` makes every event storable), used to be
    skipped, leaving its job unfinished; now it is stored with U+FFFD in place of the NUL,
    and the events after it too."""
    settings = Settings(nats_url=nats_server.url, database_url=database_url)
    skipped = REGISTRY.get_sample_value("pressroom_events_skipped_total", {"type": "submitted"})
    stop = asyncio.Event()
    async with bus.open_bus(settings, name="test") as (_, js), db.open_pool(settings) as pool:
        poison = events.JobSubmitted(job_id="bad", template="t", data={"x": "a\x00b"})
        raw = msgspec.json.encode(poison)  # as logged before events.encode sanitised
        assert b"\\u0000" in raw
        await js.publish(events.subject_of(poison), raw, stream=subjects.STREAM)
        for job_id in ("ok1", "ok2"):
            await bus.publish(js, events.JobSubmitted(job_id=job_id, template="t"))
        target = consumer.Projection(js, pool, settings.free_tier)
        projector = asyncio.create_task(consumer.run(target, stop))
        try:

            async def projected() -> bool:
                return await db.get_job(pool, "ok2") is not None

            await eventually(projected, 15)
        finally:
            stop.set()
            await projector
        statuses = {r["id"]: r["status"] for r in await pool.fetch("SELECT id, status FROM jobs")}
        bad = await pool.fetchval("SELECT input FROM jobs WHERE id = 'bad'")
        info = await js.consumer_info(subjects.STREAM, subjects.PROJECTOR)
    assert statuses == {"bad": "queued", "ok1": "queued", "ok2": "queued"}
    assert bad["data"] == {"x": "a\ufffdb"}
    after = REGISTRY.get_sample_value("pressroom_events_skipped_total", {"type": "submitted"})
    assert (after or 0) == (skipped or 0)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


async def test_the_log_never_carries_a_nul(nats_server: NatsServer) -> None:
    """What is published is storable: a page error with a NUL reaches the log with U+FFFD."""
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (_, js):
        error = events.ErrorInfo(type="wait_timeout", message="last error: Error: a\x00b")
        failed = events.JobFailed(job_id="j", attempt=1, error=error)
        await bus.publish(js, failed)
        msg = await js.get_last_msg(subjects.STREAM, events.subject_of(failed))
    assert b"\\u0000" not in msg.data
    failed = events.decode(msg.data, subject=msg.subject)
    assert isinstance(failed, events.JobFailed)
    assert failed.error.message == "last error: Error: a\ufffdb"


async def test_a_later_copy_of_a_submission_never_overwrites_the_jobs_input(database_url: str):
    """A second `submitted` for a job (a re-drive, or one stored after the deduplication
    window) keeps the first input, webhook and key: a finished job stays as submitted."""
    other = events.JobSubmitted(
        job_id="j1", template="<p>other</p>", webhook_url="https://attacker.example/h",
        webhook_secret="sealed1:other", idempotency_key="k2",
    )  # fmt: skip
    row = await project(database_url, [(1, SUBMITTED), (2, DONE), (3, other)])
    assert row["status"] == "done"
    assert row["input"]["template"] == SUBMITTED.template
    assert "webhook_secret" not in row["input"] or row["input"]["webhook_secret"] is None
    assert (row["webhook_url"], row["idempotency_key"]) == (None, None)
    assert row["events"] == 3
