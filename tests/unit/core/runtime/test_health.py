"""The probes every service serves beside `/metrics`: `/healthz` (the event loop answers)
and `/readyz` (every named check passes; a service still starting, with no check yet, is
not ready)."""

from __future__ import annotations

from typing import Any

import aiohttp

from services.core.runtime import metrics
from tests.conftest import free_port


async def _get(port: int, path: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.json()


async def test_readyz_answers_200_only_once_every_check_passes() -> None:
    port = free_port()
    connected = False
    async with metrics.serve("127.0.0.1", port) as health:
        assert await _get(port, "/readyz") == (503, {"ready": False, "checks": {}})
        health.check("nats", lambda: connected)
        health.check("taking_work", lambda: True)
        status, body = await _get(port, "/readyz")
        assert (status, body["checks"]) == (503, {"nats": False, "taking_work": True})
        connected = True
        assert await _get(port, "/readyz") == (
            200,
            {"ready": True, "checks": {"nats": True, "taking_work": True}},
        )
        assert await _get(port, "/healthz") == (200, {"status": "ok"})


async def test_a_report_is_shown_beside_the_checks_without_deciding_readiness() -> None:
    """`inform`: what a service can do without (PostgreSQL for the notifier) is reported,
    and its being down leaves the service ready."""
    port = free_port()
    async with metrics.serve("127.0.0.1", port) as health:
        health.check("nats", lambda: True)
        health.inform("postgres", lambda: False)
        assert await _get(port, "/readyz") == (
            200,
            {"ready": True, "checks": {"nats": True}, "informs": {"postgres": False}},
        )
