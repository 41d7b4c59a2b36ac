"""Which secrets sign a job's webhook: the job's own, else its tenant's, else the server's.

A job's (or a batch's) own `webhook_secret` travels sealed in its `submitted` event; a
tenant's secrets are sealed in PostgreSQL (`webhook_secrets`) and cached here for `TTL`
seconds, so a new or deleted secret takes effect within that long. Every secret of the
tenant signs, a rotated-out one until its `expires_at`, so the `webhook-signature` header
then carries both signatures. While PostgreSQL is down the cached secrets keep signing; a
tenant not cached then postpones its webhooks (`Unavailable`).
`PRESSROOM_WEBHOOK_SECRET` signs for the implicit tenant (`PRESSROOM_AUTH=disabled`) and
any tenant without secrets of its own.

A secret that exists but does not open with the server keyring is never replaced by
another: signing with the installation's secret instead would send a webhook the
receiver rejects while the attempt is recorded as delivered. `SecretUnreadable`
postpones the webhook instead, and the notifier's log names the missing key's id.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

import asyncpg

from services.core.database import tenancy
from services.core.model import events, subjects
from services.core.model.errors import SecretUnreadable, Unavailable
from services.core.runtime.settings import Settings
from services.core.secrets import crypto, signing

log = logging.getLogger(__name__)

TTL = 5.0
"""Seconds a tenant's secrets are used before they are read again."""


class Keyring:
    def __init__(self, settings: Settings, pool: asyncpg.Pool) -> None:
        self.server_keys = settings.server_keys()
        self.default = signing.parse_secrets(settings.webhook_secret)
        self.pool = pool
        self.cache: dict[str, tuple[float, list[bytes]]] = {}

    def job_keys(self, job: events.JobSubmitted) -> list[bytes] | None:
        """The job's own signing key, None if it has none; `SecretUnreadable` if it has
        one that does not open."""
        return self.own_keys(job.webhook_secret, job.job_id)

    def opened(self, sealed: str, owner: str, what: str) -> str:
        """A value sealed for `owner` (a job's id), in plain text; `SecretUnreadable` if
        it does not open."""
        return self._open(sealed, owner, what)

    def own_keys(self, secret: str | None, owner: str) -> list[bytes] | None:
        """A job's or a batch's own signing key, sealed for `owner` (its id); None if it
        has none, `SecretUnreadable` if it does not open."""
        if not secret:
            return None
        if crypto.is_sealed(secret):
            secret = self._open(secret, owner, "its own webhook secret")
        return signing.parse_secrets(secret)  # an event from before secrets were sealed

    async def tenant_keys(self, tenant: str) -> list[bytes]:
        """Every secret of `tenant` that signs now (the server's if it has none)."""
        if tenant == subjects.DEFAULT_TENANT:
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
        now = dt.datetime.now(dt.UTC)
        what = f"tenant {tenant}'s webhook secret"
        keys = [self._key(r.secret, tenant, what) for r in rows if r.signs(now)] or self.default
        self.cache[tenant] = (time.monotonic(), keys)
        return keys

    def _key(self, sealed: str, tenant: str, what: str) -> bytes:
        return signing.parse_secrets(self._open(sealed, tenant, what))[0]

    def _open(self, sealed: str, owner: str, what: str) -> str:
        try:
            return self.server_keys.unseal(sealed, owner)
        except ValueError as exc:
            message = (
                f"{owner}: {what} does not open with PRESSROOM_SERVER_KEY (keys "
                f"{', '.join(self.server_keys.ids)}): {exc}; the webhook waits until the "
                "key that sealed it is given back"
            )
            log.error("%s", message)
            raise SecretUnreadable(message) from None
