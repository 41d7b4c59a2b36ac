"""Keys and tenants kept current on every gateway: told over NATS at once, reloaded from
PostgreSQL as a backstop.

A gateway whose admin API changes a key or a tenant publishes `KeyNews` on
`subjects.KEY_NEWS` (core NATS, not the log). Every gateway, the publisher included:

- marks the keys the notice names as revoked at once, without asking PostgreSQL, so a
  revocation is refused everywhere within a round trip of NATS, and stays refused while
  PostgreSQL is down (the directory keeps what it knows);
- wakes its refresh, which reads what changed from PostgreSQL (a new key, new limits) now
  rather than at its next round.

The bus can only take access away: a new key or a wider scope is only ever read from
PostgreSQL, so whoever could publish a notice could not grant itself anything (and only
the gateway's identity may publish one, `core/busaccess`). A lost notice costs nothing
but time: the refresh still runs every `PRESSROOM_AUTH_REFRESH` seconds, and while
PostgreSQL is down it is skipped without a word (the watch has said so once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import msgspec
from aiohttp import web
from nats.aio.client import Client
from nats.aio.msg import Msg

from services.core import bus, subjects
from services.core.errors import Unavailable
from services.gateway.auth import DIRECTORY
from services.gateway.keys import NATS, PG_WATCH, POOL, SETTINGS

log = logging.getLogger(__name__)

USE_FLUSH_EVERY = 10
"""Refreshes between two writes of keys' last-use times."""


class KeyNews(msgspec.Struct, frozen=True):
    """A change to keys or tenants: the ids of keys revoked by it (none for a new key or a
    tenant's new limits, which each gateway reads from PostgreSQL)."""

    revoked: list[str] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(KeyNews)


async def tell(app: web.Application, revoked: list[str] | None = None) -> None:
    """Tell every gateway that keys or tenants changed. Never raises: PostgreSQL holds the
    change already, and every gateway reloads it within `PRESSROOM_AUTH_REFRESH`."""
    body = msgspec.json.encode(KeyNews(revoked or []))
    try:
        with bus.map_bus_errors():
            await app[NATS].publish(subjects.KEY_NEWS, body)
    except Unavailable as exc:
        log.warning("other gateways not told of a key change (they reload it): %s", exc)


class Listener:
    """Applies notices as they come; `wake` is set for the refresh loop."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.wake = asyncio.Event()

    async def heard(self, msg: Msg) -> None:
        try:
            news = _decoder.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("ignoring a malformed key notice: %s", exc)
            return
        if news.revoked:
            self.app[DIRECTORY].revoke(news.revoked)
        self.wake.set()


async def refresh_forever(app: web.Application, wake: asyncio.Event, stop: asyncio.Event) -> None:
    """Reload changed keys and tenants every `PRESSROOM_AUTH_REFRESH` seconds, or at once
    when woken; PostgreSQL trouble keeps the last copy."""
    rounds = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), app[SETTINGS].auth_refresh)
        wake.clear()
        rounds += 1
        await _refresh(app, flush=rounds % USE_FLUSH_EVERY == 0 or stop.is_set())


async def _refresh(app: web.Application, *, flush: bool) -> None:
    if not app[PG_WATCH].up:
        return  # the watch said so once; saying it every second helps nobody
    directory, pool = app[DIRECTORY], app[POOL]
    try:
        await directory.refresh(pool)
        if flush:
            await directory.flush_use(pool)
    except Unavailable as exc:
        log.warning("keys and tenants not refreshed (the last copy serves): %s", exc)
    except Exception:  # a bug must not end the refreshes: revocations would stop
        log.exception("keys and tenants not refreshed (the last copy serves)")


@contextlib.asynccontextmanager
async def kept_current(app: web.Application) -> AsyncIterator[None]:
    """Listen for notices and refresh in the background while the block runs."""
    listener = Listener(app)
    nc: Client = app[NATS]
    with bus.map_bus_errors():
        subscription = await nc.subscribe(subjects.KEY_NEWS, cb=listener.heard)
    stop = asyncio.Event()
    task = asyncio.create_task(refresh_forever(app, listener.wake, stop))
    try:
        yield
    finally:
        stop.set()
        listener.wake.set()
        await task
        with contextlib.suppress(Unavailable), bus.map_bus_errors():
            await subscription.unsubscribe()
