"""End to end through the real gateway, renderer, projector and notifier.

Verifies, for local storage and for S3: the README's curl example gives 202, then `done`
with one attempt and a signed URL whose PDF says "Hi Ana"; the webhook arrives signed per
Standard Webhooks; template errors fail at once with Jinja's message; idempotent
resubmission renders once.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import pypdf
import pytest
from prometheus_client import REGISTRY
from standardwebhooks.webhooks import Webhook

from services.core.runtime.settings import Settings
from tests.conftest import Receiver, Stack, eventually

HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}}


@pytest.fixture
async def s3_stack(s3_settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(s3_settings)
    await stack.start()
    yield stack
    await stack.close()


async def pdf_text(stack: Stack, url: str) -> str:
    async with stack.client.get(url) as response:
        assert response.status == 200
        data = await response.read()
    assert data.startswith(b"%PDF-")
    return "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(data)).pages)


async def job_events(stack: Stack, job_id: str) -> list[str]:
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        rows = await conn.fetch(
            "SELECT type FROM job_events WHERE job_id = $1 ORDER BY stream_seq", job_id
        )
    finally:
        await conn.close()
    return [r["type"] for r in rows]


async def check_hello_job(stack: Stack, receiver: Receiver) -> dict[str, Any]:
    accepted = await stack.submit({**HELLO, "webhook_url": receiver.url})
    assert accepted["status"] == "queued"
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert job["attempts"] == 1
    assert job["error"] is None
    assert job["pages"] == 1 and job["bytes"] > 500
    assert "Hi Ana" in await pdf_text(stack, job["url"])

    await eventually(lambda: _count(receiver), 30)
    hook = receiver.requests[0]
    payload = Webhook(stack.tenant.webhook_secret).verify(hook["body"], hook["headers"])
    assert payload["type"] == "job.done"
    assert payload["data"]["id"] == accepted["id"]
    assert payload["data"]["status"] == "done"
    assert "Hi Ana" in await pdf_text(stack, payload["data"]["url"])
    return job


async def _count(receiver: Receiver) -> int:
    return len(receiver.requests)


async def test_curl_example_renders_pdf_and_signed_webhook(stack: Stack, receiver: Receiver):
    await check_hello_job(stack, receiver)


async def test_curl_example_with_s3_storage(s3_stack: Stack, receiver: Receiver):
    job = await check_hello_job(s3_stack, receiver)
    # A presigned URL: bytes come from the S3 server itself, not through the gateway.
    assert job["url"].startswith(s3_stack.settings.s3_endpoint)
    assert "X-Amz-Signature=" in job["url"]


async def test_template_syntax_error_fails_at_once_with_engine_message(
    stack: Stack, receiver: Receiver
):
    accepted = await stack.submit(
        {"template": "<h1>{{ name }</h1>", "data": {}, "webhook_url": receiver.url}
    )
    job = await stack.finished(accepted["id"])
    assert job["status"] == "failed"
    assert job["attempts"] == 1
    assert job["error"]["type"] == "template"
    assert "unexpected '}'" in job["error"]["message"]
    assert job["url"] is None
    await eventually(lambda: _count(receiver), 30)
    payload = receiver.requests[0]["json"]
    assert payload["type"] == "job.failed"
    assert payload["data"]["error"]["message"] == job["error"]["message"]


async def test_undefined_variable_fails_with_its_name(stack: Stack):
    job = await stack.finished((await stack.submit({"template": "Hi {{ name }}"}))["id"])
    assert job["status"] == "failed"
    assert job["attempts"] == 1
    assert "'name' is undefined" in job["error"]["message"]


async def test_idempotent_resubmission_gives_same_id_and_renders_once(stack: Stack):
    first = await stack.submit(HELLO, **{"Idempotency-Key": "order-42"})
    second = await stack.submit(HELLO, **{"Idempotency-Key": "order-42"})
    assert first["id"] == second["id"]
    await stack.finished(first["id"])
    third = await stack.submit(HELLO, **{"Idempotency-Key": "order-42"})
    assert third["id"] == first["id"]
    other = await stack.submit(HELLO, **{"Idempotency-Key": "order-43"})
    assert other["id"] != first["id"]
    await stack.finished(other["id"])
    assert await job_events(stack, first["id"]) == ["submitted", "started", "done"]


def webhook_counts() -> tuple[float, ...]:
    """Deliveries retrying and delivered, and webhooks delivered, counted so far (in tests
    the services share one process, so one registry holds every service's)."""
    return (
        REGISTRY.get_sample_value("pressroom_webhook_deliveries_total", {"outcome": "retrying"})
        or 0.0,
        REGISTRY.get_sample_value("pressroom_webhook_deliveries_total", {"outcome": "delivered"})
        or 0.0,
        REGISTRY.get_sample_value("pressroom_webhook_attempts_count", {"outcome": "delivered"})
        or 0.0,
    )


async def test_failed_webhook_is_retried_with_the_same_id(stack: Stack, receiver: Receiver):
    receiver.statuses = [500, 503]
    before = webhook_counts()
    accepted = await stack.submit({**HELLO, "webhookUrl": receiver.url})
    await stack.finished(accepted["id"])
    await eventually(lambda: _gte(receiver, 3), 30)
    ids = {r["headers"]["webhook-id"] for r in receiver.requests}
    assert len(ids) == 1

    async def log() -> list[dict[str, Any]] | None:
        async with stack.client.get(f"{stack.url}/jobs/{accepted['id']}/webhooks") as resp:
            attempts: list[dict[str, Any]] = (await resp.json())["attempts"]
        return attempts if len(attempts) == 3 else None

    attempts = await eventually(log, 30)
    assert [a["outcome"] for a in attempts] == ["retrying", "retrying", "delivered"]
    assert [a["status_code"] for a in attempts] == [500, 503, 200]

    async def counted() -> bool:  # two retries, one delivery, one webhook delivered
        return [now - then for now, then in zip(webhook_counts(), before, strict=True)] == [2, 1, 1]

    await eventually(counted, 5, "the notifier's metrics counted the three attempts")


async def _gte(receiver: Receiver, n: int) -> bool:
    return len(receiver.requests) >= n


async def test_status_is_queued_not_404_before_projection(settings: Settings):
    """With no projector running, the log alone answers for a just-accepted job."""
    stack = Stack(settings)
    await stack.start("gateway")
    try:
        accepted = await stack.submit(HELLO)
        job = await stack.job(accepted["id"])
        assert job["status"] == "queued"
    finally:
        await stack.close()


async def test_header_uses_the_job_data_and_png_downloads_as_png(stack: Stack):
    header = '<div style="font-size:10px">Invoice {{ n }}</div>'
    options = {"header_template": header, "margin": {"top": "20mm", "bottom": "10mm"}}
    job = await stack.finished(
        (await stack.submit({"template": "<p>body {{ n }}</p>", "data": {"n": 42},
                             "options": options}))["id"]
    )  # fmt: skip
    assert "Invoice 42" in await pdf_text(stack, job["url"])
    png = await stack.finished((await stack.submit({**HELLO, "options": {"output": "png"}}))["id"])
    async with stack.client.get(png["url"]) as response:
        assert response.headers["Content-Type"] == "image/png"
        assert (await response.read()).startswith(b"\x89PNG")


async def test_refused_page_requests_are_in_the_timeline_and_the_job_proceeds(
    settings: Settings,
):
    stack = Stack(replace(settings, allow_private_networks=False))
    await stack.start()
    try:
        body = {"html": '<p>with a blocked image</p><img src="http://127.0.0.1:9/x.png">'}
        job = await stack.finished((await stack.submit(body))["id"])
        async with stack.client.get(f"{stack.url}/jobs/{job['id']}/events") as response:
            timeline = (await response.json())["events"]
    finally:
        await stack.close()
    assert job["status"] == "done"
    done = next(e for e in timeline if e["type"] == "done")
    assert [r["url"] for r in done["refused"]] == ["http://127.0.0.1:9/x.png"]
    assert "loopback" in done["refused"][0]["reason"]


def browser_launches(reason: str) -> float:
    """What the renderer's /metrics says (the registry is this process's)."""
    value = REGISTRY.get_sample_value("pressroom_browser_launches_total", {"reason": reason})
    return value or 0.0


async def test_the_browser_is_replaced_every_browser_recycle_renders(settings: Settings):
    stack = Stack(replace(settings, browser_recycle=2))
    before = browser_launches("recycle")
    await stack.start()
    try:
        for _ in range(6):  # one at a time: renders 1-2, 3-4 and 5-6 share a browser
            job = await stack.finished((await stack.submit(HELLO))["id"])
            assert job["status"] == "done", job
    finally:
        await stack.close()
    assert browser_launches("recycle") - before == 2


async def test_the_job_and_webhook_documents_keep_their_shape(stack: Stack, receiver: Receiver):
    """What clients parse, pinned: the fields of `GET /jobs/{id}` and of
    `GET /jobs/{id}/webhooks` in order, a status as its plain string, times in ISO 8601
    with their UTC offset (parsed as JSON: the spacing of the text is no part of it)."""
    job_id = (await stack.submit({**HELLO, "webhook_url": receiver.url}))["id"]
    await stack.finished(job_id)

    async def delivered() -> str | None:
        async with stack.client.get(f"{stack.url}/jobs/{job_id}/webhooks") as response:
            text = await response.text()
        outcomes = [a["outcome"] for a in json.loads(text)["attempts"]]
        return text if "delivered" in outcomes else None

    webhooks = await eventually(delivered, 30)
    async with stack.client.get(f"{stack.url}/jobs/{job_id}") as response:
        text = await response.text()
    job = json.loads(text)
    assert list(job) == [
        "id", "status", "attempts", "error", "url", "pages", "bytes", "render_ms",
        "webhook_url", "created_at", "started_at", "finished_at",
    ]  # fmt: skip
    assert job["status"] == "done"  # a plain string, not an object
    assert (job["id"], job["attempts"], job["error"], job["webhook_url"]) == (
        job_id, 1, None, receiver.url,
    )  # fmt: skip
    for name in ("created_at", "started_at", "finished_at"):
        assert dt.datetime.fromisoformat(job[name]).utcoffset() == dt.timedelta(0)
    listed = json.loads(webhooks)
    assert list(listed) == ["id", "attempts"]
    attempt = listed["attempts"][0]
    assert list(attempt) == [
        "webhook_id", "attempt", "url", "outcome", "status_code", "error", "latency_ms", "at",
    ]  # fmt: skip
    assert (attempt["attempt"], attempt["url"], attempt["status_code"], attempt["error"]) == (
        1, receiver.url, 200, None,
    )  # fmt: skip
    assert dt.datetime.fromisoformat(attempt["at"]).utcoffset() == dt.timedelta(0)
