"""The projection is idempotent, follows stream order, and never moves a terminal status."""

from __future__ import annotations

import asyncpg

from services.core import db, events
from services.core.settings import Settings
from services.projector.apply import apply


async def project(database_url: str, batch: list[tuple[int, events.AnyEvent]]) -> dict:
    async with db.open_pool(Settings(database_url=database_url)) as pool:
        async with pool.acquire() as conn, conn.transaction():
            for seq, event in batch:
                await apply(conn, seq, event)
        row = await db.get_job(pool, "j1")
        count = await pool.fetchval("SELECT count(*) FROM job_events")
    assert row is not None
    return {**row, "events": count}


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
