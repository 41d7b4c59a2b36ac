"""`pressroom conductor`: run batches: expand them into items, pause, resume and cancel
them, and pack their archives once every item has ended; and sweep the stored files no
job, asset or template needs any more (`filesweep`)."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext

from services.conductor import filesweep
from services.conductor.consumer import Conductor
from services.conductor.state import open_states
from services.core.database import db
from services.core.log import bus, worker
from services.core.log.busaccess import Role
from services.core.model import subjects
from services.core.objectstore.storage import open_storage
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings

CONCURRENCY = 4
"""Batch events handled at once: expansions and packs are long, but few at a time keep
one conductor from flooding the log or storage; more conductors share the durable."""


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    async with (
        metrics.serve(settings.host, settings.metrics_port) as health,
        bus.open_bus(settings, name="conductor", role=Role.CONDUCTOR) as (nc, js),
        db.open_pool(settings, size=3, lazy=True) as pool,  # PostgreSQL may come later
        db.watched(pool, settings) as postgres,
        open_storage(settings) as storage,
    ):
        health.check("nats", lambda: nc.is_connected)
        health.inform("postgres", lambda: postgres.up)  # packing and the file sweep use it
        conductor = Conductor(settings, js, pool, storage, await open_states(js))
        sweeping = asyncio.create_task(filesweep.run(pool, storage, settings, stop))
        try:
            await _work(settings, js, conductor, stop)
        finally:
            await lifecycle.cancelled(sweeping)


async def _work(
    settings: Settings, js: JetStreamContext, conductor: Conductor, stop: asyncio.Event
) -> None:
    await worker.work(
        js,
        subjects.CONDUCTOR,
        conductor.handle,
        limit=CONCURRENCY,
        stop=stop,
        grace=settings.shutdown_grace,
    )


def main() -> None:
    lifecycle.run("conductor", serve)
