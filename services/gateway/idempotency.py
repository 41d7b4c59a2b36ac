"""`Idempotency-Key`: per tenant, remembered for `PRESSROOM_IDEMPOTENCY_TTL` (24 h by
default), far beyond the log's deduplication window.

The first request with a key claims it in a JetStream key-value bucket (`kv.create` is
first-writer-wins, so concurrent retries agree on one winner), recording the job id and a
fingerprint of the request. A later request with the same key and the same fingerprint
gets the first job back; with another fingerprint it is a `422` naming `Idempotency-Key`.
The bucket lives on NATS, beside the log, so it keeps working while PostgreSQL is down.
"""

from __future__ import annotations

import contextlib
import hashlib

import msgspec
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from services.core.log import bus
from services.core.model.errors import (
    Conflict,
    IdempotencyConflict,
    NotFound,
    PressroomError,
    Unavailable,
)
from services.core.runtime.settings import Settings

BUCKET = "IDEMPOTENCY"


class Claim(msgspec.Struct):
    """What a key was first used for."""

    job_id: str
    fingerprint: str


_decoder = msgspec.json.Decoder(Claim)


async def open_bucket(js: JetStreamContext, settings: Settings) -> KeyValue:
    """The bucket, created on first use with the TTL from settings; an existing bucket
    takes a changed `PRESSROOM_IDEMPOTENCY_TTL` too."""
    try:
        with bus.map_bus_errors():
            bucket = await js.key_value(BUCKET)
    except NotFound:
        config = KeyValueConfig(
            bucket=BUCKET,
            history=1,
            ttl=settings.idempotency_ttl,
            storage=StorageType.FILE,
            replicas=settings.stream_replicas,
        )
        with bus.map_bus_errors():
            return await js.create_key_value(config)
    await _keep_ttl(js, settings.idempotency_ttl)
    return bucket


async def _keep_ttl(js: JetStreamContext, ttl: float) -> None:
    """Set the bucket's TTL (its stream's `max_age`) to `ttl` if it was made with another."""
    with bus.map_bus_errors():
        info = await js.stream_info(f"KV_{BUCKET}")
        if abs((info.config.max_age or 0) - ttl) > 0.001:
            info.config.max_age = ttl
            await js.update_stream(info.config)


def _entry(tenant: str, key: str) -> str:
    # KV keys allow only a few characters; the hash also keeps the client's key off disk.
    return f"{tenant}.{hashlib.sha256(key.encode()).hexdigest()}"


async def claim(kv: KeyValue, tenant: str, key: str, job_id: str, fingerprint: str) -> str | None:
    """None if this request is the first with `key` (which now names `job_id`); else the
    id of the first request's job, which this one repeats.

    The first id stands even when this request derived another: ids derive from the
    server key, and one rotated since the first request (`crypto.ServerKeys`) derives
    new ones, while a retry must still find its first job. Raises
    `IdempotencyConflict` when the key was first used with another request, and
    `Unavailable` when NATS does not answer.
    """
    entry = _entry(tenant, key)
    value = msgspec.json.encode(Claim(job_id, fingerprint))
    try:
        with bus.map_bus_errors("cannot check the Idempotency-Key: NATS"):
            await kv.create(entry, value)
        return None
    except Conflict:  # the key is taken: by this same request, or by another?
        pass
    try:
        with bus.map_bus_errors("cannot check the Idempotency-Key: NATS"):
            first = _decoder.decode((await kv.get(entry)).value or b"")
    except (NotFound, msgspec.DecodeError) as exc:  # expired in between, or not a claim
        raise Unavailable(f"cannot check the Idempotency-Key: NATS: {exc}") from exc
    if first.fingerprint != fingerprint:
        raise IdempotencyConflict(
            "this Idempotency-Key was used for a different request; use a new key for a new job",
            field="Idempotency-Key",
        )
    return first.job_id


async def release(kv: KeyValue, tenant: str, key: str) -> None:
    """Forget a claim whose job could not be submitted (best effort)."""
    with contextlib.suppress(PressroomError), bus.map_bus_errors():
        await kv.delete(_entry(tenant, key))
