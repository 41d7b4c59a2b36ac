"""A key change made through one gateway reaches every gateway at once, over NATS, not at
the next reload from PostgreSQL.

Verifies, against two real gateways over one NATS and one database whose periodic reload
is an hour away (`PRESSROOM_AUTH_REFRESH=3600`): a key created through the first is
accepted by the second within a few seconds; revoked through the first, it is refused by
the second (401 "revoked") within a few seconds, while another key of the same tenant
still works there; a notice naming a key no gateway knows changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import replace

import aiohttp
import nats

from services.core.model import subjects
from services.core.runtime.settings import Settings
from tests.conftest import Stack, admin_call, eventually, free_port

WITHIN = 5.0
"""Seconds a change may take to reach the other gateway: a NATS round trip and a read of
PostgreSQL, with room for a loaded machine; the hour-long reload is far beyond it."""


async def _status(base_url: str, key: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{base_url}/jobs", headers={"Authorization": f"Bearer {key}"}) as response,
    ):
        return response.status


async def test_a_key_made_and_revoked_on_one_gateway_is_known_on_the_other_at_once(
    settings: Settings,
):
    first = Stack(replace(settings, auth_refresh=3600.0))
    await first.start("gateway")
    second = Stack(replace(first.settings, port=free_port()))
    try:
        await second.start("gateway")
        started = time.monotonic()
        tenant = await first.new_tenant()
        await eventually(
            lambda: _accepted(second.url, tenant.key), WITHIN, "the new key on gateway 2"
        )
        learnt = time.monotonic() - started
        async with aiohttp.ClientSession() as http:
            keys_url = f"{first.url}/admin/tenants/{tenant.id}/keys"
            spare = await admin_call(http, "POST", keys_url, None, 201)
            await eventually(lambda: _accepted(second.url, spare["key"]), WITHIN, "the spare")
            started = time.monotonic()
            await admin_call(http, "DELETE", f"{first.url}/admin/keys/{tenant.key_id}", None, 204)
            await eventually(
                lambda: _refused(second.url, tenant.key), WITHIN, "the revoked key refused"
            )
            refused = time.monotonic() - started
        assert await _status(second.url, spare["key"]) == 200
        await _notice_of_unknown_key(settings)
        assert await _status(second.url, spare["key"]) == 200
        print(f"\n[keys] gateway 2 knew a new key after {learnt:.2f}s, a revocation {refused:.2f}s")
    finally:
        await second.close()
        await first.close()


async def _accepted(base_url: str, key: str) -> bool:
    return await _status(base_url, key) == 200


async def _refused(base_url: str, key: str) -> bool:
    return await _status(base_url, key) == 401


async def _notice_of_unknown_key(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    try:
        await nc.publish(subjects.KEY_NEWS, b'{"revoked":["key_0000000000000000"]}')
        await nc.publish(subjects.KEY_NEWS, b"not json")
        await nc.flush()
    finally:
        await nc.close()
