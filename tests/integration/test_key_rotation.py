"""Keys rotate without losing a webhook, a retry or a secret; a wrong key is loud.

Verifies, with real gateways and notifiers over one NATS and one database:
- the server key: with `PRESSROOM_SERVER_KEY="NEW OLD"` a tenant's secret sealed with OLD
  still signs, and a retried `POST /jobs` with the same `Idempotency-Key` answers the
  first job's id (its id derived from OLD), never a second job or a 422; `pressroom
  server-keys rotate` seals every stored secret again with NEW and `status` then shows
  none needing OLD; with NEW alone both services start and the secret still signs;
- `status` on the log, which holds a submission sealed with OLD: when its oldest message
  was published (this test's), when it leaves (`PRESSROOM_STREAM_MAX_AGE` later), keep
  OLD until then; after `rotate` the same, beside "not needed by PostgreSQL"; once the
  log's messages are gone, the log needs OLD no more;
- a wrong key: a notifier or gateway given only a key that did not seal the stored
  secrets refuses to start, naming `PRESSROOM_SERVER_KEY` and the missing key's id; a
  running notifier meeting a job whose own secret does not open never sends its webhook
  (not signed with the tenant's or the installation's secret instead), records no
  attempt, and tries again later, while other webhooks go out;
- a job's passwords and page secrets: a queued job's (`options.encrypt`, cookies and a
  header) and a cancelled one's, sealed with OLD, are counted by `status`; `rotate` seals
  the queued job's again with NEW and removes the cancelled job's; once the log no longer
  holds the submission, a stack holding NEW alone re-drives the job from its row and
  renders it with its cookie, its header and its password;
- a tenant's webhook secret: `POST /webhook-secrets` with `retire_others_after` makes a
  new secret; both sign each webhook (two signatures) until the old one expires, then
  the new one alone does, and the listing shows the old one's end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from pypdf import PdfReader
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.core.runtime.settings import Settings, SettingsError
from services.core.secrets import crypto
from services.notifier.main import serve as serve_notifier
from tests.conftest import SERVER_KEY, Receiver, Stack, Tenant, eventually, serving

NEW = base64.b64encode(os.urandom(32)).decode()
OLD_ID = crypto.key_id(base64.b64decode(SERVER_KEY))
NEW_ID = crypto.key_id(base64.b64decode(NEW))


@contextlib.asynccontextmanager
async def services(settings: Settings, tenant: Tenant | None = None) -> AsyncIterator[Stack]:
    """A gateway and a notifier (no renderer: jobs stay queued, ends are published by the
    test); the tenant of an earlier stack is reused when given."""
    stack = Stack(settings)
    if tenant is not None:
        session = aiohttp.ClientSession(headers=tenant.auth)
        stack.tenants.append(replace(tenant, http=session))
        stack.http = session
    await stack.start("gateway", "notifier")
    try:
        yield stack
    finally:
        await stack.close()


async def _webhook(stack: Stack, receiver: Receiver, **submitted: Any) -> dict[str, Any]:
    """Publish a job of the stack's tenant and its end, with a webhook; the request the
    receiver got for it."""
    job_id = uuid.uuid4().hex
    async with bus.open_bus(stack.settings, name="test") as (_, js):
        await _publish_job(js, job_id, stack.tenant.id, receiver.url, **submitted)

    def arrived() -> dict[str, Any] | None:
        return next((r for r in receiver.requests if r["json"]["data"]["id"] == job_id), None)

    found: dict[str, Any] = await eventually(arrived, 20, "the webhook")
    return found


async def _publish_job(js: Any, job_id: str, tenant: str, url: str, **submitted: Any) -> None:
    await bus.publish(
        js,
        events.JobSubmitted(
            job_id=job_id, tenant=tenant, html="<p>x</p>", webhook_url=url, **submitted
        ),
    )
    done = events.JobDone(
        job_id=job_id, tenant=tenant, attempt=1, object_key=f"jobs/{tenant}/{job_id}.pdf",
        bytes=10, pages=1, render_ms=1, webhook_url=url,
    )  # fmt: skip
    await bus.publish(js, done)


def _verifies(secret: str, request: dict[str, Any]) -> bool:
    try:
        Webhook(secret).verify(request["body"], request["headers"])
    except WebhookVerificationError:
        return False
    return True


async def _post(stack: Stack, key: str) -> tuple[int, Any]:
    body = {"html": "<p>once</p>"}
    headers = {"Idempotency-Key": key}
    async with stack.client.post(f"{stack.url}/jobs", json=body, headers=headers) as response:
        return response.status, await response.json()


async def _cli(settings: Settings, command: str) -> tuple[int, str]:
    """`pressroom server-keys <command>` as an operator runs it: (exit status, output)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PRESSROOM_")},
        "PRESSROOM_DATABASE_URL": settings.database_url,
        "PRESSROOM_NATS_URL": settings.nats_url,
        "PRESSROOM_SERVER_KEY": settings.server_key,
        "PRESSROOM_STREAM_MAX_AGE": str(settings.stream_max_age),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli", "server-keys", command,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return await proc.wait(), out.decode()


