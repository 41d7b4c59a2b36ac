"""How the gateway meets an unreachable PostgreSQL: a 503 that says what is unavailable."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from services.core.db import DB_DOWN
from services.core.errors import Unavailable

__all__ = ["DB_DOWN", "unavailable_without_postgres"]


@contextlib.contextmanager
def unavailable_without_postgres(what: str) -> Iterator[None]:
    """Turn a failed PostgreSQL call inside the block into `Unavailable` ("{what}: …")."""
    try:
        yield
    except DB_DOWN as exc:
        raise Unavailable(f"{what}: PostgreSQL: {exc}") from exc
