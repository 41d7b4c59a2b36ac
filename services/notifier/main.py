"""`pressroom notifier`: deliver signed webhooks for finished jobs."""

from __future__ import annotations

import asyncio

from services.core.database import db, sealed
from services.core.log import bus, worker
from services.core.log.busaccess import Role
from services.core.model import subjects
from services.core.objectstore.storage import open_storage
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings, SettingsError
from services.core.secrets import signing
from services.notifier import delivery
from services.notifier.consumer import Notifier, track_backlog
from services.notifier.keyring import Keyring


def check_secret(settings: Settings) -> None:
    try:
        signing.parse_secrets(settings.webhook_secret)
    except ValueError as exc:
        raise SettingsError(f"PRESSROOM_WEBHOOK_SECRET is invalid: {exc}") from None


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    check_secret(settings)
    keys = settings.server_keys()  # none, or a malformed one: stop now, naming it
    async with (
        metrics.serve(settings.host, settings.metrics_port) as health,
        bus.open_bus(settings, name="notifier", role=Role.NOTIFIER) as (nc, js),
        # started while PostgreSQL is down: its secrets are read, and the keyring checked,
        # once it answers
        db.open_pool(settings, size=2, lazy=True) as pool,
        db.watched(pool, settings, sealed.check_keyring_later(keys)) as postgres,
        open_storage(settings) as storage,
        delivery.open_session(allow_private=settings.allow_private_networks) as session,
    ):
        if pool.migrated:  # a wrong keyring: stop now, not at each webhook
            await sealed.check_keyring(pool, keys)
        health.check("nats", lambda: nc.is_connected)
        health.inform("postgres", lambda: postgres.up)  # cached secrets sign meanwhile
        notifier = Notifier(settings, js, storage, session, Keyring(settings, pool), pool)
        backlog = asyncio.create_task(track_backlog(js, stop))
        try:
            await worker.work(
                js,
                subjects.NOTIFIER,
                notifier.handle,
                limit=settings.webhook_concurrency,
                stop=stop,
                grace=settings.webhook_timeout,
            )
        finally:
            await lifecycle.cancelled(backlog)


def main() -> None:
    lifecycle.run("notifier", serve)
