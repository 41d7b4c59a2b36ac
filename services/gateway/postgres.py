"""How the gateway meets an unreachable PostgreSQL: a 503 that says what is unavailable."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from services.core.model.errors import Unavailable

__all__ = ["unavailable_without_postgres"]


@contextlib.contextmanager
def unavailable_without_postgres(what: str) -> Iterator[None]:
    """Name what is unavailable in the `Unavailable` of a PostgreSQL call inside the block
    ("{what}: PostgreSQL: …"); `core/database/db` and `core/database/tenancy` raise it."""
    try:
        yield
    except Unavailable as exc:
        raise Unavailable(f"{what}: {exc.message}") from exc
