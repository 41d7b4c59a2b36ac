"""Revoking a key ends what it opened: live-update streams close within seconds, on the
gateway that revoked it and on the others.

Verifies, against two real gateways over one database: a job stream and a batch stream
opened with a key (one on each gateway) end within a few seconds of the key's revocation
through the admin API, each with a last `error` message (`unauthorized`, "revoked") and
no `id:`; a new request with the key is a 401; a stream of another key of the same
tenant, and one of another tenant, stay open and still deliver the next event (a cancel)
until their job's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from services.core.runtime.settings import Settings
from tests.conftest import Stack, admin_call, eventually, free_port
from tests.integration.test_streams import Opened, stream

ENDS_WITHIN = 10.0
"""Seconds a revoked key's stream may take to end: a refresh (1 s here) and a tick, with
room for a loaded machine."""


@contextlib.asynccontextmanager
async def two_gateways(settings: Settings) -> AsyncIterator[tuple[Stack, Stack]]:
    """A gateway and projector, and a second gateway on the same NATS and database: no
    renderer, so jobs stay queued and their streams open."""
    first = Stack(replace(settings, auth_refresh=1.0))
    await first.start("gateway", "projector")
    second = Stack(replace(first.settings, port=free_port()))
    try:
        await second.start("gateway")
        yield first, second
    finally:
        await second.close()
        await first.close()


Message = tuple[str, Any, str | None]
"""An SSE message as (event, data, id)."""


async def _message(opened: Opened, timeout: float) -> Message | None:
    """The next message of an open stream; None once the server has closed it."""
    fields: dict[str, str] = {}
    async with asyncio.timeout(timeout):
        async for raw in opened.reader.response.content:
            line = raw.decode().rstrip("\n")
            if not line and fields:
                return fields["event"], json.loads(fields["data"]), fields.get("id")
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    return None


async def _next_message(opened: Opened, timeout: float) -> Message:
    message = await _message(opened, timeout)
    assert message is not None, "the stream closed"
    return message


async def _last_message(opened: Opened, timeout: float) -> Message:
    """The stream's last message, once it has closed (within `timeout` s)."""
    last, end = None, time.monotonic() + timeout
    try:
        while (message := await _message(opened, end - time.monotonic())) is not None:
            last = message
    except TimeoutError:
        raise AssertionError(f"the stream was still open after {timeout:g}s") from None
    assert last is not None, "the stream closed without a message"
    return last


async def test_a_revoked_keys_streams_end_on_every_gateway_and_other_keys_flow_on(
    settings: Settings,
):
    async with two_gateways(settings) as (first, second):
        tenant = first.tenant
        spare = await admin_call(
            first.client, "POST", f"{first.url}/admin/tenants/{tenant.id}/keys", None, 201
        )
        other = await first.new_tenant()
        job = (await first.submit({"html": "<p>revoked</p>"}))["id"]
        spare_job = (await first.submit({"html": "<p>kept</p>"}))["id"]
        async with other.http.post(f"{first.url}/jobs", json={"html": "<p>x</p>"}) as answer:
            other_job = (await answer.json())["id"]
        async with tenant.http.post(
            f"{first.url}/batches", json={"template": "<p>{{ n }}</p>", "items": [{}]}
        ) as answer:
            assert answer.status == 202, await answer.text()
            batch = (await answer.json())["id"]

        async def known_by_second() -> bool:
            for http in (tenant.http, other.http):
                async with http.get(f"{second.url}/usage") as answer:
                    if answer.status != 200:
                        return False
            return True

        await eventually(known_by_second, 10, "the second gateway knows the keys")
        spare_auth = {"Authorization": f"Bearer {spare['key']}"}
        async with (
            stream(tenant.http, f"{first.url}/jobs/{job}/stream") as on_first,
            stream(tenant.http, f"{second.url}/batches/{batch}/stream") as on_second,
            stream(first.client, f"{first.url}/jobs/{spare_job}/stream", **spare_auth) as kept,
            stream(other.http, f"{second.url}/jobs/{other_job}/stream") as theirs,
        ):
            for opened in (on_first, on_second, kept, theirs):
                assert opened.status == 200
                assert (await _next_message(opened, 30))[0] in {"submitted", "progress"}
            await admin_call(
                first.client, "DELETE", f"{first.url}/admin/keys/{tenant.key_id}", None, 204
            )
            revoked = time.monotonic()
            for opened, where in ((on_first, "first"), (on_second, "second")):
                event, data, seq = await _last_message(opened, ENDS_WITHIN)
                print(f"\n[revocation] stream on the {where} gateway ended after "
                      f"{time.monotonic() - revoked:.2f}s")  # fmt: skip
                assert event == "error" and seq is None, (event, data)
                assert data["error"]["type"] == "unauthorized"
                assert "revoked" in data["error"]["message"]
            async with tenant.http.get(f"{second.url}/jobs/{job}") as answer:
                assert answer.status == 401
            for opened, job_id, http, headers in (
                (kept, spare_job, first.client, spare_auth),
                (theirs, other_job, other.http, {}),
            ):
                url = f"{first.url}/jobs/{job_id}"
                async with http.delete(url, headers=headers) as answer:
                    assert answer.status in {200, 202}, await answer.text()
                assert (await _next_message(opened, 30))[0] == "cancelled"
