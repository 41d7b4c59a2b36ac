"""Monthly quotas count what is committed: succeeded documents and accepted, unfinished work.

Verifies, on the real gateway, projector and conductor (no renderer: work stays queued
until a test ends it, by a cancel or by publishing the event a renderer would): many
concurrent submissions, single jobs and batches at once, by a tenant close to its quota
never accept more documents than the quota; the refusals are 429 `quota_exceeded` with
`Retry-After`; a cancelled or failed job and a cancelled batch's items give their
documents back, a done job keeps its document (as usage); the projector's sweep releases
a hold taken by a gateway that never published (it died) but keeps one whose job is in
the log, and releases a hold of work the projection shows ended; a job the log refuses
gives its hold back at once; a rebuild of the projection replays every end and gives
back nothing twice; with PostgreSQL away a tenant with a quota gets 503 with
`Retry-After` naming the cause, one without a quota still 202. Throughout, the counter
the check reads equals the sum of the tenant's holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import nats
import pytest

from services.core.database import db, holds
from services.core.log import bus
from services.core.model import events
from services.core.runtime.settings import Settings
from services.projector import quota, rebuild
from tests.conftest import Postgres, Stack, Tenant, admin_call, eventually
from tests.integration.test_templates import database_refusing_connections
from tests.integration.test_tenants import call

ADMIN_SHOWN = ("monthly_quota", "held", "quota_left", "succeeded")
HELLO = {"template": "<p>{{ n }}</p>", "data": {"n": 1}}


def batch_of(size: int) -> dict[str, Any]:
    return {"template": "<p>{{ n }}</p>", "items": [{"data": {"n": i}} for i in range(size)]}


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    """Gateway, projector and conductor: accepted work waits in the log."""
    stack = Stack(replace(settings, auth_refresh=0.2))
    await stack.start("gateway", "projector", "conductor")
    yield stack
    await stack.close()


async def post(tenant: Tenant, stack: Stack, path: str, body: Any) -> tuple[int, Any, Any]:
    return await call(tenant.http, "POST", f"{stack.url}{path}", json=body)


async def publish(settings: Settings, event: events.AnyEvent) -> None:
    """Put a job's event on the log, as the renderer would."""
    nc = await nats.connect(settings.nats_url)
    try:
        await bus.publish_terminal(nc.jetstream(), event)
    finally:
        await nc.close()


async def usage_of(stack: Stack, tenant: Tenant) -> dict[str, Any]:
    status, usage, _ = await call(tenant.http, "GET", f"{stack.url}/usage")
    assert status == 200, usage
    return dict(usage)


async def admin_usage(stack: Stack, tenant: Tenant) -> dict[str, Any]:
    """The tenant's row of the operator's `GET /admin/usage`: its quota fields."""
    everyone = await admin_call(tenant.http, "GET", f"{stack.url}/admin/usage")
    rows = {row["tenant_id"]: row for row in everyone["tenants"]}
    assert tenant.id in rows, everyone
    return {k: rows[tenant.id][k] for k in ADMIN_SHOWN}


async def ended(stack: Stack, tenant: Tenant, job_id: str) -> bool:
    _, job, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{job_id}")
    return job["status"] in {"done", "failed", "cancelled"}


async def accepts_one_more(stack: Stack, tenant: Tenant) -> dict[str, Any] | None:
    """Submit a job: its answer if accepted, None if refused over the quota."""
    status, body, _ = await post(tenant, stack, "/jobs", HELLO)
    if status == 429:
        assert body["error"]["type"] == "quota_exceeded", body
        return None
    assert status == 202, body
    return dict(body)