async def _logged(settings: Settings, job_id: str, tenant: str) -> tuple[str, dt.datetime]:
    """A job's submission as the log holds it, and when it was published."""
    async with bus.open_bus(settings, name="test") as (_, js):
        msg = await js.get_last_msg(subjects.STREAM, subjects.submitted_subject(job_id, tenant))
    assert msg.data is not None and msg.time is not None
    return msg.data.decode(), msg.time


_LOG_LINE = re.compile(
    r"the log: its oldest message was published at (\S+) \(it leaves the log by (\S+), "
    r"PRESSROOM_STREAM_MAX_AGE\); keep (\S+) until the oldest message is newer than the "
    r"moment (\S+) became first .*, then remove them if PostgreSQL needs them no more"
)


def _log_part(shown: str) -> tuple[dt.datetime, dt.datetime, str, str]:
    """What `status` says of the log: its oldest message's time, when that message leaves
    it, the keys to keep until then and the key that became first."""
    found = _LOG_LINE.search(shown)
    assert found is not None, shown
    oldest, leaves = (dt.datetime.fromisoformat(found[n]) for n in (1, 2))
    return oldest, leaves, found[3], found[4]


async def _sealed_prefixes(settings: Settings) -> set[str]:
    conn = await asyncpg.connect(settings.database_url)
    try:
        rows = await conn.fetch("SELECT secret FROM webhook_secrets")
    finally:
        await conn.close()
    return {r["secret"].split(":")[0] + ":" + r["secret"].split(":")[1] for r in rows}


async def test_the_server_key_rotates_without_losing_a_secret_or_a_retry(
    settings: Settings, receiver: Receiver
):
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    async with services(settings) as before:
        tenant = before.tenant
        status, first = await _post(before, "order-7")
        assert status == 202, first
        assert _verifies(tenant.webhook_secret, await _webhook(before, receiver))
        queued = (await before.submit({"html": "<p>s</p>", "page_secrets": SECRETS}))["id"]
    logged, published = await _logged(settings, queued, tenant.id)
    assert f"sealed2:{OLD_ID}:" in logged  # the log holds a submission OLD sealed

    both = replace(settings, server_key=f"{NEW} {SERVER_KEY}")
    async with services(both, tenant) as during:
        status, again = await _post(during, "order-7")
        assert (status, again["id"]) == (202, first["id"]), again
        assert _verifies(tenant.webhook_secret, await _webhook(during, receiver))
        assert await _sealed_prefixes(settings) == {f"sealed2:{OLD_ID}"}
        code, shown = await _cli(both, "status")
        assert code == 0 and f"sealed with {OLD_ID}: " in shown, shown
        oldest, leaves, keep, first_key = _log_part(shown)
        # the log's oldest message is this test's, no newer than the sealed submission
        assert started <= oldest <= published, (shown, published)
        assert leaves - oldest == dt.timedelta(seconds=settings.stream_max_age), shown
        assert (keep, first_key) == (OLD_ID, NEW_ID), shown
        code, shown = await _cli(both, "rotate")
        assert code == 0, shown
        code, shown = await _cli(both, "status")
        assert code == 0 and f"sealed with {OLD_ID}" not in shown, shown
        assert await _sealed_prefixes(settings) == {f"sealed2:{NEW_ID}"}
        # PostgreSQL needs OLD no more, the log still does until its messages age out
        assert f"not needed by PostgreSQL: {OLD_ID}" in shown, shown
        assert _log_part(shown) == (oldest, leaves, OLD_ID, NEW_ID), shown
        assert f"sealed2:{OLD_ID}:" in (await _logged(settings, queued, tenant.id))[0]

    after = replace(settings, server_key=NEW)
    async with services(after, tenant) as rotated:
        assert _verifies(tenant.webhook_secret, await _webhook(rotated, receiver))
        status, again = await _post(rotated, "order-7")
        assert (status, again["id"]) == (202, first["id"]), again

    # its messages aged out (PRESSROOM_STREAM_MAX_AGE), the log needs OLD no more either
    async with bus.open_bus(settings, name="test") as (_, js):
        await js.purge_stream(subjects.STREAM)
    code, shown = await _cli(both, "status")
    assert code == 0 and f"the log: holds no message, so needs none of {OLD_ID}" in shown, shown
    assert f"not needed by PostgreSQL: {OLD_ID}" in shown, shown


