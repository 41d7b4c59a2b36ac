"""nats-py's exceptions translated into the project's, once, at the bus boundary."""

from __future__ import annotations

from nats.errors import Error as NatsError
from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

from services.core.model.errors import Conflict, NotFound, PressroomError, Unavailable
from services.core.runtime.boundary import ErrorMap, describe

NATS_DOWN = (NatsError, OSError)
"""What nats-py raises when NATS is away, reconnecting, electing a leader, slow to answer
or answers with an error (`TimeoutError` is an `OSError`; nats-py's timeouts are both)."""


def map_bus_errors(context: str = "NATS") -> ErrorMap:
    """`with`, `async with` or a decorator: nats-py's errors inside become the project's,
    "{context}: {type}: {text}". JetStream's "no such message, consumer or bucket" is
    `NotFound` and a key-value write that lost to another one is `Conflict` (answers, not
    trouble); everything else in `NATS_DOWN` is `Unavailable`."""

    def translate(exc: Exception) -> PressroomError | None:
        if isinstance(exc, NotFoundError):
            return NotFound(f"{context}: {describe(exc)}")
        if isinstance(exc, KeyWrongLastSequenceError):
            return Conflict(f"{context}: {describe(exc)}")
        if isinstance(exc, NATS_DOWN):
            return Unavailable(f"{context}: {describe(exc)}")
        return None

    return ErrorMap(translate)
