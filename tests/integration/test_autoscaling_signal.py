"""The signal renderers scale on: what they have yet to finish, summed over every durable
they take work from, as KEDA's `nats-jetstream` scaler counts one durable.

With no renderer running, two tenants queue single jobs and a batch is expanded into
items. nats-server's own monitoring endpoint (`/jsz`, what KEDA reads) is asked the way
KEDA asks it, and the projector's `pressroom_render_backlog` (what the production
ScaledObject's Prometheus trigger reads, deploy/k8s/) must show the same numbers, lane by
lane, and the age of the oldest waiting job; once a renderer has finished everything,
both read 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY

from services.core.model import subjects
from services.core.runtime.settings import Settings
from services.projector import backlog
from tests.conftest import NatsServer, Stack, eventually, free_port

JOB = {"template": "<p>{{ n }}</p>", "data": {"n": 0}}


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """This module's nats-server serves its monitoring endpoint, as KEDA needs."""
    server = NatsServer(tmp_path / "nats", monitor_port=free_port())
    server.start()
    yield server
    server.stop()


async def keda_lag(server: NatsServer) -> dict[str, int]:
    """Per durable of the JOBS stream, what KEDA's scaler takes: `num_pending +
    num_ack_pending` from `/jsz?acc=…&config=true&consumers=true`."""
    url = f"http://127.0.0.1:{server.monitor_port}/jsz"
    params = {"acc": "$G", "config": "true", "consumers": "true"}
    async with aiohttp.ClientSession() as http, http.get(url, params=params) as response:
        jsz: dict[str, Any] = await response.json()
    lag: dict[str, int] = {}
    for account in jsz.get("account_details", []):
        for stream in account.get("stream_detail", []):
            if stream["name"] != subjects.STREAM:
                continue
            for consumer in stream.get("consumer_detail", []):
                lag[consumer["name"]] = consumer["num_pending"] + consumer["num_ack_pending"]
    return lag


def gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_the_backlog_gauge_counts_what_keda_counts_over_every_renderers_lane(
    settings: Settings, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backlog, "EVERY", 0.2)
    stack = Stack(settings)
    await stack.start("gateway", "projector", "conductor")
    try:
        bob = await stack.new_tenant("bob")
        for n in range(5):
            await stack.submit({**JOB, "data": {"n": n}})
        for n in range(3):
            async with bob.http.post(f"{stack.url}/jobs", json={**JOB, "data": {"n": n}}) as r:
                assert r.status == 202, await r.text()
        items = [{"data": {"n": n}} for n in range(4)]
        batch = {"template": "<p>{{ n }}</p>", "items": items}
        async with stack.client.post(f"{stack.url}/batches", json=batch) as response:
            assert response.status == 202, await response.text()
            batch_id = (await response.json())["id"]

        async def expanded() -> dict[str, int] | None:
            lag = await keda_lag(nats_server)
            return lag if lag.get(subjects.bulk_durable(batch_id)) == 4 else None

        lag = await eventually(expanded, 30, "the batch's items in its durable")
        assert lag[subjects.singles_durable(stack.tenant.id)] == 5, lag
        assert lag[subjects.singles_durable(bob.id)] == 3, lag

        async def gauges() -> tuple[float | None, float | None] | None:
            read = (
                gauge("pressroom_render_backlog", lane="singles"),
                gauge("pressroom_render_backlog", lane="bulk"),
            )
            return read if read == (8.0, 4.0) else None

        await eventually(gauges, 10, "the projector's backlog gauges at 8 and 4")
        oldest = gauge("pressroom_render_oldest_seconds")
        assert oldest is not None and oldest > 0, oldest

        await stack.start("renderer")

        async def drained() -> bool:
            lag = await keda_lag(nats_server)
            renders = {k: v for k, v in lag.items() if k.startswith(("singles-", "bulk-"))}
            return (
                not any(renders.values())
                and gauge("pressroom_render_backlog", lane="singles") == 0.0
                and gauge("pressroom_render_backlog", lane="bulk") == 0.0
            )

        await eventually(drained, 90, "every lane empty, and the gauges at 0")
        await eventually(lambda: gauge("pressroom_render_oldest_seconds") == 0.0, 10, "no age")
    finally:
        await stack.close()
