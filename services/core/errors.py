"""Every failure Pressroom names, and what the caller must do about it.

    PressroomError
    ├── DeterministicError        the same input fails the same way: fail the job now
    │   ├── RequestError          a client request is malformed (HTTP 400)
    │   ├── PayloadTooLarge       a request body is over the limit (HTTP 413)
    │   │   └── EventTooLarge     a job is too large for one message on the log (HTTP 413)
    │   ├── NotFound              no such job or file, or another tenant's (HTTP 404)
    │   │   └── NoDiagnosis       the job exists but no attempt of it kept a diagnosis
    │   ├── Unauthorized          no API key, or an unknown or revoked one (HTTP 401)
    │   ├── Forbidden             the key lacks the scope the route needs (HTTP 403)
    │   ├── IdempotencyConflict   an Idempotency-Key reused with another body (HTTP 422)
    │   ├── RateLimited           over the tenant's submission rate (HTTP 429)
    │   ├── QuotaExceeded         over the tenant's monthly quota (HTTP 429)
    │   ├── TooManyStreams        the tenant has its most live-update streams open (HTTP 429)
    │   ├── Conflict              not possible in the job's current state (HTTP 409)
    │   ├── TemplateError         Jinja2 could not parse or render the template
    │   ├── LimitExceeded         the document is over one of the renderer's size limits
    │   │   ├── OutputTooLarge    its bytes (or a PNG's pixels, a receipt's length)
    │   │   │   └── TooManyPages  its page count
    │   │   ├── DomTooLarge       its node count
    │   │   ├── HeaderTooLarge    its header or footer template's size
    │   │   └── TocTooLarge       its table of contents' entries
    │   ├── InvalidEvent          a message on the log cannot be decoded
    │   ├── WaitTimeout           `wait_for`'s selector or expression never came true
    │   ├── SourceError           a `url` source answered 4xx or cannot be a page
    │   ├── FinishingError        post-processing (PDF/A, Factur-X, encryption…) refused
    │   │                         its input or went over its limits
    │   │   └── SigningNotConfigured  `sign` asked of a renderer without a signing key
    │   ├── PageKeepsCrashing     the page crashed its tab on two attempts in a row
    │   └── PrintKeepsTimingOut   printing ran out of time on two attempts in a row
    └── TransientError            may work on a later attempt: retry with backoff
        ├── Unavailable           NATS or Postgres cannot be reached (HTTP 503)
        │   ├── LogFull           the JOBS log has no room for new jobs (HTTP 503)
        │   └── Refused           PostgreSQL refused the data (the projector skips it)
        ├── StorageError          object storage failed
        ├── BrowserError          Chromium crashed or the page broke
        │   └── PageCrashed       the page crashed its tab (twice: the job fails)
        ├── RenderTimeout         the render took longer than allowed
        │   └── PrintTimeout      ... while printing (twice in a row: the job fails)
        ├── TimestampUnavailable  the signing timestamp server failed or refused
        └── SourceUnreachable     a `url` source failed to load or answered 5xx

A renderer `term()`s a message on a deterministic error (after publishing `failed`) and
`nak(delay)`s it on a transient one. Each class carries the HTTP status the gateway
answers with (`http_status`) and the stable name clients see (`kind`).
"""

from __future__ import annotations

from typing import Any


class PressroomError(Exception):
    """Base class; `kind` is the stable, machine-readable name shown to clients."""

    kind = "internal"
    http_status = 500

    def headers(self) -> dict[str, str]:
        """HTTP headers the answer to this error carries (`WWW-Authenticate`, …)."""
        return {}

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (message, field and the rest), so an error raised in a template
        # worker process (`core/jail.py`) reaches the service as it was raised.
        return (_restore, (type(self), self.message, self.__dict__))

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class DeterministicError(PressroomError):
    """Retrying cannot help: the job fails at once with this message."""

    kind = "deterministic"
    http_status = 400


class RequestError(DeterministicError):
    """A request body, header or parameter is invalid; `field` names it."""

    kind = "validation"
    http_status = 400


class PayloadTooLarge(DeterministicError):
    """The request body is larger than `PRESSROOM_MAX_BODY_BYTES`."""

    kind = "too_large"
    http_status = 413


class EventTooLarge(PayloadTooLarge):
    """An event (a job with its input) is over `PRESSROOM_STREAM_MAX_MSG_SIZE`."""


class RequestTimeout(DeterministicError):
    """The client took longer than `PRESSROOM_BODY_TIMEOUT` to send its body."""

    kind = "request_timeout"
    http_status = 408

    def headers(self) -> dict[str, str]:
        # The rest of a body that never came cannot be told from the next request.
        return {"Connection": "close"}


class NotFound(DeterministicError):
    """The job, file or link does not exist (or has expired)."""

    kind = "not_found"
    http_status = 404


class NoDiagnosis(NotFound):
    """The caller's job exists, but none of its attempts kept a diagnosis (it has not
    failed on a page, and did not ask for one with `options.diagnostics`)."""

    kind = "no_diagnosis"


class Unauthorized(DeterministicError):
    """No API key, or one the gateway does not know or that was revoked."""

    kind = "unauthorized"
    http_status = 401

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="pressroom"'}


class Forbidden(DeterministicError):
    """The API key is valid but lacks the scope this request needs."""

    kind = "forbidden"
    http_status = 403


class IdempotencyConflict(DeterministicError):
    """An `Idempotency-Key` already used for a request with another body."""

    kind = "idempotency_conflict"
    http_status = 422


class TooManyRequests(DeterministicError):
    """The tenant is over one of its limits; it may try again after `retry_after` seconds."""

    http_status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class RateLimited(TooManyRequests):
    """The tenant submits faster than its rate limit."""

    kind = "rate_limited"


