"""Library errors become the project's at the boundary (`core/database/db`, `core/log/bus`).

Each exception asyncpg or nats-py raises when a server is down, restarting, slow, or
answers "no", comes out of `map_db_errors()` / `map_bus_errors()` as the project's error,
with the library's exception as its cause and its text in the message. No server is
needed: the exceptions are the libraries' own classes, raised as the libraries raise them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
import pytest
from nats.errors import (
    ConnectionClosedError,
    ConnectionReconnectingError,
    NoRespondersError,
    NoServersError,
    OutboundBufferLimitError,
)
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import (
    KeyWrongLastSequenceError,
    NoStreamResponseError,
    NotFoundError,
    ServiceUnavailableError,
)

from services.core.database.db import map_db_errors
from services.core.log.bus import map_bus_errors
from services.core.model.errors import (
    Conflict,
    NotFound,
    PressroomError,
    Refused,
    RequestError,
    Unavailable,
)
from services.core.runtime.boundary import ErrorMap

DB_DOWN = [
    ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
    TimeoutError(),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle"),
    asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
    asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
]

DB_REFUSED = [
    asyncpg.exceptions.CharacterNotInRepertoireError('invalid byte sequence for "UTF8": 0x00'),
    asyncpg.exceptions.UntranslatableCharacterError("unsupported Unicode escape sequence"),
    asyncpg.DataError("invalid input for query argument $1: 'x' (an integer is required)"),
    asyncpg.exceptions.UniqueViolationError("duplicate key value violates unique constraint"),
    asyncpg.exceptions.CheckViolationError('new row violates check constraint "name"'),
    asyncpg.exceptions.ProgramLimitExceededError("index row size 9000 exceeds maximum 2712"),
]

NATS_DOWN = [
    NoServersError(),
    ConnectionClosedError(),
    ConnectionReconnectingError(),
    OutboundBufferLimitError(),
    NatsTimeout(),
    NoStreamResponseError(),
    NoRespondersError(),
    ServiceUnavailableError(code=503, description="JetStream temporarily unavailable"),
    TimeoutError(),
    ConnectionResetError(104, "Connection reset by peer"),
]


def _root(exc: BaseException) -> str:
    """The text a message must keep: the type's name, and the exception's text if any."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _raised(cm: pytest.ExceptionInfo[PressroomError], cause: Exception) -> PressroomError:
    error = cm.value
    assert error.__cause__ is cause
    return error


@pytest.mark.parametrize("cause", DB_DOWN, ids=lambda e: type(e).__name__)
def test_a_database_that_is_down_is_unavailable(cause: Exception) -> None:
    with pytest.raises(Unavailable) as cm, map_db_errors():
        raise cause
    error = _raised(cm, cause)
    assert type(error) is Unavailable
    assert error.http_status == 503
    assert error.message == f"PostgreSQL: {_root(cause)}"


@pytest.mark.parametrize("cause", DB_REFUSED, ids=lambda e: type(e).__name__)
def test_data_postgresql_refuses_is_refused_and_still_a_503_to_the_gateway(
    cause: Exception,
) -> None:
    with pytest.raises(Refused) as cm, map_db_errors("cannot store the template"):
        raise cause
    error = _raised(cm, cause)
    assert isinstance(error, Unavailable) and error.http_status == 503
    assert error.message == f"cannot store the template: {_root(cause)}"


@pytest.mark.parametrize("cause", NATS_DOWN, ids=lambda e: type(e).__name__)
def test_nats_that_is_down_is_unavailable(cause: Exception) -> None:
    with pytest.raises(Unavailable) as cm, map_bus_errors():
        raise cause
    error = _raised(cm, cause)
    assert type(error) is Unavailable
    assert error.message == f"NATS: {_root(cause)}"


def test_jetstream_answering_not_found_is_not_found() -> None:
    cause = NotFoundError(code=404, description="no message found", err_code=10037)
    with pytest.raises(NotFound) as cm, map_bus_errors():
        raise cause
    assert "no message found" in _raised(cm, cause).message


def test_a_key_value_write_that_lost_is_a_conflict() -> None:
    cause = KeyWrongLastSequenceError(description="wrong last sequence: 5")
    with pytest.raises(Conflict) as cm, map_bus_errors("claiming the key"):
        raise cause
    assert _raised(cm, cause).message == "claiming the key: " + _root(cause)


async def test_the_maps_work_with_async_with_and_as_decorators() -> None:
    cause = asyncpg.exceptions.AdminShutdownError("terminating connection")
    with pytest.raises(Unavailable) as cm:
        async with map_db_errors():
            await asyncio.sleep(0)
            raise cause
    assert _raised(cm, cause).message == f"PostgreSQL: {_root(cause)}"

    @map_bus_errors("NATS did not acknowledge the event")
    async def publish() -> None:
        await asyncio.sleep(0)
        raise NatsTimeout()

    with pytest.raises(Unavailable) as cm2:
        await publish()
    assert cm2.value.message == "NATS did not acknowledge the event: TimeoutError: nats: timeout"


@pytest.mark.parametrize("mapped", [map_db_errors, map_bus_errors])
def test_other_errors_pass_unchanged(mapped: Callable[[], ErrorMap]) -> None:
    ours = RequestError("bad field", field="x")
    with pytest.raises(RequestError) as cm, mapped():
        raise ours
    assert cm.value is ours
    with pytest.raises(KeyError), mapped():
        raise KeyError("not a library error")
    with pytest.raises(asyncio.CancelledError), mapped():
        raise asyncio.CancelledError
