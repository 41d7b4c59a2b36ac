"""What the client raises, one class per family of the API's `error.type`.

    PressroomError            every failure; `.type`, `.message`, `.field`, `.status`
    ├── Invalid               400: a bad field or parameter (`.field` names it)
    ├── Unauthorized          401: no key, or an unknown or revoked one
    ├── Forbidden             403: the key lacks the route's scope
    ├── NotFound              404: no such job, batch or template (or another tenant's)
    ├── Conflict              409 and 422: not possible in its current state, or an
    │                         `Idempotency-Key` reused with another body
    ├── TooLarge              413: a body or a job over a limit
    ├── RateLimited           429: over a rate, quota or stream limit; `.retry_after`
    ├── Unavailable           503, 5xx, or the gateway cannot be reached: try later
    │                         (`.retry_after` when the gateway said when)
    │   └── WaitTimeout       `wait()` or `progress()` reached its deadline first
    ├── ProtocolError         the answer is not what a Pressroom gateway sends
    └── ConfigurationError    no usable gateway URL or key in the flags, environment or
                              the `make up` data folder

Every error answer is mapped here, in `from_answer`, and nowhere else.
"""

from __future__ import annotations

from typing import Any

import msgspec


class PressroomError(Exception):
    """An error of the API (or of reaching it). `type` is the API's `error.type`."""

    def __init__(
        self, message: str, *, type: str = "error", field: str | None = None, status: int = 0
    ) -> None:
        super().__init__(message)
        self.message, self.type, self.field, self.status = message, type, field, status

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field and self.field not in self.message else ""
        return f"{self.message}{where}"


class Invalid(PressroomError):
    """The request was refused as invalid (400); `field` names what to fix."""


class Unauthorized(PressroomError):
    """No API key was sent, or the gateway does not know it or it was revoked (401)."""


class Forbidden(PressroomError):
    """The API key lacks the scope this request needs (403)."""


class NotFound(PressroomError):
    """No such job, batch or template, or it belongs to another tenant (404)."""


class Conflict(PressroomError):
    """Not possible in the object's current state (409), or an `Idempotency-Key` reused
    with another body (422, type `idempotency_conflict`)."""


class TooLarge(PressroomError):
    """A request body or a job is over one of the gateway's limits (413)."""


class RateLimited(PressroomError):
    """Over the tenant's rate, quota or open streams (429); retry after `retry_after`
    seconds (None when the gateway did not say)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class Unavailable(PressroomError):
    """The gateway or what it depends on cannot serve now (5xx, or no connection); try
    again after `retry_after` seconds when the gateway said (None when it did not)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class WaitTimeout(Unavailable, TimeoutError):
    """`wait()` or `progress()` did not see the end before its deadline; the job or
    batch goes on (cancel it if it is no longer wanted)."""


class ProtocolError(PressroomError):
    """The answer is not what a Pressroom gateway sends (not JSON, missing fields)."""


class ConfigurationError(PressroomError):
    """The gateway's URL or key cannot be worked out (a bad `PRESSROOM_*` variable)."""


_BY_STATUS: dict[int, type[PressroomError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    422: Conflict,
    429: RateLimited,
}


class _ErrorBody(msgspec.Struct):
    type: str = "error"
    message: str = ""
    field: str | None = None


class _ErrorAnswer(msgspec.Struct):
    error: _ErrorBody


def error_class(status: int) -> type[PressroomError]:
    """The class of an error answer with HTTP status `status`."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return Unavailable if status >= 500 else PressroomError


def from_answer(status: int, body: bytes, headers: Any) -> PressroomError:
    """The exception for an error answer: its `error` object, or its HTTP status when the
    body is not Pressroom's (a proxy's page)."""
    try:
        error = msgspec.json.decode(body, type=_ErrorAnswer).error
    except msgspec.DecodeError:
        error = _ErrorBody("http", f"the gateway answered HTTP {status}")
    cls = error_class(status)
    kw: dict[str, Any] = {"type": error.type, "field": error.field, "status": status}
    if issubclass(cls, RateLimited | Unavailable):
        kw["retry_after"] = retry_after(headers.get("Retry-After"))
    return cls(error.message or f"HTTP {status}", **kw)


def retry_after(value: str | None) -> float | None:
    """The seconds of a `Retry-After` header (None if absent or a date)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
