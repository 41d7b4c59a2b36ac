"""Jobs the projection shows unfinished, but that the log no longer drives, still end.

A job "lost by the log" is made by writing its row straight into Postgres, `queued` and
an hour old, with no message in the stream. Verifies: the reconciler re-publishes its
`submitted` event under the dedup id `<job>.redrive.1` and a running renderer then
finishes it `done`; with no renderer, after `max_redrives` re-drives it fails as
`stalled`; and a sweep does nothing while another projector holds the reconciler's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import nats
import pytest
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from services.core.database import db
from services.core.log import bus
from services.core.model import subjects
from services.core.model.errors import NotFound
from services.core.runtime.settings import Settings
from services.projector import reconciler, staledb
from tests.conftest import Stack, eventually

IDLE = reconciler.Floors()  # the renderers had nothing outstanding
HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}, "options": {}}


@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    return replace(settings, reconcile_interval=0.2, stale_after=1.0, max_redrives=2)


@pytest.fixture
async def js(settings: Settings) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(settings.nats_url)
    yield nc.jetstream()
    await nc.close()


async def insert_lost_job(database_url: str, tenant: str) -> str:
    """A `queued` row of `tenant`, an hour old, whose `submitted` message is nowhere in the
    log."""
    job_id = uuid.uuid4().hex
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO jobs (id, tenant_id, status, input, created_at, updated_at) "
            "VALUES ($1, $3, 'queued', $2::jsonb, now() - interval '1 hour', "
            "now() - interval '1 hour')",
            job_id,
            json.dumps(HELLO),
            tenant,
        )
    finally:
        await conn.close()
    return job_id


async def job_row(database_url: str, job_id: str) -> dict:
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
        submitted = await conn.fetchval(
            "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'submitted'", job_id
        )
    finally:
        await conn.close()
    return {**dict(row), "submitted_events": submitted}


def actions(action: str) -> float:
    value = REGISTRY.get_sample_value("pressroom_reconciler_actions_total", {"action": action})
    return value or 0.0


async def last_submission_id(js: JetStreamContext, job_id: str) -> str:
    msg = await js.get_last_msg(subjects.STREAM, subjects.subject(job_id, "submitted.*"))
    return str((msg.headers or {}).get("Nats-Msg-Id"))


async def test_lost_job_is_redriven_and_rendered(settings: Settings, js):
    stack = Stack(replace(settings, reconcile_interval=0.2, stale_after=60.0, max_redrives=1))
    await stack.start()
    try:
        before = actions("redrive")
        job_id = await insert_lost_job(settings.database_url, stack.tenant.id)
        job = await stack.finished(job_id, timeout=30)
        assert job["status"] == "done", job
        assert job["attempts"] == 1
        assert await last_submission_id(js, job_id) == f"{job_id}.redrive.1"
        row = await job_row(settings.database_url, job_id)
        assert row["redrives"] == 1
        assert row["created_at"].timestamp() < row["updated_at"].timestamp() - 3000
        assert actions("redrive") == before + 1
    finally:
        await stack.close()


async def black_hole(nc: nats.NATS, tenant: str, stop: asyncio.Event) -> None:
    """A "renderer" that takes every message of `tenant`'s single jobs and acknowledges it
    without doing anything: the log then no longer drives those jobs. The tenant's durable
    is made by the first re-drive."""
    lane = bus.Lane(nc, subjects.singles_durable(tenant))
    try:
        while not stop.is_set():
            try:
                msgs = await lane.take(10)
            except NotFound:
                msgs = []
            for msg in msgs:
                await msg.ack()
            if not msgs:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.1)
    finally:
        await lane.close()


async def test_job_still_stalled_after_max_redrives_fails_as_stalled(fast_settings, js):
    stack = Stack(fast_settings)  # no renderer, and re-driven messages are swallowed
    await stack.start("gateway", "projector")
    stop = asyncio.Event()
    nc = await nats.connect(fast_settings.nats_url)
    swallowing = asyncio.create_task(black_hole(nc, stack.tenant.id, stop))
    try:
        before = actions("fail")
        job_id = await insert_lost_job(fast_settings.database_url, stack.tenant.id)
        job = await stack.finished(job_id, timeout=20)
        assert job["status"] == "failed"
        assert job["error"] == {
            "type": "stalled",
            "message": "no progress after 2 re-drives: the log no longer drives this job",
        }
        assert await last_submission_id(js, job_id) == f"{job_id}.redrive.2"
        row = await job_row(fast_settings.database_url, job_id)
        assert row["redrives"] == 2
        assert row["submitted_events"] == 2
        assert actions("fail") == before + 1
    finally:
        stop.set()
        await swallowing
        await nc.close()
        await stack.close()


async def test_a_job_waiting_for_a_renderer_that_is_down_is_not_stalled(fast_settings, js):
    """Renderers down (none running): a lost job is re-driven once; its re-drive then
    waits in the log for a renderer, which is no stall: it is neither re-driven again nor
    failed, however long it waits."""
    stack = Stack(fast_settings)
    await stack.start("gateway", "projector")
    try:
        before = actions("redrive"), actions("fail")
        job_id = await insert_lost_job(fast_settings.database_url, stack.tenant.id)

        async def redriven() -> bool:
            return (await job_row(fast_settings.database_url, job_id))["redrives"] == 1

        await eventually(redriven, 10)
        await asyncio.sleep(4 * fast_settings.stale_after)  # what must not happen: nothing
        assert (await stack.job(job_id))["status"] == "queued"
        assert (await job_row(fast_settings.database_url, job_id))["redrives"] == 1
        assert (actions("redrive"), actions("fail")) == (before[0] + 1, before[1])
    finally:
        await stack.close()


async def test_sweep_waits_for_the_projector_holding_the_lock(fast_settings, js):
    async with (
        bus.open_bus(fast_settings, name="test") as (_, own_js),
        db.open_pool(fast_settings) as pool,
    ):
        job_id = await insert_lost_job(fast_settings.database_url, "ten_test")
        other = await asyncpg.connect(fast_settings.database_url)
        try:
            assert await staledb.try_advisory_lock(other, staledb.RECONCILER_LOCK_ID)
            assert await reconciler.sweep(own_js, pool, fast_settings, IDLE) is None
            await staledb.advisory_unlock(other, staledb.RECONCILER_LOCK_ID)
        finally:
            await other.close()
        assert await reconciler.sweep(own_js, pool, fast_settings, IDLE) == {job_id: "redrive"}
    assert await last_submission_id(js, job_id) == f"{job_id}.redrive.1"


async def test_a_backlog_many_times_stale_after_is_not_a_stall(fast_settings, database_url):
    """One renderer on one tab, 40 jobs queued at once: the last ones wait in the log many
    times `stale_after` (1 s). Waiting is not stalling: every job ends `done`, none is
    re-driven or failed as `stalled`."""
    settings = replace(fast_settings, render_concurrency=1, render_prefetch=0)
    stack = Stack(settings)
    await stack.start()
    redrives, fails = actions("redrive"), actions("fail")
    try:
        ids = [(await stack.submit(HELLO))["id"] for _ in range(40)]
        jobs = [await stack.finished(job_id, timeout=180) for job_id in ids]
    finally:
        await stack.close()
    assert [job["status"] for job in jobs] == ["done"] * 40, [
        job.get("error") for job in jobs if job["status"] != "done"
    ]
    assert actions("redrive") == redrives and actions("fail") == fails
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT max(redrives) FROM jobs") == 0
    finally:
        await conn.close()


async def batch_items_rows(database_url: str, batch_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(
            "SELECT id, status, redrives FROM jobs WHERE batch_id = $1 ORDER BY item_index",
            batch_id,
        )
    finally:
        await conn.close()


async def test_a_batch_s_items_are_judged_by_their_own_durable(fast_settings, js):
    """No renderer runs, so a batch's items wait in their batch's durable while the
    renderers' own durable has nothing outstanding. Waiting there (running, then paused)
    is no stall: nothing is re-driven. Once the batch's durable is gone, nothing drives
    them: they are re-driven, then failed as `stalled`, which ends the batch."""
    stack = Stack(fast_settings)
    await stack.start("gateway", "projector", "conductor")
    try:
        items = [{"data": {"name": f"n{i}"}} for i in range(3)]
        body = {"template": HELLO["template"], "items": items}
        async with stack.client.post(f"{stack.url}/batches", json=body) as response:
            assert response.status == 202, await response.text()
            batch_id = (await response.json())["id"]

        async def expanded() -> list[asyncpg.Record] | None:
            rows = await batch_items_rows(fast_settings.database_url, batch_id)
            return rows if len(rows) == 3 else None

        await eventually(expanded, 20)
        await asyncio.sleep(4 * fast_settings.stale_after)  # what must not happen: nothing
        rows = await batch_items_rows(fast_settings.database_url, batch_id)
        assert [(r["status"], r["redrives"]) for r in rows] == [("queued", 0)] * 3
        async with stack.client.post(f"{stack.url}/batches/{batch_id}/pause") as response:
            assert response.status == 202

        async def paused() -> bool:  # the projection, which the reconciler reads
            async with stack.client.get(f"{stack.url}/batches/{batch_id}") as response:
                return bool((await response.json())["status"] == "paused")

        await eventually(paused, 10)
        await js.delete_consumer(subjects.STREAM, subjects.bulk_durable(batch_id))
        await asyncio.sleep(4 * fast_settings.stale_after)  # paused: still nothing
        rows = await batch_items_rows(fast_settings.database_url, batch_id)
        assert [r["redrives"] for r in rows] == [0] * 3
        async with stack.client.post(f"{stack.url}/batches/{batch_id}/resume") as response:
            assert response.status == 202

        async def ended() -> dict | None:
            async with stack.client.get(f"{stack.url}/batches/{batch_id}") as response:
                batch = await response.json()
            return batch if batch["status"] in ("done", "failed", "cancelled") else None

        batch = await eventually(ended, 30)
        assert (batch["status"], batch["failed"]) == ("failed", 3)
        rows = await batch_items_rows(fast_settings.database_url, batch_id)
        assert [(r["status"], r["redrives"]) for r in rows] == [("failed", 2)] * 3
        item = await stack.job(f"{batch_id}.0")
        assert item["error"]["type"] == "stalled"
    finally:
        await stack.close()
