"""A batch's webhooks: the real notifier, a real log, a receiver on loopback.

Verifies: a batch's terminal event sends one `batch.*` webhook, signed with the batch's
own sealed secret (not the tenant's), retried on the job schedule with the same
`webhook-id`, with its counts and the archive's signed link; a batch without its own
secret is signed with its tenant's; a batch without `webhook_url` is not even tried; no
attempt becomes a job event on the log, each is counted in the webhook metrics.

And `GET /batches/{id}/webhooks`: a batch that ran through the whole stack lists its
`batch.done` attempts (the failed one and the delivered one, with status codes and the
`webhook-id` the receiver saw); `batch.progress` attempts are listed too, each by event; a
batch only the log knows lists none yet; another tenant's batch, and an unknown id, are the
same 404 as `GET /batches/{id}`; while PostgreSQL refuses connections the route is a 503.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from nats.js import JetStreamContext
from prometheus_client import REGISTRY
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.core.log import bus
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.core.secrets import signing
from tests.conftest import Postgres, Receiver, Stack, eventually
from tests.integration.test_templates import database_refusing_connections

ARCHIVE = "batches/default/b/b.zip"


def batch_id(n: int) -> str:
    return "b" + f"{n:x}".rjust(31, "0")


def submitted(batch: str, **fields: str) -> events.BatchSubmitted:
    return events.BatchSubmitted(
        batch_id=batch, total=3, items_key=f"batches/default/{batch}/items.jsonl",
        template="<p>{{ n }}</p>", **fields,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def notifier(settings: Settings) -> AsyncIterator[JetStreamContext]:
    """The notifier running in this process, and the log it reads."""
    stack = Stack(settings)
    await stack.start("notifier")
    try:
        async with bus.open_bus(settings, name="test") as (_, js):
            yield js
    finally:
        await stack.close()


async def job_events_logged(js: JetStreamContext) -> int:
    info = await js.stream_info(subjects.STREAM, subjects_filter="jobs.>")
    return sum((info.state.subjects or {}).values())


async def test_a_batch_webhook_is_signed_with_its_own_secret_and_retried(
    settings: Settings, receiver: Receiver
):
    batch, own = batch_id(1), signing.new_secret()
    sealed = settings.server_keys().seal(own, batch)
    receiver.statuses = [503]  # the first attempt fails: the schedule sends it again
    async with notifier(settings) as js:
        await bus.publish_batch(js, submitted(batch, webhook_url=receiver.url,
                                              webhook_secret=sealed))  # fmt: skip
        done = events.BatchDone(
            batch_id=batch, total=3, done=2, failed=1, cancelled=0, webhook_url=receiver.url,
            object_key=ARCHIVE, bytes=4096,
        )  # fmt: skip
        await bus.publish_batch(js, done)
        await eventually(lambda: len(receiver.requests) >= 2, 15, "the retried webhook")
        assert await job_events_logged(js) == 0  # attempts are not job events
    first, second = receiver.requests
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
    payload = Webhook(own).verify(second["body"], second["headers"])
    with pytest.raises(WebhookVerificationError):
        Webhook(settings.webhook_secret).verify(second["body"], second["headers"])
    assert payload["type"] == "batch.done"
    data = payload["data"]
    assert {k: data[k] for k in ("id", "status", "total", "done", "failed", "cancelled")} == {
        "id": batch, "status": "done", "total": 3, "done": 2, "failed": 1, "cancelled": 0,
    }  # fmt: skip
    assert (data["object_key"], data["bytes"], data["error"]) == (ARCHIVE, 4096, None)
    assert data["url"].startswith(f"{settings.base_url}/files/batches/") and "sig=" in data["url"]


def attempts_counted() -> float:
    """Webhook attempts of this process so far, whatever their outcome."""
    outcomes = ("delivered", "retrying", "gave_up")
    found = (REGISTRY.get_sample_value("pressroom_webhook_deliveries_total", {"outcome": o})
             for o in outcomes)  # fmt: skip
    return sum(n or 0 for n in found)


async def test_a_batch_without_webhook_url_sends_nothing(settings: Settings, receiver: Receiver):
    silent, loud = batch_id(2), batch_id(3)
    before = attempts_counted()
    error = events.ErrorInfo("no_documents", "no item produced a document")
    async with notifier(settings) as js:
        await bus.publish_batch(js, submitted(silent))
        await bus.publish_batch(js, events.BatchCancelled(batch_id=silent, total=3, done=0,
                                                          failed=0, cancelled=3))  # fmt: skip
        # A batch with a webhook, after it, proves the notifier is alive and reads on.
        await bus.publish_batch(js, submitted(loud, webhook_url=receiver.url))
        failed = events.BatchFailed(batch_id=loud, total=3, done=0, failed=3, cancelled=0,
                                    webhook_url=receiver.url, error=error)  # fmt: skip
        await bus.publish_batch(js, failed)
        await eventually(lambda: receiver.requests, 15, "the failed batch's webhook")

        async def drained() -> bool:
            info = await js.consumer_info(subjects.STREAM, subjects.NOTIFIER)
            return info.num_pending == 0 and info.num_ack_pending == 0

        await eventually(drained, 15, "the notifier read every terminal event")
    [hook] = receiver.requests
    assert attempts_counted() - before == 1  # the silent batch's end was not even tried
    # Without its own secret a batch is signed with its tenant's (the server's here).
    payload = Webhook(settings.webhook_secret).verify(hook["body"], hook["headers"])
    assert payload["type"] == "batch.failed"
    assert payload["data"]["id"] == loud
    assert payload["data"]["error"] == {"type": "no_documents", "message": error.message}
    assert payload["data"]["url"] is None and "object_key" not in payload["data"]


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json()


async def listed(stack: Stack, batch: str, enough: int) -> list[dict[str, Any]]:
    """The batch's listed webhook attempts, once there are `enough`."""

    async def attempts() -> list[dict[str, Any]] | None:
        status, answer = await get(stack.client, f"{stack.url}/batches/{batch}/webhooks")
        assert status == 200, answer
        assert answer["id"] == batch
        found: list[dict[str, Any]] = answer["attempts"]
        return found if len(found) >= enough else None

    found: list[dict[str, Any]] = await eventually(attempts, 120, f"{enough} attempts listed")
    return found


