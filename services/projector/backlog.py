"""The renderers' backlog, for dashboards, alerts and autoscaling.

Renderers take work from many durables: one per tenant's single jobs (`singles-<tenant>`,
and the legacy `renderer`) and one per running batch (`bulk-<batch_id>`). What a renderer
fleet has to do is the sum over all of them of what each holds undelivered
(`num_pending`) and delivered but unfinished (`num_ack_pending`): the same count KEDA's
`nats-jetstream` scaler takes of one durable (`bus.outstanding`), summed over every
renderers' durable, as the gateway's log room also counts it. The
projector (always running, unlike renderers scaled to zero) reads it every `EVERY`
seconds into `pressroom_render_backlog{lane}` and the age of the oldest job still waiting
into `pressroom_render_oldest_seconds`; and, from the same listing, how far the projection
is behind the log (`pressroom_projection_lag`: what its own durable has yet to apply).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from services.core.log import bus
from services.core.model import subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.runtime import lifecycle, metrics

log = logging.getLogger(__name__)

EVERY = 5.0
"""Seconds between two readings (KEDA polls every 30 s by default; Prometheus scrapes
every 15 s)."""

LANES = ("singles", "bulk")


def lane_of(info: ConsumerInfo) -> str | None:
    """`singles` or `bulk` for a renderers' durable, None for any other."""
    if not bus.renders_waiting(info):
        return None
    return "bulk" if (info.name or "").startswith(subjects.bulk_durable("")) else "singles"


@dataclass
class Reading:
    """One look at every renderers' durable."""

    backlog: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LANES, 0))
    oldest: float = 0.0  # seconds the oldest unfinished job has waited; 0 with none
    projection_lag: int = 0  # events the projector has yet to apply


async def read(js: JetStreamContext, now: float | None = None) -> Reading:
    """The backlog of every lane now, and the age of its oldest job."""
    reading = Reading()
    floors: list[int] = []
    async for info in bus.durables(js):
        waiting = bus.outstanding(info)
        if info.name == subjects.PROJECTOR:
            reading.projection_lag = waiting
        lane = lane_of(info)
        if lane is None or waiting == 0:
            continue
        reading.backlog[lane] += waiting
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        floors.append(int(floor or 0))
    if floors:
        reading.oldest = await _age_after(js, min(floors), time.time() if now is None else now)
    return reading


async def _age_after(js: JetStreamContext, floor: int, now: float) -> float:
    """How long ago the first message after `floor` was stored: no durable has finished a
    job older than that (it may be another lane's event, which is only younger, so the
    age is never overstated)."""
    with contextlib.suppress(NotFound), bus.map_bus_errors("cannot read the log"):
        msg = await js.get_msg(subjects.STREAM, seq=floor + 1, next=True)
        if msg.time is not None:
            return max(0.0, now - msg.time.timestamp())
    return 0.0


async def track(js: JetStreamContext, stop: asyncio.Event) -> None:
    """Keep the backlog gauges current until `stop` is set; NATS trouble skips a reading."""
    while not stop.is_set():
        try:
            reading = await read(js)
        except (Unavailable, NotFound) as exc:
            log.warning("render backlog not read: %s", exc)
        else:
            for lane, count in reading.backlog.items():
                metrics.RENDER_BACKLOG.labels(lane).set(count)
            metrics.RENDER_OLDEST_SECONDS.set(reading.oldest)
            metrics.PROJECTION_LAG.set(reading.projection_lag)
        await lifecycle.pause(stop, EVERY)
