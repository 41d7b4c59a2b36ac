"""Which secrets sign a job's webhook: the job's own, else its tenant's, else the server's.

A job's (or a batch's) own `webhook_secret` travels sealed in its `submitted` event; a
tenant's secrets are sealed in PostgreSQL (`webhook_secrets`) and cached here for `TTL`
seconds, so a new or deleted secret takes effect within that long. While PostgreSQL is
down the cached secrets keep signing; a tenant not cached then postpones its webhooks
(`Unavailable`).
`PRESSROOM_WEBHOOK_SECRET` signs for the implicit tenant (`PRESSROOM_AUTH=disabled`) and
any tenant without secrets of its own.
"""

from __future__ import annotations

import logging
import time

import asyncpg

from services.core import crypto, events, signing, tenancy
from services.core.errors import Unavailable
from services.core.settings import Settings

log = logging.getLogger(__name__)

TTL = 5.0
"""Seconds a tenant's secrets are used before they are read again."""


class Keyring:
    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.server_key = settings.server_key_bytes()
        self.default = signing.parse_secrets(settings.webhook_secret)
        self.pool = pool
        self.cache: dict[str, tuple[float, list[bytes]]] = {}

    def job_keys(self, job: events.JobSubmitted) -> list[bytes] | None:
        """The job's own signing key, None if it has none (or it cannot be opened)."""
        return self.own_keys(job.webhook_secret, job.job_id)

    def own_keys(self, secret: str | None, owner: str) -> list[bytes] | None:
        """A job's or a batch's own signing key, sealed for `owner` (its id); None if it
        has none (or it cannot be opened)."""
        if not secret:
            return None
        if crypto.is_sealed(secret):
            try:
                secret = crypto.unseal(self.server_key, secret, owner)
            except ValueError as exc:
                log.error("%s: its webhook secret does not open: %s", owner, exc)
                return None
        return signing.parse_secrets(secret)  # an event from before secrets were sealed

    async def tenant_keys(self, tenant: str) -> list[bytes]:
        """Every secret of `tenant` (the server's if it has none)."""
        if tenant == events.DEFAULT_TENANT:
            return self.default
        cached = self.cache.get(tenant)
        if cached is not None and time.monotonic() - cached[0] < TTL:
            return cached[1]
        try:
            rows = await tenancy.webhook_secrets(self.pool, tenant)
        except Unavailable as exc:
            if cached is not None:
                return cached[1]
            raise Unavailable(f"cannot read the tenant's webhook secrets: {exc.message}") from exc
        opened = [self._open(r.secret, tenant) for r in rows]
        keys = [k for k in opened if k is not None] or self.default
        self.cache[tenant] = (time.monotonic(), keys)
        return keys

    def _open(self, sealed: str, tenant: str) -> bytes | None:
        try:
            return signing.parse_secrets(crypto.unseal(self.server_key, sealed, tenant))[0]
        except ValueError as exc:
            log.error("tenant %s: a webhook secret does not open: %s", tenant, exc)
            return None
