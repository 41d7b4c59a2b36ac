"""`pressroom gateway`: serve the HTTP API until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from services.core import metrics, runtime
from services.core.settings import Settings
from services.gateway.app import init_app

log = logging.getLogger(__name__)


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """The API on `PRESSROOM_PORT`; `/metrics` on `PRESSROOM_METRICS_PORT`, off the public
    port."""
    runner = web.AppRunner(init_app(settings), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        async with metrics.serve(settings.host, settings.metrics_port):
            await web.TCPSite(runner, settings.host, settings.port).start()
            log.info("gateway listening on %s", settings.base_url)
            await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    runtime.run("gateway", serve)