async def test_a_finished_batchs_webhook_attempts_are_listed_to_its_tenant_only(
    stack: Stack, receiver: Receiver
) -> None:
    receiver.statuses = [503]  # the first attempt fails: the schedule sends it again
    body = {"template": "<p>{{ n }}</p>", "items": [{"data": {"n": 1}}, {"data": {"n": 2}}],
            "webhook_url": receiver.url}  # fmt: skip
    async with stack.client.post(f"{stack.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        batch = (await response.json())["id"]
    attempts = await listed(stack, batch, 2)
    assert [(a["event"], a["attempt"], a["outcome"], a["status_code"], a["error"])
            for a in attempts] == [
        ("batch.done", 1, "retrying", 503, None), ("batch.done", 2, "delivered", 200, None),
    ]  # fmt: skip
    [sent_id] = {r["headers"]["webhook-id"] for r in receiver.requests}
    assert all(a["webhook_id"] == sent_id and a["url"] == receiver.url for a in attempts)
    assert all(isinstance(a["latency_ms"], int) and a["latency_ms"] >= 0 for a in attempts)
    first, second = (dt.datetime.fromisoformat(a["at"]) for a in attempts)
    assert first.tzinfo is not None and first <= second
    other = await stack.new_tenant()
    status, answer = await get(other.http, f"{stack.url}/batches/{batch}/webhooks")
    assert status == 404, answer
    assert answer["error"]["type"] == "not_found"
    assert (status, answer) == await get(other.http, f"{stack.url}/batches/{batch}")


async def test_progress_and_end_attempts_are_listed_by_event_and_unknown_ids_are_404(
    settings: Settings, receiver: Receiver, postgres: Postgres
) -> None:
    stack = Stack(settings)
    await stack.start("gateway", "notifier")
    try:
        batch, tenant = batch_id(4), stack.tenant.id
        async with bus.open_bus(settings, name="test") as (_, js):
            await bus.publish_batch(js, submitted(batch, tenant=tenant, webhook_url=receiver.url))
            status, answer = await get(stack.client, f"{stack.url}/batches/{batch}/webhooks")
            assert (status, answer) == (200, {"id": batch, "attempts": []})  # only in the log
            progress = events.BatchProgress(
                batch_id=batch, tenant=tenant, total=3, done=1, failed=0, cancelled=0,
                webhook_url=receiver.url,
            )  # fmt: skip
            await bus.publish_batch(js, progress)
            await eventually(lambda: receiver.requests, 15, "the progress webhook")
            cancelled = events.BatchCancelled(
                batch_id=batch, tenant=tenant, total=3, done=1, failed=0, cancelled=2,
                webhook_url=receiver.url,
            )  # fmt: skip
            await bus.publish_batch(js, cancelled)
            attempts = await listed(stack, batch, 2)
        sent = [(r["json"]["type"], r["headers"]["webhook-id"]) for r in receiver.requests]
        assert [(a["event"], a["webhook_id"]) for a in attempts] == sent
        assert [a["event"] for a in attempts] == ["batch.progress", "batch.cancelled"]
        assert [(a["outcome"], a["status_code"]) for a in attempts] == [("delivered", 200)] * 2
        for unknown in ("b" + "0" * 31, "not-a-batch", "B" + "0" * 31):
            status, answer = await get(stack.client, f"{stack.url}/batches/{unknown}/webhooks")
            assert (status, answer.get("error", {}).get("type")) == (404, "not_found"), unknown
        async with database_refusing_connections(postgres, settings.database_url):
            status, answer = await get(stack.client, f"{stack.url}/batches/{batch}/webhooks")
        assert (status, answer["error"]["type"]) == (503, "unavailable"), answer
        assert "unavailable: PostgreSQL" in answer["error"]["message"]
    finally:
        await stack.close()
