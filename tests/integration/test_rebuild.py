"""`pressroom projector --rebuild` gives back the same read model from the log alone.

Verifies: after a stack finished one job `done` (with a webhook) and one `failed` (a
template syntax error) and stopped, a rebuild against the same NATS and PostgreSQL
empties the tables, replays the stream and ends with the same statuses, attempts, error
messages and webhook deliveries; its one-line summary counts the events and the jobs by
status; and a bogus row that is in no event is gone.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from services.core.settings import Settings
from services.projector import main as projector_main
from services.projector import rebuild
from tests.conftest import Receiver, Stack, eventually

COLUMNS = "id, status, attempts, error_type, error_message, object_key, pages, webhook_url"


async def snapshot(database_url: str) -> dict:
    conn = await asyncpg.connect(database_url)
    try:
        jobs = [dict(r) for r in await conn.fetch(f"SELECT {COLUMNS} FROM jobs ORDER BY id")]
        events = await conn.fetchval("SELECT count(*) FROM job_events")
        hooks = await conn.fetch(
            "SELECT job_id, attempt, outcome FROM webhook_deliveries ORDER BY stream_seq"
        )
    finally:
        await conn.close()
    return {"jobs": jobs, "events": events, "hooks": [dict(h) for h in hooks]}


async def add_bogus_row(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO jobs (id, status, created_at) VALUES ('not-in-the-log', 'running', now())"
        )
    finally:
        await conn.close()


async def finish_two_jobs(stack: Stack, receiver: Receiver) -> None:
    good = await stack.submit({"template": "<p>Hi {{ name }}</p>", "data": {"name": "Ana"},
                               "webhook_url": receiver.url})  # fmt: skip
    bad = await stack.submit({"template": "<p>{{ x</p>"})
    assert (await stack.finished(good["id"]))["status"] == "done"
    failed = await stack.finished(bad["id"])
    assert failed["status"] == "failed" and failed["error"]["type"] == "template"

    async def webhook_recorded() -> bool:
        async with stack.client.get(f"{stack.url}/jobs/{good['id']}/webhooks") as response:
            return bool((await response.json())["attempts"])

    await eventually(webhook_recorded, 20)


async def test_rebuild_replays_the_same_projection(settings: Settings, receiver: Receiver):
    stack = Stack(settings)
    await stack.start()
    try:
        await finish_two_jobs(stack, receiver)
    finally:
        await stack.close()
    before = await snapshot(settings.database_url)
    await add_bogus_row(settings.database_url)

    summary = await rebuild.rebuild(settings, asyncio.Event())

    after = await snapshot(settings.database_url)
    assert after == before
    assert summary.complete
    assert summary.events == before["events"]
    assert summary.jobs == {"done": 1, "failed": 1}
    assert summary.line() == (
        f"projection rebuilt: {before['events']} events applied; jobs: done=1 failed=1"
    )


def test_rebuild_flag_is_parsed_after_the_command_name():
    assert projector_main.parse_args(["--rebuild"]).rebuild is True
    assert projector_main.parse_args([]).rebuild is False
    with pytest.raises(SystemExit):
        projector_main.parse_args(["--bogus"])
