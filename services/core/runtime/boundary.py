"""Library errors become the project's at the boundary, the way httpx maps transport errors.

`core/database/db` and `core/log/bus` each say once which of their library's exceptions mean what
(asyncpg's in `db.DB_DOWN` and `db.REFUSED`, nats-py's in `bus.NATS_DOWN`) and wrap their
calls in an `ErrorMap` built from that; code past them catches `Unavailable` and the rest
of `core/model/errors` only, never an asyncpg or nats exception.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from services.core.model.errors import PressroomError

P = ParamSpec("P")
T = TypeVar("T")

Translate = Callable[[Exception], PressroomError | None]
"""The project's error for a library exception, None for one that is not the library's."""


def describe(exc: BaseException) -> str:
    """`TypeName: text`, or the type's name alone for an exception without text (a bare
    `TimeoutError`): the root cause as the logs and a 503's message show it."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ErrorMap:
    """Re-raises a library exception raised inside it as the project's error `translate`
    makes of it, chained (`raise … from`), so the original stays in the traceback.

    Usable as `with`, as `async with` and as a decorator of coroutine functions. Keeps no
    state: one instance may be entered any number of times at once. Errors that are
    already the project's, and `BaseException`s such as a cancellation, pass unchanged.
    """

    def __init__(self, translate: Translate) -> None:
        self._translate = translate

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, PressroomError):
            mapped = self._translate(exc)
            if mapped is not None:
                raise mapped from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.__exit__(kind, exc, traceback)

    def __call__(self, func: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(func)
        async def mapped(*args: P.args, **kwargs: P.kwargs) -> T:
            with self:
                return await func(*args, **kwargs)

        return mapped
