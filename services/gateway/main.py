"""`pressroom gateway`: serve the HTTP API until SIGINT/SIGTERM.

Slow or idle clients are let go: a connection must deliver each request head within
`PRESSROOM_HEADER_TIMEOUT` (aiohttp's keep-alive timer, which also closes a connection
idle between requests), a body within `PRESSROOM_BODY_TIMEOUT` (`408`, see `app.py`), and
past `PRESSROOM_MAX_CONNECTIONS` open connections a new one is answered `503` and closed
at once, so half-sent requests cannot pile up file descriptors.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings
from services.gateway.app import init_app
from services.gateway.keys import NATS, PG_WATCH

log = logging.getLogger(__name__)

LINGER = 2.0
"""Seconds the rest of a body is read (and dropped) after an early answer (a `408`, a
`413`) before the connection is closed: aiohttp's default is 10."""

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
)
_BUSY_BODY = (
    b'{"error":{"type":"unavailable","message":"the gateway has too many open connections;'
    b' try again"}}'
)


class _Busy(asyncio.Protocol):
    """A connection over the cap: told `503` and closed without reading a byte."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY % (len(_BUSY_BODY), _BUSY_BODY))
        transport.close()


async def listen(
    runner: web.AppRunner, settings: Settings, port: int | None = None
) -> asyncio.Server:
    """The API's listening socket (or the one on `port`), with the connection cap in
    front of aiohttp's server."""
    server = runner.server
    assert server is not None, "runner is not set up"
    cap = settings.max_connections

    def protocol() -> asyncio.Protocol:
        if len(server.connections) >= cap:
            return _Busy()
        return server()

    loop = asyncio.get_running_loop()
    where = settings.port if port is None else port
    return await loop.create_server(protocol, settings.host, where, reuse_address=True)


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """The API on `PRESSROOM_PORT`; `/metrics` on `PRESSROOM_METRICS_PORT`, off the public
    port."""
    runner = web.AppRunner(
        init_app(settings),
        access_log=None,
        handle_signals=False,
        keepalive_timeout=settings.header_timeout,
        lingering_time=LINGER,
        # requests in flight at SIGTERM get the grace to finish (aiohttp's own is 60 s,
        # past the runtime's exit and the pod's termination grace period)
        shutdown_timeout=settings.shutdown_grace,
    )
    await runner.setup()
    try:
        async with metrics.serve(settings.host, settings.metrics_port) as health:
            listener = await listen(runner, settings)
            apart = settings.gotenberg_apart(settings.port)
            door = await listen(runner, settings, settings.gotenberg_port) if apart else None
            nc, postgres = runner.app[NATS], runner.app[PG_WATCH]
            health.check("nats", lambda: nc.is_connected)
            health.inform("postgres", lambda: postgres.up)  # submissions go on without it
            try:
                log.info("gateway listening on %s", settings.base_url)
                if door is not None:
                    log.info("Gotenberg-compatible routes on port %d", settings.gotenberg_port)
                await stop.wait()
            finally:
                listener.close()
                if door is not None:
                    door.close()
    finally:
        await runner.cleanup()


def main() -> None:
    lifecycle.run("gateway", serve)