async def held_units(settings: Settings, tenant: Tenant) -> tuple[int, int]:
    """The tenant's held units as the quota check reads them (`quota_held`), and the sum
    of its holds: the two must agree, whoever changed the holds."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        counted = await conn.fetchval(
            "SELECT COALESCE(sum(units), 0) FROM quota_held WHERE tenant_id = $1", tenant.id
        )
        summed = await conn.fetchval(
            "SELECT COALESCE(sum(units), 0) FROM quota_holds WHERE tenant_id = $1", tenant.id
        )
    finally:
        await conn.close()
    return int(counted), int(summed)


def done(job_id: str, tenant: Tenant) -> events.JobDone:
    return events.JobDone(
        job_id=job_id, tenant=tenant.id, attempt=1, object_key=f"jobs/{tenant.id}/{job_id}.pdf",
        bytes=100, pages=1, render_ms=5,
    )  # fmt: skip


async def test_concurrent_jobs_and_batches_never_take_a_tenant_past_its_quota(stack: Stack):
    """A tenant with 3 documents done and a quota of 28 fires 40 jobs and 6 batches of 4
    at once: exactly 25 more documents are accepted, whatever the order."""
    tenant = await stack.new_tenant(monthly_quota=28)
    for _ in range(3):
        accepted = await accepts_one_more(stack, tenant)
        assert accepted is not None
        await publish(stack.settings, done(accepted["id"], tenant))
    await eventually(lambda: _succeeded(stack, tenant, 3), 15, "three documents counted")

    singles = [post(tenant, stack, "/jobs", HELLO) for _ in range(40)]
    batches = [post(tenant, stack, "/batches", batch_of(4)) for _ in range(6)]
    answers = await asyncio.gather(*singles, *batches)

    accepted_units = sum(1 for status, _, _ in answers[:40] if status == 202)
    accepted_units += sum(4 for status, _, _ in answers[40:] if status == 202)
    refused = [(body, headers) for status, body, headers in answers if status != 202]
    assert accepted_units == 25, [status for status, _, _ in answers]
    for body, headers in refused:
        assert body["error"]["type"] == "quota_exceeded", body
        assert int(headers["Retry-After"]) > 0
    # Usage still counts only what succeeded.
    assert (await usage_of(stack, tenant))["succeeded"] == 3
    assert await accepts_one_more(stack, tenant) is None
    assert await held_units(stack.settings, tenant) == (25, 25)


async def _succeeded(stack: Stack, tenant: Tenant, count: int) -> bool:
    return bool((await usage_of(stack, tenant))["succeeded"] == count)


async def test_failed_and_cancelled_jobs_give_their_document_back_and_done_keeps_it(
    stack: Stack,
):
    tenant = await stack.new_tenant(monthly_quota=3)
    first, second, third = [await accepts_one_more(stack, tenant) for _ in range(3)]
    assert first and second and third
    status, body, headers = await post(tenant, stack, "/jobs", HELLO)
    assert (status, body["error"]["type"]) == (429, "quota_exceeded")
    assert "3 are held by accepted work that has not finished" in body["error"]["message"]
    assert 0 < int(headers["Retry-After"]) <= 60  # work ending frees it, not next month

    status, _, _ = await call(tenant.http, "DELETE", f"{stack.url}/jobs/{first['id']}")
    assert status == 200
    assert await eventually(lambda: accepts_one_more(stack, tenant), 15, "cancel gave back")

    failed = events.JobFailed(
        job_id=second["id"], tenant=tenant.id, attempt=1,
        error=events.ErrorInfo(type="template", message="'x' is undefined"),
    )  # fmt: skip
    await publish(stack.settings, failed)
    assert await eventually(lambda: accepts_one_more(stack, tenant), 15, "failure gave back")

    await publish(stack.settings, done(third["id"], tenant))
    await eventually(lambda: _succeeded(stack, tenant, 1), 15, "the done job counted")
    assert await accepts_one_more(stack, tenant) is None  # the done job keeps its document


async def test_a_batch_holds_every_item_and_its_cancel_gives_them_back(stack: Stack):
    tenant = await stack.new_tenant(monthly_quota=5)
    status, batch, _ = await post(tenant, stack, "/batches", batch_of(4))
    assert status == 202, batch
    assert await accepts_one_more(stack, tenant) is not None
    status, body, _ = await post(tenant, stack, "/batches", batch_of(1))
    assert (status, body["error"]["type"]) == (429, "quota_exceeded"), body
    assert "a batch of 1 document does not fit" in body["error"]["message"]
    usage = await usage_of(stack, tenant)
    assert (usage["monthly_quota"], usage["held"], usage["quota_left"]) == (5, 5, 0), usage
    # listed for the operator although it made nothing yet, with the same holds
    assert await admin_usage(stack, tenant) == {k: usage[k] for k in ADMIN_SHOWN}

    async def cancelled() -> bool:
        url = f"{stack.url}/batches/{batch['id']}"
        status, _, _ = await call(tenant.http, "POST", f"{url}/cancel")
        assert status in (200, 202)
        _, seen, _ = await call(tenant.http, "GET", url)
        return bool(seen["status"] == "cancelled")

    await eventually(cancelled, 30, "the batch cancelled")
    assert await held_units(stack.settings, tenant) == (1, 1)
    usage = await usage_of(stack, tenant)
    assert (usage["held"], usage["quota_left"], usage["succeeded"]) == (1, 4, 0), usage
    assert await admin_usage(stack, tenant) == {k: usage[k] for k in ADMIN_SHOWN}
    status, past, _ = await call(tenant.http, "GET", f"{stack.url}/usage?month=2020-01")
    assert status == 200 and (past["held"], past["quota_left"]) == (0, None), past
    status, again, _ = await post(tenant, stack, "/batches", batch_of(4))
    assert status == 202, again
    assert await accepts_one_more(stack, tenant) is None


async def test_a_hold_never_published_is_swept_and_one_in_the_log_is_kept(settings: Settings):
    """A gateway that took a hold and died before publishing: after the grace period the
    sweep asks the log, finds no submission and gives the hold back. A held job that is
    in the log (its projector not running yet) keeps its hold."""
    stack = Stack(settings)
    await stack.start("gateway")
    try:
        tenant = await stack.new_tenant(monthly_quota=2)
        kept = await accepts_one_more(stack, tenant)
        assert kept is not None
        async with db.open_pool(settings, size=2) as pool:
            lost = await holds.take(pool, tenant.id, "lost-job", holds.HoldKind.JOB, 1, 2)
            assert lost.taken
            assert await accepts_one_more(stack, tenant) is None
            async with db.connection(pool) as conn:
                await _age_holds(conn, holds.PENDING_GRACE + 1)
                async with bus.open_bus(settings, name="test") as (_, js):
                    assert await quota.sweep(js, conn) == 1
            ids = [r["id"] for r in await pool.fetch("SELECT id FROM quota_holds ORDER BY id")]
        assert ids == [kept["id"]]
        assert await accepts_one_more(stack, tenant) is not None
        assert await accepts_one_more(stack, tenant) is None
    finally:
        await stack.close()


async def test_a_hold_of_work_that_has_ended_is_swept(stack: Stack):
    """A hold taken for a job the projection shows ended (its id used again once its
    `Idempotency-Key` expired, say) would never be released by an end: the sweep does."""
    tenant = await stack.new_tenant(monthly_quota=1)
    job = await accepts_one_more(stack, tenant)
    assert job is not None
    status, _, _ = await call(tenant.http, "DELETE", f"{stack.url}/jobs/{job['id']}")
    assert status == 200
    await eventually(lambda: ended(stack, tenant, job["id"]), 15, "the job cancelled")
    async with db.open_pool(stack.settings, size=2) as pool:
        again = await holds.take(pool, tenant.id, job["id"], holds.HoldKind.JOB, 1, 1)
        assert again.taken
        assert await accepts_one_more(stack, tenant) is None
        async with db.connection(pool) as conn, bus.open_bus(stack.settings, name="t") as (_, js):
            assert await quota.sweep(js, conn) == 1
    assert await held_units(stack.settings, tenant) == (0, 0)
    assert await accepts_one_more(stack, tenant) is not None


async def _age_holds(conn: asyncpg.Connection, seconds: float) -> None:
    """Move every hold's taking back in time, as if `seconds` had passed."""
    await conn.execute(
        "UPDATE quota_holds SET created_at = created_at - make_interval(secs => $1)", seconds
    )


