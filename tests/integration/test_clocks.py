"""Row timestamps come from one clock each: the log's for when things happened, the
database's for the services' own records. A producer's clock never reaches a row."""

from __future__ import annotations

import datetime as dt
import time
import types
import uuid
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from services.core.log import bus
from services.core.model import events
from services.core.runtime.settings import Settings
from services.gateway import auth
from tests.conftest import Stack, admin_call, eventually

DAY = 86400.0


def parsed(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def within(moment: dt.datetime, start: dt.datetime, end: dt.datetime) -> bool:
    return start - dt.timedelta(seconds=5) <= moment <= end + dt.timedelta(seconds=5)


async def test_a_producers_wrong_clock_reaches_no_timestamp(stack: Stack):
    """A gateway a day behind, a renderer in another year: the job's timestamps, its
    timeline and its staleness clock all say when the log stored each event."""
    job_id, tenant, now = f"job_{uuid.uuid4().hex}", stack.tenant.id, time.time()
    wrong = [
        events.JobSubmitted(job_id=job_id, tenant=tenant, template="<p>x</p>", at=now - DAY),
        events.JobStarted(job_id=job_id, tenant=tenant, attempt=1, worker="w", at=now + 400 * DAY),
        events.JobFailed(
            job_id=job_id, tenant=tenant, attempt=1, at=1.0,
            error=events.ErrorInfo(type="template", message="boom"),
        ),
    ]  # fmt: skip
    start = dt.datetime.now(dt.UTC)
    async with bus.open_bus(stack.settings, name="skewed") as (_, js):
        for event in wrong:
            await bus.publish(js, event)
    end = dt.datetime.now(dt.UTC)

    job = await stack.finished(job_id)
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
        timeline = (await response.json())["events"]
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        updated_at = await conn.fetchval("SELECT updated_at FROM jobs WHERE id = $1", job_id)
        rows = await conn.fetch("SELECT at FROM job_events WHERE job_id = $1", job_id)
    finally:
        await conn.close()

    times = [parsed(job[name]) for name in ("created_at", "started_at", "finished_at")]
    assert all(within(t, start, end) for t in times), job
    assert times == sorted(times)
    assert [entry["type"] for entry in timeline] == ["submitted", "started", "failed"]
    stored = [parsed(entry["at"]) for entry in timeline]
    assert stored == sorted(stored) and all(within(t, start, end) for t in stored), timeline
    assert all(within(row["at"], start, end) for row in rows)
    assert within(updated_at, start, dt.datetime.now(dt.UTC))


async def test_a_keys_last_use_is_the_databases_time_not_the_gateways(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    """The gateway that saw the key in use has a clock stuck in 1970."""
    monkeypatch.setattr(
        auth, "time", types.SimpleNamespace(time=lambda: 1.0, monotonic=time.monotonic)
    )
    stack = Stack(replace(settings, auth_refresh=0.1))
    await stack.start("gateway")
    try:
        start = dt.datetime.now(dt.UTC)
        async with stack.client.get(f"{stack.url}/usage") as response:
            assert response.status == 200
        keys_url = f"{stack.url}/admin/tenants/{stack.tenant.id}/keys"

        async def last_used() -> Any:
            keys = (await admin_call(stack.client, "GET", keys_url))["keys"]
            return keys[0]["last_used_at"]

        used = parsed(await eventually(last_used, 15, "last_used_at recorded"))
    finally:
        await stack.close()
    assert within(used, start, dt.datetime.now(dt.UTC)), used
