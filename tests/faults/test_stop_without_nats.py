"""Stopping means stopping: a service told to stop exits within its grace even when the
servers it would say goodbye to are gone.

Verifies, with NATS killed (SIGKILL) under a running cluster, and a renderer and a
projector started after that (still trying to connect): SIGTERM to each service ends it
within PRESSROOM_SHUTDOWN_GRACE plus the stop margin, and none of its processes (the
renderer's Chromium) outlives it. Before, a renderer kept reconnecting to
the dead NATS for good, ignoring further SIGTERMs.
"""

from __future__ import annotations

import asyncio
import signal

from services.core.runtime.lifecycle import STOP_MARGIN
from tests.conftest import NatsServer
from tests.faults.harness import Cluster, poll, session_members

GRACE = 2.0


async def test_every_service_stops_within_its_grace_with_nats_gone(
    cluster: Cluster, nats_server: NatsServer
) -> None:
    await cluster.up(renderers=1, PRESSROOM_SHUTDOWN_GRACE=str(GRACE))
    await asyncio.to_thread(nats_server.stop, signal.SIGKILL)
    # And two that start while NATS is gone: they are still trying to connect.
    late = [cluster.start("renderer"), cluster.start("projector")]
    await poll(lambda: all("nats" in s.tail().lower() for s in late), 30, "late ones trying NATS")
    services = list(cluster.services)
    results = await asyncio.gather(
        *(cluster.terminate(service, timeout=GRACE + STOP_MARGIN + 10) for service in services)
    )
    for service, (code, seconds) in zip(services, results, strict=True):
        assert code is not None, f"{service.name} still running:\n{service.tail()}"
        assert seconds < GRACE + STOP_MARGIN + 3, (service.name, seconds, service.tail())

    async def nothing_left() -> bool:
        return not any(session_members(service.pid) for service in services)

    await poll(nothing_left, 10, "every process of the stopped services gone")
