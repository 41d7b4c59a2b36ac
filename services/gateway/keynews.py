"""Keys and tenants kept current on every gateway: told over NATS at once, reloaded from
PostgreSQL as a backstop.

A gateway whose admin API changes a key or a tenant publishes `KeyNews` on
`subjects.KEY_NEWS` (core NATS, not the log). Every gateway, the publisher included:

- marks the keys the notice names as revoked at once, without asking PostgreSQL, so a
  revocation is refused everywhere within a round trip of NATS, and stays refused while
  PostgreSQL is down (the directory keeps what it knows);
- wakes its refresh, which reads what changed from PostgreSQL (a new key, new limits) now
  rather than at its next round, and writes it to the bus copy (`keymirror.py`) that a
  gateway starting while PostgreSQL is down reads.

A notice can only take access away: a new key or a wider scope is only ever read from
PostgreSQL (or, at a start without it, from the gateways' copy, which only their identity
may read or write), so whoever could publish a notice could not grant itself anything
(and only the gateway's identity may publish one, `core/log/busaccess`). A lost notice costs nothing
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

from services.core.log import bus
from services.core.model import subjects
from services.core.model.errors import Unavailable
from services.gateway.auth import DIRECTORY
from services.gateway.keys import KEY_MIRROR, NATS, PG_WATCH, POOL, SETTINGS

log = logging.getLogger(__name__)

USE_FLUSH_EVERY = 10
"""Refreshes between two writes of keys' last-use times."""


class KeyNews(msgspec.Struct, frozen=True):
    """A change to keys or tenants: the ids of keys revoked by it (none for a new key or a
    tenant's new limits, which each gateway reads from PostgreSQL)."""

    revoked: list[str] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(KeyNews)


async def tell(app: web.Application, revoked: list[str] | None = None) -> None:
    """Copy a change this gateway made (in its directory already) to the bus copy before
    the caller is answered, so a gateway started just after cannot miss it; then tell
    every gateway. Never raises: PostgreSQL holds the change already, and every gateway
    reloads it within `PRESSROOM_AUTH_REFRESH`."""
    await _copy(app)
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
        await reload(app)
        if flush:
            await directory.flush_use(pool)
    except Unavailable as exc:
        log.warning("keys and tenants not refreshed (the last copy serves): %s", exc)
    except Exception:  # a bug must not end the refreshes: revocations would stop
        log.exception("keys and tenants not refreshed (the last copy serves)")


async def reload(app: web.Application) -> None:
    """Read what changed from PostgreSQL, and copy it to the bus (`keymirror`)."""
    gone = await app[DIRECTORY].refresh(app[POOL])
    await _copy(app)
    if gone:
        log.warning("keys PostgreSQL does not have were dropped: %s", ", ".join(gone))
        await app[KEY_MIRROR].forget(gone)


async def _copy(app: web.Application) -> None:
    directory = app[DIRECTORY]
    await app[KEY_MIRROR].write(list(directory.by_id.values()), list(directory.tenants.values()))


async def first_load(app: web.Application) -> None:
    """Every key and tenant before the first request: from PostgreSQL, or from the bus
    copy while PostgreSQL is away (with neither, every key is `503` until PostgreSQL
    answers)."""
    if app[PG_WATCH].up:
        try:
            await reload(app)
            return
        except Unavailable as exc:
            log.warning("keys not read from PostgreSQL (trying the bus copy): %s", exc)
    try:
        keys, tenants = await app[KEY_MIRROR].read()
    except Unavailable as exc:
        log.error("no API keys known until PostgreSQL answers: %s", exc)
        return
    app[DIRECTORY].seed(keys, tenants)
    log.warning(
        "PostgreSQL is down: serving %d API keys of %d tenants from the bus copy until it "
        "answers", len(keys), len(tenants),
    )  # fmt: skip


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
