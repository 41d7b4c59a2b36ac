"""Making what `topology` describes: the streams (JOBS, its advisories, USAGE, the
BATCH_STATE bucket) and the durables on them, each by the services NATS lets make it.

Every service creates the streams where they are missing, so a fresh NATS needs no
separate deploy step; a stream that exists with other settings is updated only by its
keeper, the projector (`busaccess`). Each durable is made by the service that reads it.
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StorageType, StreamConfig
from nats.js.errors import APIError

from services.core.log import busaccess, topology
from services.core.model import subjects
from services.core.runtime.settings import Settings, SettingsError

log = logging.getLogger(__name__)


async def ensure(js: JetStreamContext, settings: Settings, grants: busaccess.Grants) -> None:
    """Create the JOBS stream, the advisory stream, the USAGE stream and the BATCH_STATE
    bucket where missing, and the durables on them `grants` let this service make; update
    the streams' settings where `grants` let it (the keeper). A service never makes a
    request its identity would be refused: NATS answers those with silence until the
    request times out."""
    await _ensure(js, topology.stream_config(settings), grants)
    for consumer in topology.consumer_configs(settings):
        await _ensure_durable(js, subjects.STREAM, consumer, grants)
    await _ensure(js, topology.advisory_stream_config(settings), grants)
    await _ensure_durable(js, topology.ADVISORY_STREAM, topology.finalizer_config(), grants)
    await _ensure(js, topology.usage_stream_config(settings), grants)
    try:
        await js.create_key_value(
            bucket=subjects.BATCH_STATE,
            history=1,
            replicas=settings.stream_replicas,
            storage=StorageType.FILE,
        )
    except APIError as exc:  # it exists with other settings: the keeper's to change
        keeper = grants.may_publish(_update(f"KV_{subjects.BATCH_STATE}"))
        if exc.err_code != STREAM_EXISTS or keeper:
            raise


async def _ensure_durable(
    js: JetStreamContext, stream: str, config: ConsumerConfig, grants: busaccess.Grants
) -> None:
    name = config.name or config.durable_name or ""
    if grants.may_publish(busaccess.consumer_create(stream, name, config.filter_subject)):
        await js.add_consumer(stream, config)


INSUFFICIENT_STORAGE = 10047
"""JetStream's error code when a stream's `max_bytes` exceeds what the server may store."""


STREAM_EXISTS = 10058
"""JetStream's error code for a stream created again with another configuration."""


def _update(stream: str) -> str:
    return f"{busaccess.API}.STREAM.UPDATE.{stream}"


async def _ensure(js: JetStreamContext, config: StreamConfig, grants: busaccess.Grants) -> None:
    """Create the stream where missing; where it exists with other settings, update it if
    `grants` allow (its keeper), else leave it to the keeper."""
    try:
        try:
            await js.add_stream(config)
        except APIError as exc:
            if exc.err_code != STREAM_EXISTS:
                raise
            if not grants.may_publish(_update(config.name or "")):
                log.info("stream %s has other settings; the projector applies them", config.name)
                return
            await js.update_stream(config)
    except APIError as exc:
        if exc.err_code == INSUFFICIENT_STORAGE and config.name == subjects.STREAM:
            raise SettingsError(
                f"PRESSROOM_STREAM_MAX_BYTES={config.max_bytes} is more than the NATS server "
                "may store (its JetStream max_file_store, by default 75 % of the free disk): "
                "lower it, or give NATS more room"
            ) from exc
        raise
