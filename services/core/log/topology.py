"""What the log is made of: the streams (JOBS, its advisories, USAGE) and the durable
consumers on them, as configurations. `bus.ensure_stream` and `bus.SinglesLanes` make them;
the conductor makes each batch's `bulk_config`.

Retention is by age, not work-queue: each service reads the same log through its own
durable consumer, and the log can be replayed.
"""

from __future__ import annotations

from typing import Any

from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from services.core.model import subjects
from services.core.runtime.settings import Settings

ADVISORY_STREAM = "JOBS_ADVISORIES"
"""Keeps the renderer's MAX_DELIVERIES advisories, which NATS only fires and forgets."""

MAX_DELIVERIES_SUBJECT = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{subjects.STREAM}.*"
"""Every durable of the JOBS stream: those renderers read (`renderer`, each tenant's
`singles-…`, each batch's `bulk-…`) are the ones with a `max_deliver`. A subject token is a
wildcard only whole: `bulk-*` would have matched nothing but a durable named so."""
FINALIZER = "finalizer"
"""The projector's durable on `ADVISORY_STREAM`."""


def stream_config(settings: Settings) -> StreamConfig:
    return StreamConfig(
        name=subjects.STREAM,
        subjects=subjects.SUBJECTS,
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        max_age=settings.stream_max_age,
        max_bytes=settings.stream_max_bytes,
        max_msg_size=settings.stream_max_msg_size,
        # A full log refuses new messages rather than dropping the oldest: those are
        # accepted jobs. The gateway stops taking jobs before it is full (`LogRoom`).
        discard=DiscardPolicy.NEW,
        duplicate_window=settings.dedup_window,
        allow_direct=True,  # the renderer's checks of a job's end read by direct get
    )


def consumer_configs(settings: Settings) -> list[ConsumerConfig]:
    """The four durables every installation has, each named after the service that reads
    it. Every durable here carries its `name`: nats-py then creates it on
    `$JS.API.CONSUMER.CREATE.<stream>.<name>[.<filter>]`, whose single filter is part of
    the subject, so NATS permissions can confine which durables a service may make
    (`busaccess`). No `backoff` list: retries are `nak(delay)`. With `backoff` the
    server replaces `ack_wait` by `backoff[0]`, which would also cut a long render's
    heartbeat deadline."""
    common: dict[str, Any] = {
        "ack_policy": AckPolicy.EXPLICIT,
        "deliver_policy": DeliverPolicy.ALL,
    }
    return [
        ConsumerConfig(
            name=subjects.RENDERER,
            durable_name=subjects.RENDERER,
            filter_subject=subjects.subject("*", "submitted"),  # before lanes: no tenant token
            ack_wait=settings.ack_wait,
            max_deliver=settings.max_attempts,
            max_ack_pending=1000,
            **common,
        ),
        ConsumerConfig(
            name=subjects.PROJECTOR,
            durable_name=subjects.PROJECTOR,
            filter_subjects=["jobs.>", "batches.>"],
            ack_wait=30.0,
            max_deliver=-1,
            max_ack_pending=10000,
            **common,
        ),
        ConsumerConfig(
            name=subjects.NOTIFIER,
            durable_name=subjects.NOTIFIER,
            filter_subjects=[
                "jobs.*.done",
                "jobs.*.failed",
                "jobs.*.cancelled",
                "jobs.*.redeliver",
                "batches.*.done",
                "batches.*.failed",
                "batches.*.cancelled",
                "batches.*.progress",
            ],
            ack_wait=settings.webhook_timeout * 3 + 10,
            max_deliver=-1,
            max_ack_pending=10000,
            **common,
        ),
        ConsumerConfig(
            name=subjects.CONDUCTOR,
            durable_name=subjects.CONDUCTOR,
            filter_subjects=[
                "batches.*.submitted",
                "batches.*.paused",
                "batches.*.resumed",
                "batches.*.cancel",
                "batches.*.complete",
            ],
            # Expanding 10,000 items or packing their archive takes a while: the
            # conductor sends progress notes every 5 s, as a renderer does for a long
            # render, so a short wait only hands a dead conductor's messages on sooner.
            ack_wait=15.0,
            max_deliver=-1,
            max_ack_pending=1000,
            **common,
        ),
    ]


def bulk_config(settings: Settings, batch_id: str) -> ConsumerConfig:
    """The durable of one batch's items: made by the conductor when it expands the batch,
    read by every renderer (one item at a time, after interactive jobs), deleted when the
    batch has ended. Attempts are counted as for single jobs."""
    return _render_durable(
        settings, subjects.bulk_durable(batch_id), subjects.bulk_filter(batch_id)
    )


def _render_durable(settings: Settings, name: str, subject: str, **extra: Any) -> ConsumerConfig:
    """A durable renderers take work from: every attempt counted against
    `PRESSROOM_MAX_ATTEMPTS`, the renderers' ack wait."""
    return ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=subject,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.ack_wait,
        max_deliver=settings.max_attempts,
        max_ack_pending=1000,
        **extra,
    )


def singles_config(settings: Settings, tenant: str) -> ConsumerConfig:
    """The durable of one tenant's single jobs: the same terms as the legacy `renderer`
    durable (attempts, ack wait), on that tenant's submissions only. Its metadata names the
    tenant, for readers that start from the durable (the reconciler)."""
    return _render_durable(
        settings,
        subjects.singles_durable(tenant),
        subjects.singles_filter(tenant),
        metadata={"tenant": tenant},
    )


def advisory_stream_config(settings: Settings) -> StreamConfig:
    """Persists advisories: a finalizer that is down when one fires still reads it later."""
    return StreamConfig(
        name=ADVISORY_STREAM,
        subjects=[MAX_DELIVERIES_SUBJECT],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        max_age=settings.stream_max_age,
        discard=DiscardPolicy.OLD,
    )


def finalizer_config() -> ConsumerConfig:
    """Every advisory, redelivered until the finalizer acks it (its handling is idempotent)."""
    return ConsumerConfig(
        name=FINALIZER,
        durable_name=FINALIZER,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=30.0,
        max_deliver=-1,
        max_ack_pending=1000,
    )


def usage_stream_config(settings: Settings) -> StreamConfig:
    """Billable documents for a billing connector, kept as long as the job log."""
    return StreamConfig(
        name=subjects.USAGE_STREAM,
        subjects=subjects.USAGE_SUBJECTS,
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=settings.stream_replicas,
        max_age=settings.stream_max_age,
        discard=DiscardPolicy.OLD,
        duplicate_window=settings.dedup_window,
    )
