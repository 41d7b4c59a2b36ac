"""The notifier against hostile and broken receivers.

Verifies: 410 Gone stops retrying; a receiver that hangs times out and is retried, and
does not delay deliveries to other receivers; a redirect is reported, never followed,
so it cannot reach a forbidden address; every attempt is in GET /jobs/{id}/webhooks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import nats
import pytest
from aiohttp import web

from services.core.settings import Settings
from tests.conftest import Receiver, Stack, eventually, free_port
from tests.integration.test_pipeline import HELLO


async def attempts(stack: Stack, job_id: str, count: int) -> list[dict[str, Any]]:
    async def log() -> list[dict[str, Any]] | None:
        async with stack.client.get(f"{stack.url}/jobs/{job_id}/webhooks") as response:
            found: list[dict[str, Any]] = (await response.json())["attempts"]
        return found if len(found) >= count else None

    result: list[dict[str, Any]] = await eventually(log, 30)
    return result


@pytest.fixture
async def odd_receiver() -> AsyncIterator[tuple[str, list[str]]]:
    """/hang never answers in time, /moved redirects to a metadata address, /gone is 410."""
    seen: list[str] = []

    async def hang(request: web.Request) -> web.Response:
        seen.append("hang")
        await asyncio.sleep(30)
        return web.Response()

    async def moved(request: web.Request) -> web.Response:
        seen.append("moved")
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data")

    async def gone(request: web.Request) -> web.Response:
        seen.append("gone")
        return web.Response(status=410)

    app = web.Application()
    app.router.add_post("/hang", hang)
    app.router.add_post("/moved", moved)
    app.router.add_post("/gone", gone)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


@pytest.fixture
async def hook_stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, webhook_timeout=1.0, webhook_schedule=(0.0, 0.2, 0.2)))
    await stack.start()
    yield stack
    await stack.close()


async def test_410_gone_stops_retrying(hook_stack: Stack, odd_receiver):
    base, seen = odd_receiver
    job = await hook_stack.submit({**HELLO, "webhook_url": f"{base}/gone"})
    log = await attempts(hook_stack, job["id"], 1)
    assert [(a["status_code"], a["outcome"]) for a in log] == [(410, "gave_up")]
    assert seen == ["gone"]


async def test_redirect_is_not_followed(hook_stack: Stack, odd_receiver):
    base, _ = odd_receiver
    job = await hook_stack.submit({**HELLO, "webhook_url": f"{base}/moved"})
    log = await attempts(hook_stack, job["id"], 3)
    assert [a["status_code"] for a in log] == [302, 302, 302]
    assert [a["outcome"] for a in log] == ["retrying", "retrying", "gave_up"]
    assert "169.254.169.254" in log[0]["error"] and "not followed" in log[0]["error"]


async def test_hanging_receiver_times_out_without_blocking_others(
    hook_stack: Stack, odd_receiver, receiver: Receiver
):
    base, _ = odd_receiver
    slow = await hook_stack.submit({**HELLO, "webhook_url": f"{base}/hang"})
    await hook_stack.finished(slow["id"])
    started = time.monotonic()
    fast = await hook_stack.submit({**HELLO, "webhook_url": receiver.url})
    await hook_stack.finished(fast["id"])
    await eventually(lambda: _received(receiver), 10)
    assert time.monotonic() - started < 8  # not queued behind the hanging one's retries
    log = await attempts(hook_stack, slow["id"], 3)
    assert all(a["status_code"] is None and "within 1s" in a["error"] for a in log)
    assert log[-1]["outcome"] == "gave_up"


async def _received(receiver: Receiver) -> bool:
    return bool(receiver.requests)


async def test_address_policy_is_enforced_again_at_delivery(settings: Settings, receiver):
    """A URL that passed at submission but resolves to a forbidden address when the
    notifier connects (DNS rebinding) is refused at connect time."""
    lenient = Stack(settings)  # gateway, projector, renderer: private networks allowed
    strict = Stack(replace(settings, allow_private_networks=False, port=free_port()))
    await lenient.start("gateway", "projector", "renderer")
    await strict.start("notifier")
    try:
        job = await lenient.submit({**HELLO, "webhook_url": receiver.url})
        log = await attempts(lenient, job["id"], 3)
    finally:
        await strict.close()
        await lenient.close()
    assert receiver.requests == []
    assert all("forbidden" in a["error"] for a in log), log
    assert log[-1]["outcome"] == "gave_up"


async def test_redeliver_sends_the_same_webhook_again(stack: Stack, receiver: Receiver):
    job = await stack.submit({**HELLO, "webhook_url": receiver.url})
    await attempts(stack, job["id"], 1)
    url = f"{stack.url}/jobs/{job['id']}/webhooks/redeliver"
    async with stack.client.post(url) as response:
        assert response.status == 202
        assert (await response.json())["redelivery"] == "queued"
    log = await attempts(stack, job["id"], 2)
    assert [a["outcome"] for a in log] == ["delivered", "delivered"]
    assert len(receiver.requests) == 2
    ids = {r["headers"]["webhook-id"] for r in receiver.requests}
    assert len(ids) == 1  # the same event: receivers may deduplicate it

    plain = await stack.finished((await stack.submit(HELLO))["id"])
    async with stack.client.post(f"{stack.url}/jobs/{plain['id']}/webhooks/redeliver") as r:
        assert r.status == 409
        assert "no webhook_url" in (await r.json())["error"]["message"]
    async with stack.client.post(f"{stack.url}/jobs/{'0' * 32}/webhooks/redeliver") as r:
        assert r.status == 404


async def test_per_job_secret_signs_instead_of_the_tenants_and_is_never_stored_plain(
    stack: Stack, receiver: Receiver
):
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    from services.core.signing import new_secret

    own = new_secret()
    job = await stack.submit({**HELLO, "webhook_url": receiver.url, "webhook_secret": own})
    await attempts(stack, job["id"], 1)
    hook = receiver.requests[0]
    assert Webhook(own).verify(hook["body"], hook["headers"])["data"]["id"] == job["id"]
    with pytest.raises(WebhookVerificationError):
        Webhook(stack.tenant.webhook_secret).verify(hook["body"], hook["headers"])
    async with stack.client.get(f"{stack.url}/jobs/{job['id']}/events") as response:
        assert own not in await response.text()  # never shown back
    async with stack.client.get(f"{stack.url}/jobs/{job['id']}") as response:
        assert own not in await response.text()
    # Neither the log nor the projection holds it in plain text.
    nc = await nats.connect(stack.settings.nats_url)
    try:
        raw = await nc.jetstream().get_last_msg("JOBS", f"jobs.{job['id']}.submitted")
    finally:
        await nc.close()
    key = own.removeprefix("whsec_").encode()
    assert own.encode() not in raw.data and key not in raw.data
    assert b'"webhook_secret":"sealed1:' in raw.data
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        dump = await conn.fetchval("SELECT string_agg(j::text, '') FROM jobs AS j")
        events_dump = await conn.fetchval("SELECT string_agg(body::text, '') FROM job_events")
    finally:
        await conn.close()
    assert key.decode() not in dump and key.decode() not in events_dump


async def test_every_secret_of_the_tenant_signs_during_a_rotation(stack: Stack, receiver: Receiver):
    from standardwebhooks.webhooks import Webhook

    async with stack.client.post(f"{stack.url}/webhook-secrets") as response:
        assert response.status == 201
        new = (await response.json())["secret"]
    job = await stack.submit({**HELLO, "webhook_url": receiver.url})
    await attempts(stack, job["id"], 1)
    hook = receiver.requests[0]
    assert len(hook["headers"]["webhook-signature"].split(" ")) == 2
    for secret in (stack.tenant.webhook_secret, new):
        assert Webhook(secret).verify(hook["body"], hook["headers"])["data"]["id"] == job["id"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "needs a webhook_url"),
        ({"webhook_url": "http://127.0.0.1:9/", "webhook_secret": "nope"}, "whsec_"),
    ],
)
async def test_bad_per_job_secret_is_400(stack: Stack, body: dict, words: str):
    async with stack.client.post(f"{stack.url}/jobs", json={**HELLO, **body}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["field"] == "webhook_secret"
    assert words in error["message"]
