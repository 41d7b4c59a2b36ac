"""`pressroom projector`: keep the Postgres read model in step with the log.

Four loops share one NATS connection and one pool: the consumer (every event into
Postgres), the finalizer (jobs whose render deliveries ran out), the reconciler (jobs
the log no longer drives) and the renderers' backlog (`pressroom_render_backlog`, the
autoscaling signal). `pressroom projector --rebuild` instead replays the whole log
into empty tables and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

from services.core.database import db
from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings
from services.projector import backlog, consumer, finalizer, rebuild, reconciler

POOL_SIZE = 4
"""PostgreSQL connections of a projector unless `PRESSROOM_DATABASE_POOL_MAX` says."""


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run the four loops until `stop` is set; if one fails, stop the others and raise."""
    async with (
        metrics.serve(settings.host, settings.metrics_port) as health,
        bus.open_bus(settings, name="projector", role=Role.PROJECTOR) as (nc, js),
        db.open_pool(settings, size=POOL_SIZE, lazy=True) as pool,  # PostgreSQL may come later
        db.watched(pool, settings) as postgres,
    ):
        health.check("nats", lambda: nc.is_connected)
        health.check("postgres", lambda: postgres.up)  # its work is writing there
        await run_together(
            consumer.run(consumer.Projection(js, pool, settings.free_tier), stop),
            finalizer.run(js, pool, stop),
            reconciler.run(js, pool, settings, stop),
            backlog.track(js, stop),
        )


async def run_together(*loops: Coroutine[Any, Any, None]) -> None:
    """Await every loop; the first one to raise cancels the rest, then its error is raised.

    Unlike a TaskGroup this raises the error itself, not an ExceptionGroup, so
    `runtime.run` still turns a startup failure into one clear line.
    """
    tasks = [asyncio.create_task(loop) for loop in loops]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await lifecycle.cancelled(*tasks)
    for task in done:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pressroom projector", description="Project the log into PostgreSQL."
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="empty the projection, replay the whole log into it, print a summary and exit "
        "(stop every other projector first)",
    )
    return parser.parse_args(argv)


def main() -> None:
    # `pressroom projector …`: the CLI leaves sys.argv as it was, so our flags start at [2].
    args = parse_args(sys.argv[2:])
    lifecycle.run("projector", rebuild.main if args.rebuild else serve)
