"""`POST /batches` and `GET /batches/{id}` at the gateway, with only the gateway running.

Verifies: an accepted batch is a 202 with its id, `queued`, its total and a Location; its
item list is stored as JSON Lines with every file name filled in; its `submitted` event is
on the log, with a stored template resolved into it (body, header, footer, version); the
batch reads back `queued` at once (read-your-writes), and is a 404 for another tenant; a
repeated `Idempotency-Key` gives the same batch and one event, and a different request
with it is refused; the route takes bodies far over `PRESSROOM_MAX_BODY_BYTES` and
refuses those over `PRESSROOM_MAX_BATCH_BYTES` with a 413 naming it; a tenant's quota must
hold every item; a projected row reads back with its counts, pace and archive link.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from tests.conftest import Stack

INVOICE = "<h1>Invoice {{ number }}</h1>"


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, max_batch_items=50))
    await stack.start("gateway")
    yield stack
    await stack.close()


async def post_batch(
    stack: Stack, body: Any, session: Any = None, **headers: str
) -> tuple[int, dict[str, Any], Any]:
    """Status, JSON answer and headers of a `POST /batches`."""
    http = session or stack.client
    async with http.post(f"{stack.url}/batches", json=body, headers=headers) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json(), response.headers


async def get_batch(stack: Stack, batch_id: str, session: Any = None) -> tuple[int, Any]:
    http = session or stack.client
    async with http.get(f"{stack.url}/batches/{batch_id}") as response:
        return response.status, await response.json()


async def submission(settings: Settings, batch_id: str) -> events.BatchSubmitted | None:
    async with bus.open_bus(settings, name="test") as (_, js):
        return await timeline.batch_submission(js, batch_id)


async def batch_events_in_log(settings: Settings, batch_id: str) -> int:
    async with bus.open_bus(settings, name="test") as (_, js):
        info = await js.stream_info(subjects.STREAM, subjects_filter=f"batches.{batch_id}.>")
        return sum((info.state.subjects or {}).values())


def stored_items(settings: Settings, tenant: str, batch_id: str) -> list[dict[str, Any]]:
    path = Path(settings.storage_dir) / subjects.batch_items_key(tenant, batch_id)
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def invoices(count: int) -> list[dict[str, Any]]:
    return [{"data": {"number": f"N-{i}"}} for i in range(count)]


async def test_an_accepted_batch_is_stored_logged_and_reads_back_queued(api: Stack):
    items = invoices(3)
    items[1]["filename"] = "second.pdf"
    body = {"template": INVOICE, "items": items, "webhook_url": "https://example.com/hook",
            "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}  # fmt: skip
    status, accepted, headers = await post_batch(api, body)
    assert status == 202, accepted
    batch_id = accepted["id"]
    assert (accepted["status"], accepted["total"]) == ("queued", 3)
    assert headers["Location"] == f"/batches/{batch_id}"
    assert "RateLimit-Remaining" in headers  # the caller is known to the answer too

    lines = stored_items(api.settings, api.tenant.id, batch_id)
    assert [line["filename"] for line in lines] == ["00000.pdf", "second.pdf", "00002.pdf"]
    assert [line["data"] for line in lines] == [item["data"] for item in items]

    event = await submission(api.settings, batch_id)
    assert event is not None
    assert (event.tenant, event.total, event.template) == (api.tenant.id, 3, INVOICE)
    assert event.items_key == subjects.batch_items_key(api.tenant.id, batch_id)
    assert event.webhook_secret is not None and "whsec_" not in event.webhook_secret  # sealed

    status, view = await get_batch(api, batch_id)
    assert status == 200, view
    assert view["id"] == batch_id and view["status"] == "queued"
    assert (view["total"], view["done"], view["progress"], view["url"]) == (3, 0, 0, None)
    assert view["webhook_url"] == "https://example.com/hook" and view["output"] == "zip"


async def test_a_stored_template_is_resolved_into_the_batch(api: Stack):
    template = {"name": "invoice", "body": INVOICE, "footer": "<span>p</span>"}
    async with api.client.post(f"{api.url}/templates", json=template) as response:
        assert response.status == 201
        stored = await response.json()
    body = {"template_id": stored["id"], "items": invoices(2)}
    status, accepted, _ = await post_batch(api, body)
    assert status == 202, accepted
    event = await submission(api.settings, accepted["id"])
    assert event is not None
    assert (event.template, event.template_id, event.template_version) == (INVOICE, stored["id"], 1)
    assert event.options.footer_template == "<span>p</span>"

    status, answer, _ = await post_batch(api, {"template_id": "f" * 32, "items": invoices(1)})
    assert (status, answer["error"]["field"]) == (400, "template_id")


async def test_another_tenant_cannot_see_the_batch(api: Stack):
    status, accepted, _ = await post_batch(api, {"template": INVOICE, "items": invoices(1)})
    assert status == 202
    other = await api.new_tenant()
    status, answer = await get_batch(api, accepted["id"], other.http)
    assert (status, answer["error"]["type"]) == (404, "not_found")
    for unknown in ("b" + "0" * 31, "not-a-batch", "B" + "0" * 31):
        status, _ = await get_batch(api, unknown)
        assert status == 404, unknown


async def test_a_repeated_idempotency_key_gives_the_same_batch_and_one_event(api: Stack):
    body = {"template": INVOICE, "items": invoices(4)}
    first = await post_batch(api, body, **{"Idempotency-Key": "run-7"})
    again = await post_batch(api, body, **{"Idempotency-Key": "run-7"})
    assert first[0] == again[0] == 202
    assert first[1]["id"] == again[1]["id"]
    assert first[2]["Location"] == again[2]["Location"]
    assert await batch_events_in_log(api.settings, first[1]["id"]) == 1

    changed = {"template": INVOICE, "items": invoices(5)}
    status, answer, _ = await post_batch(api, changed, **{"Idempotency-Key": "run-7"})
    assert (status, answer["error"]["field"]) == (422, "Idempotency-Key")
    # A job may use the same key: batches' keys are apart from jobs'.
    job = await api.submit({"template": INVOICE}, **{"Idempotency-Key": "run-7"})
    assert job["id"] != first[1]["id"]


async def test_a_batch_with_a_bad_item_is_a_400_naming_it_and_nothing_is_logged(api: Stack):
    items = invoices(20)
    items[17]["filename"] = "../escape.pdf"
    status, answer, _ = await post_batch(api, {"template": INVOICE, "items": items})
    assert (status, answer["error"]["field"]) == (400, "items[17].filename")
    status, answer, _ = await post_batch(api, {"template": INVOICE, "items": invoices(51)})
    assert (status, answer["error"]["field"]) == (400, "items")
    status, answer, _ = await post_batch(api, {"html": "<p>x</p>", "items": invoices(1)})
    assert (status, answer["error"]["field"]) == (400, "html")


async def test_the_route_has_its_own_body_limit(settings: Settings):
    stack = Stack(replace(settings, max_body_bytes=4096, max_batch_bytes=3 * 2**20))
    await stack.start("gateway")
    try:
        # About 2 MB of items: far over PRESSROOM_MAX_BODY_BYTES, under the batch limit.
        items = [{"data": {"note": "x" * 2000}} for _ in range(1000)]
        big = await post_batch(stack, {"template": INVOICE, "items": items})
        items = [{"data": {"note": "x" * 2000}} for _ in range(1600)]
        huge = await post_batch(stack, {"template": INVOICE, "items": items})
        job = await post_batch(stack, {"template": "x" * 5000, "items": invoices(1)})
        async with stack.client.post(f"{stack.url}/jobs", json={"html": "x" * 5000}) as response:
            job_status, job_answer = response.status, await response.json()
    finally:
        await stack.close()
    assert big[0] == 202, big[1]
    assert big[1]["total"] == 1000
    assert huge[0] == 413
    assert huge[1]["error"]["field"] == "body"
    assert f"{3 * 2**20}" in huge[1]["error"]["message"]
    assert "PRESSROOM_MAX_BATCH_BYTES" in huge[1]["error"]["message"]
    assert job[0] == 202  # a 5 kB batch is fine
    assert job_status == 413 and "PRESSROOM_MAX_BODY_BYTES" in job_answer["error"]["message"]


async def test_a_batch_larger_than_the_quota_left_is_refused(api: Stack):
    tenant = await api.new_tenant(monthly_quota=3)
    status, answer, _ = await post_batch(
        api, {"template": INVOICE, "items": invoices(4)}, tenant.http
    )
    assert (status, answer["error"]["type"]) == (429, "quota_exceeded")
    status, accepted, _ = await post_batch(
        api, {"template": INVOICE, "items": invoices(3)}, tenant.http
    )
    assert status == 202, accepted


async def test_a_projected_batch_reads_back_with_its_counts_and_archive(api: Stack):
    status, accepted, _ = await post_batch(api, {"template": INVOICE, "items": invoices(10)})
    assert status == 202
    batch_id, now = accepted["id"], dt.datetime.now(dt.UTC)
    key = subjects.batch_archive_key(api.tenant.id, batch_id)
    conn = await asyncpg.connect(api.settings.database_url)
    try:  # the projector's row, written by hand: this test is about reading it
        await conn.execute(
            "INSERT INTO batches (id, tenant_id, status, total, done, failed, created_at,"
            " started_at) VALUES ($1, $2, 'running', 10, 3, 1, $3, $4)",
            batch_id, api.tenant.id, now, now - dt.timedelta(seconds=8),
        )  # fmt: skip
        _, running = await get_batch(api, batch_id)
        await conn.execute(
            "UPDATE batches SET status = 'done', done = 9, object_key = $2, bytes = 1234,"
            " finished_at = $3 WHERE id = $1",
            batch_id, key, now,
        )  # fmt: skip
        _, done = await get_batch(api, batch_id)
    finally:
        await conn.close()
    assert (running["status"], running["done"], running["failed"]) == ("running", 3, 1)
    assert running["progress"] == pytest.approx(0.4)
    assert running["rate"] == pytest.approx(0.5, rel=0.2)  # 4 items in about 8 s
    eta = dt.datetime.fromisoformat(running["eta"])
    assert now + dt.timedelta(seconds=8) < eta < now + dt.timedelta(seconds=16)
    assert running["url"] is None and running["finished_at"] is None
    assert (done["status"], done["progress"], done["bytes"]) == ("done", 1.0, 1234)
    assert done["rate"] is None and done["eta"] is None
    assert key in done["url"]


async def test_a_batch_sent_as_json_lines_is_the_same_batch(api: Stack):
    """The batch's fields on the first line, then one item per line: stored and logged
    like a JSON body; a bad line is a 400 naming its item, and nothing is logged."""
    items = invoices(3)
    items[2]["filename"] = "third.pdf"
    lines = [json.dumps({"template": INVOICE}), *(json.dumps(item) for item in items), ""]
    headers = {"Content-Type": "application/x-ndjson"}
    url = f"{api.url}/batches"
    async with api.client.post(url, data="\n".join(lines), headers=headers) as response:
        assert response.status == 202, await response.text()
        accepted = await response.json()
    assert accepted["total"] == 3
    stored = stored_items(api.settings, api.tenant.id, accepted["id"])
    assert [line["filename"] for line in stored] == ["00000.pdf", "00001.pdf", "third.pdf"]
    assert [line["data"] for line in stored] == [item["data"] for item in items]
    event = await submission(api.settings, accepted["id"])
    assert event is not None and (event.total, event.template) == (3, INVOICE)

    broken = "\n".join([json.dumps({"template": INVOICE}), json.dumps(items[0]), "{oops"])
    async with api.client.post(url, data=broken, headers=headers) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["field"] == "items[1]" and "line 3" in error["message"]