async def test_a_wrong_server_key_stops_start_and_never_signs_with_another_secret(
    settings: Settings, receiver: Receiver
):
    async with services(settings) as stack:
        control = await _webhook(stack, receiver)
        assert _verifies(stack.tenant.webhook_secret, control)
        foreign = crypto.ServerKeys((os.urandom(32),))
        job_id = uuid.uuid4().hex
        own = "whsec_" + base64.b64encode(os.urandom(32)).decode()
        async with bus.open_bus(settings, name="test") as (_, js):
            await _publish_job(
                js, job_id, stack.tenant.id, receiver.url,
                webhook_secret=foreign.seal(own, job_id),
            )  # fmt: skip
            await _webhook(stack, receiver)  # a later webhook goes out meanwhile
            await eventually(lambda: _retried(js), 30, "the unreadable webhook tried again")
            attempts = await timeline.job_events(js, job_id)
        assert not [r for r in receiver.requests if r["json"]["data"]["id"] == job_id]
        assert [events.event_name(e) for _, _, e in attempts] == ["submitted", "done"]

    wrong = replace(settings, server_key=NEW)
    with pytest.raises(SettingsError, match=f"PRESSROOM_SERVER_KEY.*{OLD_ID}"):
        await serve_notifier(wrong, asyncio.Event())
    gateway = Stack(wrong)
    try:
        with pytest.raises(SettingsError, match=f"PRESSROOM_SERVER_KEY.*{OLD_ID}"):
            await gateway.start("gateway")
    finally:
        await gateway.client.close()


async def _retried(js: Any) -> bool:
    info = await js.consumer_info(subjects.STREAM, subjects.NOTIFIER)
    return bool(info.num_redelivered >= 1)


async def test_a_rotated_webhook_secret_signs_beside_its_successor_until_it_expires(
    settings: Settings, receiver: Receiver
):
    async with services(settings) as stack:
        old = stack.tenant.webhook_secret
        body = {"retire_others_after": 3}
        async with stack.client.post(f"{stack.url}/webhook-secrets", json=body) as response:
            assert response.status == 201, await response.text()
            made = await response.json()
        async with stack.client.get(f"{stack.url}/webhook-secrets") as response:
            listed = {s["id"]: s["expires_at"] for s in (await response.json())["secrets"]}
        assert listed[made["id"]] is None and made["others_expire_at"] in listed.values()
        both = await _webhook(stack, receiver)
        assert len(both["headers"]["webhook-signature"].split()) == 2
        assert _verifies(old, both) and _verifies(made["secret"], both)

        async def new_alone() -> bool:
            request = await _webhook(stack, receiver)
            return _verifies(made["secret"], request) and not _verifies(old, request)

        await eventually(new_alone, 30, "the old secret retired", interval=0.5)


SECRETS = {
    "cookies": [{"name": "sid", "value": "r0tated-c00kie", "domain": "127.0.0.1"}],
    "headers": [{"name": "X-Key", "value": "r0tated-k3y"}],
}
PASSWORDS = {"owner_password": "r0tated-owner", "user_password": "r0tated-user"}


async def _job_input(settings: Settings, job_id: str) -> dict[str, Any] | None:
    conn = await asyncpg.connect(settings.database_url)
    try:
        found = await conn.fetchval("SELECT input::text FROM jobs WHERE id = $1", job_id)
    finally:
        await conn.close()
    return None if found is None else dict(json.loads(found))


async def _legacy_timeline(settings: Settings, tenant: str) -> str:
    """A submission recorded in a job's timeline as before timelines hid `options.encrypt`
    passwords (sealed, with the current key)."""
    job_id = uuid.uuid4().hex
    encrypt = {"owner_password": settings.server_keys().seal("r0tated-owner", job_id)}
    conn = await asyncpg.connect(settings.database_url)
    try:
        await conn.execute(
            "INSERT INTO job_events (stream_seq, job_id, type, at, body, tenant_id) "
            "VALUES ((SELECT coalesce(max(stream_seq), 0) + 10000 FROM job_events), $1, "
            "'submitted', now(), $2::jsonb, $3)",
            job_id, json.dumps({"options": {"encrypt": encrypt}}), tenant,
        )  # fmt: skip
    finally:
        await conn.close()
    return job_id


