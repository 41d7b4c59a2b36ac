"""The gateways' copy of the API keys and tenants in a NATS key-value bucket, so a gateway
that starts while PostgreSQL is down can still tell who is asking.

PostgreSQL stays the source of truth. After every reload from it (`keynews`), a gateway
writes to the bucket `subjects.KEY_DIRECTORY` each key and tenant whose copy differs from
what it last wrote or read: a key as its hash (never the key), tenant, scopes and
revocation time; a tenant with its limits. A gateway that starts with PostgreSQL away
reads the whole bucket instead (`read`), serves from it, and reconciles with PostgreSQL
once it answers: the first reload then reads every key and drops any the database no
longer has (`auth.Directory.seed`).

Whoever could write the bucket could grant itself a key, so only the gateway's identity
may read or write it (`core/log/busaccess`). Gateways that reload at slightly different
moments may write an older copy of a key after a newer one; the next reload of either
writes the newer again, so the copy converges within `PRESSROOM_AUTH_REFRESH`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

import msgspec
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from services.core.database import tenancy
from services.core.log import bus
from services.core.model import subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.runtime.settings import Settings

log = logging.getLogger(__name__)

READ_TIMEOUT = 10.0
"""Seconds reading the whole bucket at start may take before the gateway gives up on it."""

_KEY, _TENANT = "key.", "tenant."
_keys = msgspec.json.Decoder(tenancy.ApiKey)
_tenants = msgspec.json.Decoder(tenancy.Tenant)


def _key_copy(key: tenancy.ApiKey) -> bytes:
    """What is kept of a key: not its last use, which changes with every request."""
    kept = dataclasses.replace(key, last_used_at=None, updated_at=key.created_at)
    return msgspec.json.encode(kept)


async def open_bucket(js: JetStreamContext, settings: Settings) -> KeyValue:
    """The bucket, made on first use (one value per name, on file, replicated as the log)."""
    try:
        with bus.map_bus_errors():
            return await js.key_value(subjects.KEY_DIRECTORY)
    except NotFound:
        config = KeyValueConfig(
            bucket=subjects.KEY_DIRECTORY,
            history=1,
            storage=StorageType.FILE,
            replicas=settings.stream_replicas,
        )
        with bus.map_bus_errors():
            return await js.create_key_value(config)


class Mirror:
    """The bucket, and what this gateway last wrote to it or read from it."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self.held: dict[str, bytes] = {}

    async def read(self) -> tuple[list[tenancy.ApiKey], list[tenancy.Tenant]]:
        """Every key and tenant in the bucket; `Unavailable` if NATS cannot say in time."""
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                with bus.map_bus_errors(f"cannot read {subjects.KEY_DIRECTORY}"):
                    entries = await self._entries()
        except TimeoutError:
            raise Unavailable(
                f"{subjects.KEY_DIRECTORY} not read within {READ_TIMEOUT:g} s"
            ) from None
        keys, tenants = [], []
        for name, value in entries.items():
            try:
                if name.startswith(_KEY):
                    keys.append(_keys.decode(value))
                elif name.startswith(_TENANT):
                    tenants.append(_tenants.decode(value))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("ignoring %s in %s: %s", name, subjects.KEY_DIRECTORY, exc)
                continue
            self.held[name] = value
        return keys, tenants

    async def _entries(self) -> dict[str, bytes]:
        watcher = await self.kv.watchall()
        found: dict[str, bytes] = {}
        try:
            async for entry in watcher:
                if entry is None:  # the current values are all in
                    return found
                if entry.value and entry.operation is None:
                    found[entry.key] = entry.value
            return found
        finally:
            with contextlib.suppress(Exception):
                await watcher.stop()  # type: ignore[no-untyped-call]  # untyped in nats-py

    async def write(self, keys: list[tenancy.ApiKey], tenants: list[tenancy.Tenant]) -> int:
        """Write each key and tenant whose copy differs from the bucket's; how many were
        written. Never raises: a copy not written now is written at the next reload."""
        copies = {f"{_KEY}{k.id}": _key_copy(k) for k in keys}
        copies |= {f"{_TENANT}{t.id}": msgspec.json.encode(t) for t in tenants}
        written = 0
        for name, value in copies.items():
            if self.held.get(name) == value:
                continue
            try:
                with bus.map_bus_errors(f"cannot write {subjects.KEY_DIRECTORY}"):
                    await self.kv.put(name, value)
            except Unavailable as exc:
                log.warning("the bus copy of keys is behind (written at the next reload): %s", exc)
                return written
            self.held[name] = value
            written += 1
        return written

    async def forget(self, key_ids: list[str]) -> None:
        """Delete keys PostgreSQL no longer has from the bucket."""
        for key_id in key_ids:
            name = f"{_KEY}{key_id}"
            with contextlib.suppress(Unavailable), bus.map_bus_errors():
                await self.kv.delete(name)
                self.held.pop(name, None)
