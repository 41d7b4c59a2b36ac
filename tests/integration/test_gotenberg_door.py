"""`PRESSROOM_GOTENBERG_PORT`: the Gotenberg-compatible routes on a port of their own,
and each port serving only its own routes."""

from __future__ import annotations

from dataclasses import replace

import aiohttp

from services.core.runtime.settings import Settings
from tests.conftest import Stack, free_port


async def test_a_port_of_their_own_serves_the_compatible_routes_and_nothing_else(
    settings: Settings,
) -> None:
    door = free_port()
    stack = Stack(replace(settings, gotenberg_port=door))
    await stack.start("gateway")
    try:
        api, compatible = stack.url, f"http://127.0.0.1:{door}"
        auth = aiohttp.BasicAuth("any", stack.tenant.key)
        async with aiohttp.ClientSession(auth=auth) as http:
            async with http.get(f"{compatible}/version") as reply:
                assert reply.status == 200 and (await reply.text()).startswith("8.")
            async with http.get(f"{compatible}/health") as reply:
                assert reply.status == 200 and (await reply.json())["status"] == "up"
            async with http.post(f"{compatible}/forms/libreoffice/convert") as reply:
                assert reply.status == 501  # Gotenberg's route, answered on its port
            for path in ("/version", "/health"):  # not on the API's port
                async with http.get(f"{api}{path}") as reply:
                    assert reply.status == 404, path
            async with http.post(f"{api}/forms/chromium/convert/html") as reply:
                assert reply.status == 404
            async with http.get(f"{compatible}/readyz") as reply:  # the API's, not here
                assert reply.status == 404
        async with stack.client.get(f"{api}/jobs") as reply:
            assert reply.status == 200  # the API stays on its port
    finally:
        await stack.close()
