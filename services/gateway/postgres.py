"""How the gateway meets an unreachable PostgreSQL: a 503 that says what is unavailable,
and, for a gateway that started without it, the keyring's check once it answers."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator

import asyncpg

from services.core import sealed
from services.core.errors import Unavailable
from services.core.pgwatch import Prepare
from services.core.settings import Settings, SettingsError

__all__ = ["check_keyring_later", "unavailable_without_postgres"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def unavailable_without_postgres(what: str) -> Iterator[None]:
    """Name what is unavailable in the `Unavailable` of a PostgreSQL call inside the block
    ("{what}: PostgreSQL: …"); `core/db` and `core/tenancy` raise it."""
    try:
        yield
    except Unavailable as exc:
        raise Unavailable(f"{what}: {exc.message}") from exc


def check_keyring_later(settings: Settings) -> Prepare:
    """The keyring's check (`sealed.check_keyring`) for a gateway that started while
    PostgreSQL was down, run when it first answers: a wrong `PRESSROOM_SERVER_KEY` then
    stops the gateway (SIGTERM to itself, so requests in flight finish), as it would have
    at start."""

    async def check(conn: asyncpg.Connection) -> None:
        try:
            await sealed.check_keyring(conn, settings.server_keys())
        except SettingsError as exc:
            log.critical("stopping: %s", exc)
            signal.raise_signal(signal.SIGTERM)
            raise Unavailable(f"stopping: {exc}") from exc

    return check
