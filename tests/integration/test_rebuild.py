"""`pressroom projector --rebuild` gives back the same read model from the log alone.

Verifies: after a stack finished one job `done` (with a webhook) and one `failed` (a
template syntax error) and stopped, a rebuild against the same NATS and PostgreSQL
empties the tables, replays the stream and ends with the same statuses, attempts, error
messages, webhook deliveries and usage; its one-line summary counts the events and the
jobs by status; a bogus row that is in no event is gone, wrong monthly usage is counted
again and a job's lost usage row comes back (each job still counted once). Rebuilt
keeping history (as a restore does) after the log's first messages aged out, the rows of a
job wholly before the log stay as they were, where a plain rebuild drops them.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from services.core.log import bus
from services.core.model import subjects
from services.core.runtime.settings import Settings
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
        usage = await conn.fetch("SELECT * FROM usage_months ORDER BY tenant_id, month")
        documents = await conn.fetch("SELECT * FROM usage_documents ORDER BY job_id")
    finally:
        await conn.close()
    return {
        "jobs": jobs,
        "events": events,
        "hooks": [dict(h) for h in hooks],
        "usage": [dict(u) for u in usage],
        "documents": [dict(d) for d in documents],
    }


async def add_bogus_rows(database_url: str) -> None:
    """A job in no event, wrong monthly usage, and a job's usage row lost."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO jobs (id, status, created_at) VALUES ('not-in-the-log', 'running', now())"
        )
        await conn.execute("UPDATE usage_months SET succeeded = 999, pages = 0")
        await conn.execute(
            "DELETE FROM usage_documents WHERE job_id IN "
            "(SELECT job_id FROM usage_documents WHERE outcome = 'failed')"
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
    assert [(u["succeeded"], u["failed"]) for u in before["usage"]] == [(1, 1)]
    assert len(before["documents"]) == 2
    await add_bogus_rows(settings.database_url)

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


async def test_a_rebuild_keeping_history_keeps_the_jobs_the_log_has_aged_out_of(
    settings: Settings,
):
    """`keep_history` (what `pressroom restore` asks): the log's first messages gone, as
    retention drops them, the rows of a job whose whole history preceded the log stay,
    and the jobs the log still holds are made again; a plain rebuild drops the first."""
    stack = Stack(settings)
    await stack.start()
    try:
        old = await stack.submit({"template": "<p>old</p>"})
        assert (await stack.finished(old["id"]))["status"] == "done"
        new = await stack.submit({"template": "<p>new</p>"})
        assert (await stack.finished(new["id"]))["status"] == "done"
    finally:
        await stack.close()
    before = await snapshot(settings.database_url)
    conn = await asyncpg.connect(settings.database_url)
    try:
        first_of_new = await conn.fetchval(
            "SELECT min(stream_seq) FROM job_events WHERE job_id = $1", new["id"]
        )
        aged = await conn.fetchval("SELECT count(*) FROM job_events WHERE job_id = $1", old["id"])
    finally:
        await conn.close()
    async with bus.open_bus(settings, name="test") as (_, js):
        await js.purge_stream(subjects.STREAM, seq=first_of_new)  # what retention would do

    summary = await rebuild.rebuild(settings, asyncio.Event(), keep_history=True)
    assert await snapshot(settings.database_url) == before
    assert summary.events == before["events"]  # the old job's rows, the new job's replay
    await rebuild.rebuild(settings, asyncio.Event())
    dropped = await snapshot(settings.database_url)
    assert [j["id"] for j in dropped["jobs"]] == [new["id"]]
    assert dropped["events"] == before["events"] - aged
