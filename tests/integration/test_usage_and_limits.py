"""Limits and metering per tenant, on the real stack.

Verifies: usage per tenant and month counts succeeded, failed and cancelled jobs, pages,
bytes and render time, each job once (a second terminal event that slipped past the log's
deduplication changes nothing); failed jobs never use the free tier; each billable document
is a message on the USAGE stream with a stable idempotency key; another tenant's usage is
its own; the admin sees everyone's. Over the rate limit a submission is a 429
`rate_limited` with `Retry-After`, and every answer carries `RateLimit-*` headers; over the
monthly quota a 429 `quota_exceeded`, to which a failed job gives its document back
(test_quotas.py covers what is held while work runs). An `Idempotency-Key` is per tenant,
answers the first job again for the same body (without a second submission in the log)
and a 422 naming it for another body; the bucket that remembers keys keeps them for
PRESSROOM_IDEMPOTENCY_TTL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import msgspec
import nats
import pytest

from services.core.log import bus
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.gateway import idempotency
from tests.conftest import ADMIN, Stack, Tenant, admin_call, eventually
from tests.integration.test_tenants import call

HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}}
BROKEN = {"template": "<p>{{ missing }}</p>"}


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, auth_refresh=0.2, free_tier=2))
    await stack.start()
    yield stack
    await stack.close()


async def finish(stack: Stack, tenant: Tenant, body: dict[str, Any]) -> dict[str, Any]:
    status, accepted, _ = await call(tenant.http, "POST", f"{stack.url}/jobs", json=body)
    assert status == 202, accepted

    async def ended() -> dict[str, Any] | None:
        _, job, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{accepted['id']}")
        return job if job["status"] in {"done", "failed", "cancelled"} else None

    job: dict[str, Any] = await eventually(ended, 60)
    return job


async def usage_of(stack: Stack, tenant: Tenant) -> dict[str, Any]:
    status, usage, _ = await call(tenant.http, "GET", f"{stack.url}/usage")
    assert status == 200, usage
    return dict(usage)


async def usage_messages(settings: Settings) -> list[events.DocumentUsed]:
    nc = await nats.connect(settings.nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(subjects.USAGE_STREAM)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            raw = await js.get_msg(subjects.USAGE_STREAM, seq)
            found.append(msgspec.json.decode(raw.data, type=events.DocumentUsed))
        return found
    finally:
        await nc.close()


async def test_usage_counts_each_job_once_and_bills_beyond_the_free_tier(stack: Stack):
    tenant, other = stack.tenant, await stack.new_tenant()
    failed = await finish(stack, tenant, BROKEN)
    assert failed["status"] == "failed"
    done = [await finish(stack, tenant, HELLO) for _ in range(3)]
    assert all(job["status"] == "done" for job in done)
    await finish(stack, other, HELLO)

    async def counted() -> dict[str, Any] | None:
        usage = await usage_of(stack, tenant)
        return usage if usage["succeeded"] + usage["failed"] == 4 else None

    usage = await eventually(counted, 10, "four jobs counted")
    month = dt.datetime.now(dt.UTC).strftime("%Y-%m")
    assert usage["month"] == month and usage["tenant"] == tenant.id
    assert (usage["succeeded"], usage["failed"], usage["cancelled"]) == (3, 1, 0)
    assert usage["pages"] == 3 and usage["bytes"] == sum(job["bytes"] for job in done)
    assert usage["render_seconds"] > 0
    # The free tier is 2 successful documents: the failed job used none of it.
    assert (usage["free_tier"], usage["billable"]) == (2, 1)
    # No quota: nothing is held, nothing is left to count down.
    assert (usage["monthly_quota"], usage["held"], usage["quota_left"]) == (None, 0, None)
    assert (await usage_of(stack, other))["succeeded"] == 1

    billed = await usage_messages(stack.settings)
    assert [(u.tenant, u.job_id, u.ordinal) for u in billed] == [(tenant.id, done[2]["id"], 3)]
    assert billed[0].idempotency_key == f"pressroom-document-{done[2]['id']}"
    assert billed[0].month == month

    everyone = await admin_call(tenant.http, "GET", f"{stack.url}/admin/usage?month={month}")
    rows = {row["tenant_id"]: row for row in everyone["tenants"]}
    assert rows[tenant.id]["billable"] == 1 and rows[tenant.id]["name"] == tenant.name
    assert rows[other.id]["succeeded"] == 1
    # The operator sees each tenant's usage as the tenant does, quota fields included.
    for each in (tenant, other):
        row, own = dict(rows[each.id]), await usage_of(stack, each)
        assert (row.pop("tenant_id"), row.pop("name")) == (each.id, each.name)
        assert (own.pop("tenant"), own.pop("month")) == (each.id, month)
        assert row == own and "quota_left" in row, (row, own)

    # A second `done` for a finished job (a re-render after the log's deduplication window):
    # the job keeps its first result and is not counted or billed again.
    first = done[2]
    again = events.JobDone(
        job_id=first["id"], tenant=tenant.id, attempt=2, object_key="jobs/x.pdf", bytes=1,
        pages=9, render_ms=1,
    )  # fmt: skip
    nc = await nats.connect(stack.settings.nats_url)
    try:
        await bus.publish(nc.jetstream(), again, msg_id=f"{first['id']}.terminal.again")
    finally:
        await nc.close()

    async def projected() -> bool:
        _, timeline, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{first['id']}/events")
        return [e["type"] for e in timeline["events"]].count("done") == 2

    await eventually(projected, 10, "the second done in the timeline")
    await eventually(lambda: _projector_idle(stack), 10, "the projector caught up")
    assert await usage_of(stack, tenant) == usage
    assert len(await usage_messages(stack.settings)) == 1
    _, job, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{first['id']}")
    assert (job["pages"], job["bytes"]) == (first["pages"], first["bytes"])


async def _projector_idle(stack: Stack) -> bool:
    nc = await nats.connect(stack.settings.nats_url)
    try:
        info = await nc.jetstream().consumer_info(subjects.STREAM, subjects.PROJECTOR)
    finally:
        await nc.close()
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


async def test_usage_month_must_be_a_month(stack: Stack):
    for bad in ("2026-13", "26-11", "november"):
        status, body, _ = await call(stack.client, "GET", f"{stack.url}/usage?month={bad}")
        assert (status, body["error"]["field"]) == (400, "month"), body
    status, body, _ = await call(stack.client, "GET", f"{stack.url}/usage?month=2001-01")
    assert (status, body["succeeded"], body["billable"]) == (200, 0, 0)


async def test_over_the_rate_limit_is_429_with_retry_after(stack: Stack):
    slow = await stack.new_tenant(rate_limit={"per_second": 0.2, "burst": 2})
    answers = [await call(slow.http, "POST", f"{stack.url}/jobs", json=HELLO) for _ in range(3)]
    assert [status for status, _, _ in answers] == [202, 202, 429]
    remaining = [headers["RateLimit-Remaining"] for _, _, headers in answers]
    assert remaining == ["1", "0", "0"]
    assert all(headers["RateLimit-Limit"] == "2" for _, _, headers in answers)
    status, body, headers = answers[2]
    assert body["error"]["type"] == "rate_limited"
    assert "0.2 per second" in body["error"]["message"]
    assert 1 <= int(headers["Retry-After"]) <= 5
    # Reading is not limited, and says how the bucket stands.
    status, _, headers = await call(slow.http, "GET", f"{stack.url}/usage")
    assert status == 200 and int(headers["RateLimit-Reset"]) >= 1
    # Another tenant has a bucket of its own.
    status, _, _ = await call(stack.client, "POST", f"{stack.url}/jobs", json=HELLO)
    assert status == 202
    # The admin raises the limit: in force at once, the bucket made anew.
    raised = {"rate_limit": {"per_second": 50, "burst": 100}}
    tenant_url = f"{stack.url}/admin/tenants/{slow.id}"
    changed = await admin_call(slow.http, "PATCH", tenant_url, raised)
    assert changed["rate_limit"] == {"per_second": 50, "burst": 100}
    assert changed["monthly_quota"] is None  # left out: unchanged
    status, _, headers = await call(slow.http, "POST", f"{stack.url}/jobs", json=HELLO)
    assert (status, headers["RateLimit-Limit"]) == (202, "100")
    back = await admin_call(slow.http, "PATCH", tenant_url, {"rate_limit": None})
    assert back["rate_limit"] is None  # the installation's default again
    status, body, _ = await call(slow.http, "PATCH", tenant_url, json={"burst": 1}, headers=ADMIN)
    assert (status, body["error"]["field"]) == (400, "burst")


async def test_over_the_monthly_quota_is_429_quota_exceeded(stack: Stack):
    """A failed job gives back the document it held, so the next job of a tenant with a
    quota of 1 is accepted; once that one is done, the quota is used up until the month
    ends. Another tenant without a quota is unaffected."""
    capped = await stack.new_tenant(monthly_quota=1)
    assert (await finish(stack, capped, BROKEN))["status"] == "failed"
    assert (await finish(stack, capped, HELLO))["status"] == "done"
    status, body, headers = await call(capped.http, "POST", f"{stack.url}/jobs", json=HELLO)
    assert (status, body["error"]["type"]) == (429, "quota_exceeded"), body
    message = body["error"]["message"]
    assert "quota of 1 successful documents: 1 succeeded this month" in message
    assert "renews on" in message
    assert int(headers["Retry-After"]) > 0
    status, _, _ = await call(stack.client, "POST", f"{stack.url}/jobs", json=HELLO)
    assert status == 202


async def test_idempotency_keys_are_per_tenant_and_refuse_another_body(stack: Stack):
    tenant, other = stack.tenant, await stack.new_tenant()
    key = {"Idempotency-Key": "invoice-2026-11-0042"}
    url = f"{stack.url}/jobs"
    status, first, _ = await call(tenant.http, "POST", url, json=HELLO, headers=key)
    assert status == 202
    await stack.finished(first["id"])
    status, again, _ = await call(tenant.http, "POST", url, json=HELLO, headers=key)
    assert (status, again["id"]) == (202, first["id"])
    changed = {**HELLO, "data": {"name": "Bo"}}
    status, body, _ = await call(tenant.http, "POST", url, json=changed, headers=key)
    assert status == 422, body
    assert (body["error"]["type"], body["error"]["field"]) == (
        "idempotency_conflict",
        "Idempotency-Key",
    )
    status, theirs, _ = await call(other.http, "POST", url, json=changed, headers=key)
    assert status == 202 and theirs["id"] != first["id"]
    _, timeline, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{first['id']}/events")
    assert [e["type"] for e in timeline["events"]] == ["submitted", "started", "done"]
    _, job, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{first['id']}")
    assert job["status"] == "done"


async def test_idempotency_keys_outlive_the_logs_deduplication_window(settings: Settings):
    """With the log's deduplication window at 1 s, a key repeated after it still gives the
    first job back and submits nothing: the key-value bucket answers, not the window."""
    stack = Stack(replace(settings, dedup_window=1.0))
    await stack.start()
    try:
        key = {"Idempotency-Key": "statement-7"}
        first = await stack.submit(HELLO, **key)
        done = await stack.finished(first["id"])
        await asyncio.sleep(1.5)  # not a wait for an event: the window must pass
        again = await stack.submit(HELLO, **key)
        assert again["id"] == first["id"]
        _, timeline, _ = await call(stack.client, "GET", f"{stack.url}/jobs/{first['id']}/events")
        assert [e["type"] for e in timeline["events"]] == ["submitted", "started", "done"]
        assert (await stack.job(first["id"]))["finished_at"] == done["finished_at"]
        nc = await nats.connect(stack.settings.nats_url)
        try:
            status = await (await nc.jetstream().key_value(idempotency.BUCKET)).status()
        finally:
            await nc.close()
        assert status.ttl == stack.settings.idempotency_ttl == 86400
    finally:
        await stack.close()


async def test_admin_keys_are_not_tenant_keys(stack: Stack):
    status, body, _ = await call(stack.client, "GET", f"{stack.url}/usage", headers=ADMIN)
    assert status == 401, body


async def test_a_changed_idempotency_ttl_reaches_the_existing_bucket(settings: Settings):
    """An operator raises PRESSROOM_IDEMPOTENCY_TTL and restarts: the bucket made with the
    old TTL keeps keys for the new one."""
    async with bus.open_bus(settings, name="test") as (_, js):
        await idempotency.open_bucket(js, replace(settings, idempotency_ttl=3600.0))
        bucket = await idempotency.open_bucket(js, replace(settings, idempotency_ttl=7200.0))
        assert (await bucket.status()).ttl == 7200.0
