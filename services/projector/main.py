"""`pressroom projector`: keep the Postgres read model in step with the log."""

from __future__ import annotations

import asyncio

from services.core import bus, db, metrics, runtime
from services.core.settings import Settings
from services.projector import consumer


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    async with (
        metrics.serve(settings.host, settings.metrics_port),
        bus.open_bus(settings, name="projector") as (_, js),
        db.open_pool(settings, size=2) as pool,
    ):
        await consumer.run(js, pool, stop)


def main() -> None:
    runtime.run("projector", serve)
