"""How the gateway meets an unreachable PostgreSQL: a 503 that says what is unavailable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import asyncpg

from services.core.errors import Unavailable

DB_DOWN = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # asyncpg 0.32 raises this ("cannot switch to state 11; another operation (2) is in
    # progress") from a pooled connection the server terminated while it sat idle.
    asyncpg.InternalClientError,
    asyncio.TimeoutError,
)
"""What asyncpg raises when the server is down, restarting, dropped the connection or is
too slow to answer."""


@contextlib.contextmanager
def unavailable_without_postgres(what: str) -> Iterator[None]:
    """Turn a failed PostgreSQL call inside the block into `Unavailable` ("{what}: …")."""
    try:
        yield
    except DB_DOWN as exc:
        raise Unavailable(f"{what}: PostgreSQL: {exc}") from exc