async def test_a_job_the_log_refuses_gives_its_hold_back_at_once(settings: Settings):
    stack = Stack(replace(settings, stream_max_msg_size=64 * 1024))
    await stack.start("gateway")
    try:
        tenant = await stack.new_tenant(monthly_quota=1)
        large = {"template": "<p>{{ s }}</p>", "data": {"s": "x" * 100_000}}
        status, body, _ = await post(tenant, stack, "/jobs", large)
        assert (status, body["error"]["type"]) == (413, "too_large"), body
        assert await accepts_one_more(stack, tenant) is not None
    finally:
        await stack.close()


async def test_a_rebuild_replays_every_end_and_gives_back_nothing_twice(settings: Settings):
    """A batch item cancelled gave its document back once; the rebuild replays that end
    into emptied tables, and the tenant still cannot pass its quota."""
    front = Stack(replace(settings, auth_refresh=0.2))
    await front.start("gateway", "conductor")
    projector = Stack(settings)
    await projector.start("projector")
    try:
        tenant = await front.new_tenant(monthly_quota=4)
        status, batch, _ = await post(tenant, front, "/batches", batch_of(3))
        assert status == 202, batch
        assert await accepts_one_more(front, tenant) is not None
        item = f"{batch['id']}.0"
        await eventually(lambda: _item_exists(front, tenant, item), 30, "the batch expanded")
        status, _, _ = await call(tenant.http, "DELETE", f"{front.url}/jobs/{item}")
        assert status == 200
        assert await eventually(lambda: accepts_one_more(front, tenant), 15, "item gave back")
        assert await accepts_one_more(front, tenant) is None

        await projector.close()
        summary = await rebuild.rebuild(settings, asyncio.Event())
        assert summary.complete and summary.jobs.get("cancelled") == 1, summary
        projector = Stack(settings)
        await projector.start("projector")
        assert await ended(front, tenant, item)
        assert await accepts_one_more(front, tenant) is None
        assert await held_units(settings, tenant) == (4, 4)
    finally:
        await projector.close()
        await front.close()


async def _item_exists(stack: Stack, tenant: Tenant, job_id: str) -> bool:
    status, _, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{job_id}")
    return status == 200


async def test_without_postgresql_a_tenant_with_a_quota_gets_503_and_others_202(
    settings: Settings, postgres: Postgres
):
    stack = Stack(replace(settings, auth_refresh=0.2))
    await stack.start("gateway")
    try:
        capped = await stack.new_tenant(monthly_quota=100)
        free = await stack.new_tenant()
        async with database_refusing_connections(postgres, settings.database_url):
            status, body, headers = await post(capped, stack, "/jobs", HELLO)
            assert (status, body["error"]["type"]) == (503, "unavailable"), body
            message = body["error"]["message"]
            assert "monthly quota" in message and "PostgreSQL" in message, message
            assert int(headers["Retry-After"]) > 0
            status, body, _ = await post(capped, stack, "/batches", batch_of(2))
            assert status == 503, body
            status, body, _ = await post(free, stack, "/jobs", HELLO)
            assert status == 202, body
        assert await eventually(lambda: accepts_one_more(stack, capped), 15, "back")
    finally:
        await stack.close()