class TooManyStreams(TooManyRequests):
    """The tenant has `PRESSROOM_MAX_STREAMS` live-update streams open in this gateway."""

    kind = "too_many_streams"


class QuotaExceeded(TooManyRequests):
    """The tenant has used its monthly quota of successful documents."""

    kind = "quota_exceeded"


class Conflict(DeterministicError):
    """The request does not fit the job's current state (HTTP 409)."""

    kind = "conflict"
    http_status = 409


class TemplateError(DeterministicError):
    """The template has a syntax error or uses an undefined variable."""

    kind = "template"


class LimitExceeded(DeterministicError):
    """The document is over one of the renderer's limits on what a document may be; the
    message names the limit and the `PRESSROOM_*` setting that raises it. Checked before
    or while printing, so a document that can never fit fails once, early."""

    kind = "limit_exceeded"


class OutputTooLarge(LimitExceeded):
    """The rendered PDF is larger than `PRESSROOM_MAX_OUTPUT_BYTES` (or a PNG or a
    receipt is over the sizes a file may have)."""

    kind = "output_too_large"


class TooManyPages(OutputTooLarge):
    """The PDF has more pages than `PRESSROOM_MAX_PAGES`: found while printing, after
    at most one page more than the limit."""

    kind = "too_many_pages"


class DomTooLarge(LimitExceeded):
    """The loaded document has more nodes than `PRESSROOM_MAX_DOM_NODES`."""

    kind = "dom_too_large"


class HeaderTooLarge(LimitExceeded):
    """A header or footer template is over `PRESSROOM_MAX_HEADER_BYTES`."""

    kind = "header_too_large"


class TocTooLarge(LimitExceeded):
    """A table of contents would have more entries than `PRESSROOM_MAX_TOC_ENTRIES`."""

    kind = "toc_too_large"


class InvalidEvent(DeterministicError):
    """A message on the log is not a valid event of this schema."""

    kind = "invalid_event"


class WaitTimeout(DeterministicError):
    """`options.wait_for`'s selector never matched, or its expression never became truthy.

    The template or page decides what appears, so the same job would wait in vain again.
    """

    kind = "wait_timeout"


class SourceError(DeterministicError):
    """A `url` source answered with a 4xx status, or was refused or is not a page."""

    kind = "source"


class FinishingError(DeterministicError):
    """A finishing step (`services/renderer/finishing/`) refused its input (an invoice XML
    that is not well-formed, a PDF it cannot read) or went over the finishing worker's
    memory or time limit: the same job would fail the same way."""

    kind = "finishing"


class SigningNotConfigured(FinishingError):
    """A job asks for `sign` of a renderer that has no signing certificate and key
    (`PRESSROOM_SIGNING_CERT`, `PRESSROOM_SIGNING_KEY`): every attempt would fail alike."""

    kind = "signing_not_configured"


class PageKeepsCrashing(DeterministicError):
    """The page crashed its tab on two attempts in a row (out of memory, a renderer fault):
    a third try would crash again."""

    kind = "page_crashed"


class PrintKeepsTimingOut(DeterministicError):
    """Printing ran out of the render time limit on two attempts in a row, its page
    loaded and its waits over both times: the document is too long or too complex to
    print in time, and a third try would run out again. The same error type as any
    timeout (`timeout`), failed instead of retried."""

    kind = "timeout"


class TransientError(PressroomError):
    """A dependency failed; the same work may succeed later."""

    kind = "transient"
    http_status = 503


class Unavailable(TransientError):
    """NATS or PostgreSQL cannot be reached right now."""

    kind = "unavailable"


class LogFull(Unavailable):
    """The JOBS log is near `PRESSROOM_STREAM_MAX_BYTES`: new jobs wait until it drains.

    Its last part is kept for the events of jobs already accepted, which are never
    dropped to make room (the stream discards new messages, not old ones).
    """

    kind = "log_full"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "30"}


class Refused(Unavailable):
    """PostgreSQL refused a statement's data (an invalid value, a broken constraint, a
    value over a limit), not the connection.

    An `Unavailable` to every caller (a 503, a retry later: a fix on the server's side may
    let it through) but the projector, which skips the event rather than stall the whole
    projection on it.
    """

    kind = "refused"


class StorageError(TransientError):
    """Object storage refused or failed an operation."""

    kind = "storage"


class BrowserError(TransientError):
    """Chromium crashed, disconnected or the page failed."""

    kind = "browser"


class PageCrashed(BrowserError):
    """The page crashed its tab (out of memory, or a renderer fault). Retried once: a page
    that crashes its tab on two attempts in a row fails the job (`PageKeepsCrashing`)."""

    kind = "page_crashed"


class RenderTimeout(TransientError):
    """The render exceeded `PRESSROOM_RENDER_TIMEOUT`."""

    kind = "timeout"


class PrintTimeout(RenderTimeout):
    """The render ran out of time while Chromium printed the loaded page. Retried once: a
    second one in a row fails the job (`PrintKeepsTimingOut`). Its message starts with
    `PREFIX`, which is how the next attempt knows from the log what this one ran into."""

    PREFIX = "printing did not end within the render time limit"


class TimestampUnavailable(TransientError):
    """The timestamp server (`PRESSROOM_SIGNING_TSA_URL`) could not be reached or gave no
    timestamp: a signature without its timestamp is not stored, the job is retried."""

    kind = "timestamp_unavailable"


class SourceUnreachable(TransientError):
    """A `url` source could not be loaded (DNS, connection) or answered 5xx, 408 or 429."""

    kind = "source_unreachable"


def _restore(cls: type[PressroomError], message: str, state: dict[str, Any]) -> PressroomError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error