async def _timeline(settings: Settings, job_id: str) -> str:
    conn = await asyncpg.connect(settings.database_url)
    try:
        found = await conn.fetchval("SELECT body::text FROM job_events WHERE job_id = $1", job_id)
        return str(found)
    finally:
        await conn.close()


async def _queued_and_cancelled(settings: Settings, base: str) -> tuple[str, str, Tenant]:
    """Two jobs with a password and page secrets, sealed with the stack's key, recorded in
    PostgreSQL: one left queued (no renderer), one cancelled; then their submissions leave
    the log, as they do after PRESSROOM_STREAM_MAX_AGE."""
    body = {"url": f"{base}/account", "page_secrets": SECRETS, "options": {"encrypt": PASSWORDS}}
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    try:
        queued = (await stack.submit(body))["id"]
        cancelled = (await stack.submit(body))["id"]
        async with stack.client.delete(f"{stack.url}/jobs/{cancelled}") as response:
            assert response.status == 200, await response.text()
        assert (await stack.finished(cancelled))["status"] == "cancelled"
        await eventually(lambda: _job_input(settings, queued), 30, "the queued job's row")
        async with stack.client.get(f"{stack.url}/jobs/{queued}/events") as response:
            timeline = await response.text()
        assert response.status == 200 and "(hidden)" in timeline, timeline
        assert "sealed" not in timeline, timeline  # nothing a rotation must re-seal
        tenant = stack.tenant
    finally:
        await stack.close()
    async with bus.open_bus(settings, name="test") as (_, js):
        for job_id in (queued, cancelled):
            await js.purge_stream(subjects.STREAM, subject=f"jobs.{job_id}.>")
    return queued, cancelled, tenant


async def test_a_queued_job_s_password_and_page_secrets_survive_a_rotation(
    settings: Settings, tmp_path: Any
):
    seen: dict[str, str] = {}

    async def handle(request: web.Request) -> web.Response:
        seen.update(request.headers)
        return web.Response(content_type="text/html", text="<h1>Account 12</h1>")

    app = web.Application()
    app.router.add_get("/account", handle)
    async with serving(app) as base:
        quiet = replace(settings, stale_after=3600.0)  # nothing re-driven before the rotation
        queued, cancelled, tenant = await _queued_and_cancelled(quiet, base)

        legacy = await _legacy_timeline(settings, tenant.id)

        both = replace(settings, server_key=f"{NEW} {SERVER_KEY}")
        code, shown = await _cli(both, "status")
        # the tenant's webhook secret, and three values of each job
        assert code == 0 and f"sealed with {OLD_ID}: 7 value(s)" in shown, shown
        assert "the log: " in shown and "cannot tell" not in shown, shown
        code, shown = await _cli(both, "rotate")
        assert code == 0 and "jobs: 3 value(s) sealed again" in shown, shown
        assert "3 password(s) and page secret(s) of ended jobs removed" in shown, shown
        assert "job_events: sealed passwords hidden in 1 submission(s)" in shown, shown
        assert "sealed" not in await _timeline(settings, legacy)
        code, shown = await _cli(both, "status")
        assert code == 0 and f"sealed with {OLD_ID}" not in shown, shown
        assert f"sealed with {NEW_ID}: 4 value(s)" in shown and "nats" not in shown, shown
        gone = await _job_input(settings, cancelled)
        assert gone is not None and "page_secrets" not in gone, gone
        assert not set(PASSWORDS) & set(gone["options"]["encrypt"]), gone

        after = replace(settings, server_key=NEW, reconcile_interval=0.2, stale_after=1.0)
        stack = Stack(after)
        stack.tenants.append(replace(tenant, http=aiohttp.ClientSession(headers=tenant.auth)))
        stack.http = stack.tenant.http
        await stack.start()
        try:
            job = await stack.finished(queued, timeout=90)
            assert job["status"] == "done", job
            async with stack.client.get(job["url"]) as response:
                (tmp_path / "out.pdf").write_bytes(await response.read())
        finally:
            await stack.close()
    assert seen["X-Key"] == "r0tated-k3y" and "sid=r0tated-c00kie" in seen.get("Cookie", "")
    pdf = PdfReader(tmp_path / "out.pdf")
    assert pdf.is_encrypted and pdf.decrypt(PASSWORDS["user_password"])
    assert "Account 12" in pdf.pages[0].extract_text()
