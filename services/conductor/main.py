"""`pressroom conductor`: run batches: expand them into items, pause, resume and cancel
them, and pack their archives once every item has ended."""

from __future__ import annotations

import asyncio

from services.conductor.consumer import Conductor
from services.conductor.state import open_states
from services.core import bus, db, metrics, runtime, subjects, worker
from services.core.busaccess import Role
from services.core.settings import Settings
from services.core.storage import open_storage

CONCURRENCY = 4
"""Batch events handled at once: expansions and packs are long, but few at a time keep
one conductor from flooding the log or storage; more conductors share the durable."""


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    async with (
        metrics.serve(settings.host, settings.metrics_port) as health,
        bus.open_bus(settings, name="conductor", role=Role.CONDUCTOR) as (nc, js),
        db.open_pool(settings, size=2) as pool,
        db.watched(pool, settings) as postgres,
        open_storage(settings) as storage,
    ):
        health.check("nats", lambda: nc.is_connected)
        health.inform("postgres", lambda: postgres.up)  # only packing an archive reads it
        conductor = Conductor(settings, js, pool, storage, await open_states(js))
        await worker.work(
            js,
            subjects.CONDUCTOR,
            conductor.handle,
            limit=CONCURRENCY,
            stop=stop,
            grace=settings.shutdown_grace,
        )


def main() -> None:
    runtime.run("conductor", serve)
