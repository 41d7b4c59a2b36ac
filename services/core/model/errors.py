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
    │   ├── CompileLimited        over the tenant's share of template compiling (HTTP 429)
    │   ├── Conflict              not possible in the job's current state (HTTP 409)
    │   ├── RangeNotSatisfiable   a download's Range starts past the file's end (HTTP 416)
    │   ├── TemplateError         Jinja2 could not parse or render the template
    │   ├── LimitExceeded         the document is over one of the renderer's size limits
    │   │   ├── OutputTooLarge    its bytes (or a PNG's pixels, a receipt's length)
    │   │   │   └── TooManyPrintedPages  its page count
    │   │   ├── DomTooLarge       its node count
    │   │   ├── HeaderTooLarge    its header or footer template's size
    │   │   └── TocTooLarge       its table of contents' entries
    │   ├── InvalidEvent          a message on the log cannot be decoded
    │   ├── WaitTimeout           `wait_for`'s selector or expression never came true
    │   ├── SourceError           a `url` source answered 4xx or cannot be a page
    │   ├── AssetMissing          the page asks for a file the job does not carry, or a
    │   │                         job names a stored asset the tenant does not have
    │   ├── FinishingError        a PDF step (finishing or a PDF-tool job: PDF/A, Factur-X,
    │   │                         encryption…) refused its input or went over its limits
    │   │   ├── SigningNotConfigured  `sign` asked of a renderer without a signing key
    │   │   ├── PdfInvalid        an input is not a PDF the PDF library can read (HTTP 422)
    │   │   ├── PdfEncrypted      an input needs a password that was not given (HTTP 422)
    │   │   ├── PdfActiveContent  an input carries JavaScript or launch actions (HTTP 422)
    │   │   ├── TooManyPages      the inputs have more pages than allowed (HTTP 413)
    │   │   ├── PdfaNotPossible   an input cannot be made PDF/A, and why (HTTP 422)
    │   │   ├── PdfUaNotPossible  PDF/UA asked of an untagged input, or one without a title
    │   │   └── InvoiceInvalid    a Factur-X XML fails its XSD or its profile (HTTP 422)
    │   ├── PageKeepsCrashing     the page crashed its tab on two attempts in a row
    │   └── PrintKeepsTimingOut   printing ran out of time on two attempts in a row
    └── TransientError            may work on a later attempt: retry with backoff
        ├── Unavailable           NATS or Postgres cannot be reached (HTTP 503)
        │   ├── LogFull           the JOBS log has no room for new jobs (HTTP 503)
        │   ├── RetryLater        not possible now, with the seconds to wait (HTTP 503)
        │   ├── SecretUnreadable  a stored secret does not open with the server keyring
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
answers with (`http_status`) and the stable name clients see (`kind`, an `ErrorType` from
`errortypes`).

Size: one class per failure in the tree above, each with its HTTP status and kind; the tree
is kept whole in one place, so every service raises and translates failures from one tree.
"""

from __future__ import annotations

from typing import Any

from services.core.model.errortypes import ErrorType


class PressroomError(Exception):
    """Base class; `kind` is the stable, machine-readable name shown to clients."""

    kind = ErrorType.INTERNAL
    http_status = 500

    def headers(self) -> dict[str, str]:
        """HTTP headers the answer to this error carries (`WWW-Authenticate`, …)."""
        return {}

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (message, field and the rest), so an error raised in a template
        # worker process (`core/sandbox/jail.py`) reaches the service as it was raised.
        return (_restore, (type(self), self.message, self.__dict__))

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class DeterministicError(PressroomError):
    """Retrying cannot help: the job fails at once with this message."""

    kind = ErrorType.DETERMINISTIC
    http_status = 400


class RequestError(DeterministicError):
    """A request body, header or parameter is invalid; `field` names it."""

    kind = ErrorType.VALIDATION
    http_status = 400


class PayloadTooLarge(DeterministicError):
    """The request body is larger than `PRESSROOM_MAX_BODY_BYTES`."""

    kind = ErrorType.TOO_LARGE
    http_status = 413


class EventTooLarge(PayloadTooLarge):
    """An event (a job with its input) is over `PRESSROOM_STREAM_MAX_MSG_SIZE`."""


class RequestTimeout(DeterministicError):
    """The client took longer than `PRESSROOM_BODY_TIMEOUT` to send its body."""

    kind = ErrorType.REQUEST_TIMEOUT
    http_status = 408

    def headers(self) -> dict[str, str]:
        # The rest of a body that never came cannot be told from the next request.
        return {"Connection": "close"}


class NotFound(DeterministicError):
    """The job, file or link does not exist (or has expired)."""

    kind = ErrorType.NOT_FOUND
    http_status = 404


class NoDiagnosis(NotFound):
    """The caller's job exists, but none of its attempts kept a diagnosis (it has not
    failed on a page, and did not ask for one with `options.diagnostics`)."""

    kind = ErrorType.NO_DIAGNOSIS


class Unauthorized(DeterministicError):
    """No API key, or one the gateway does not know or that was revoked."""

    kind = ErrorType.UNAUTHORIZED
    http_status = 401

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="pressroom"'}


class Forbidden(DeterministicError):
    """The API key is valid but lacks the scope this request needs."""

    kind = ErrorType.FORBIDDEN
    http_status = 403


class IdempotencyConflict(DeterministicError):
    """An `Idempotency-Key` already used for a request with another body."""

    kind = ErrorType.IDEMPOTENCY_CONFLICT
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

    kind = ErrorType.RATE_LIMITED


class TooManyStreams(TooManyRequests):
    """The tenant has `PRESSROOM_MAX_STREAMS` live-update streams open in this gateway."""

    kind = ErrorType.TOO_MANY_STREAMS


class QuotaExceeded(TooManyRequests):
    """The tenant's monthly quota has no room left: successful documents of the month
    and documents held by its accepted, unfinished work fill it."""

    kind = ErrorType.QUOTA_EXCEEDED


class CompileLimited(TooManyRequests):
    """The tenant has its most template compiles in flight on this gateway, or compiles
    faster than its template rate (`PRESSROOM_TEMPLATE_*`)."""

    kind = ErrorType.COMPILE_LIMITED


class Conflict(DeterministicError):
    """The request does not fit the job's current state (HTTP 409)."""

    kind = ErrorType.CONFLICT
    http_status = 409


class RangeNotSatisfiable(DeterministicError):
    """A download's `Range` starts at or past the end of the file; `size` is the file's
    length, which the answer states (`Content-Range: bytes */<size>`)."""

    kind = ErrorType.RANGE_NOT_SATISFIABLE
    http_status = 416

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message, field="Range")
        self.size = size

    def headers(self) -> dict[str, str]:
        return {"Content-Range": f"bytes */{self.size}"}


class TemplateError(DeterministicError):
    """The template has a syntax error or uses an undefined variable."""

    kind = ErrorType.TEMPLATE


class LimitExceeded(DeterministicError):
    """The document is over one of the renderer's limits on what a document may be; the
    message names the limit and the `PRESSROOM_*` setting that raises it. Checked before
    or while printing, so a document that can never fit fails once, early."""

    kind = ErrorType.LIMIT_EXCEEDED


class OutputTooLarge(LimitExceeded):
    """The rendered PDF is larger than `PRESSROOM_MAX_OUTPUT_BYTES` (or a PNG or a
    receipt is over the sizes a file may have)."""

    kind = ErrorType.OUTPUT_TOO_LARGE


class TooManyPrintedPages(OutputTooLarge):
    """A rendered PDF has more pages than `PRESSROOM_MAX_PAGES`: found while printing,
    after at most one page more than the limit (the same error type as a PDF-tool job's
    inputs over their page limit, `TooManyPages`)."""

    kind = ErrorType.TOO_MANY_PAGES


class DomTooLarge(LimitExceeded):
    """The loaded document has more nodes than `PRESSROOM_MAX_DOM_NODES`."""

    kind = ErrorType.DOM_TOO_LARGE


class HeaderTooLarge(LimitExceeded):
    """A header or footer template is over `PRESSROOM_MAX_HEADER_BYTES`."""

    kind = ErrorType.HEADER_TOO_LARGE


class TocTooLarge(LimitExceeded):
    """A table of contents would have more entries than `PRESSROOM_MAX_TOC_ENTRIES`."""

    kind = ErrorType.TOC_TOO_LARGE


class InvalidEvent(DeterministicError):
    """A message on the log is not a valid event of this schema."""

    kind = ErrorType.INVALID_EVENT


class WaitTimeout(DeterministicError):
    """`options.wait_for`'s selector never matched, or its expression never became truthy.

    The template or page decides what appears, so the same job would wait in vain again.
    """

    kind = ErrorType.WAIT_TIMEOUT


class SourceError(DeterministicError):
    """A `url` source answered with a 4xx status, or was refused or is not a page."""

    kind = ErrorType.SOURCE


class AssetMissing(DeterministicError):
    """The page asks for a file by a relative name (`<img src="logo.png">`) that is not
    among the job's files, or a job names a stored asset (`assets`) the tenant does not
    have; the message names the file."""

    kind = ErrorType.ASSET_MISSING
    http_status = 400


class FinishingError(DeterministicError):
    """A finishing step (`services/renderer/finishing/`) refused its input (an invoice XML
    that is not well-formed, a PDF it cannot read) or went over the finishing worker's
    memory or time limit: the same job would fail the same way."""

    kind = ErrorType.FINISHING


class SigningNotConfigured(FinishingError):
    """A job asks for `sign` of a renderer that has no signing certificate and key
    (`PRESSROOM_SIGNING_CERT`, `PRESSROOM_SIGNING_KEY`): every attempt would fail alike."""

    kind = ErrorType.SIGNING_NOT_CONFIGURED


class PdfInvalid(FinishingError):
    """An input PDF cannot be read even after qpdf's repair (garbage, a file cut short
    before any page, a page tree that loops), or a stream it needs is a decompression
    bomb over the decoding limit."""

    kind = ErrorType.PDF_INVALID
    http_status = 422


class PdfEncrypted(FinishingError):
    """An input PDF is encrypted and the job gave no password, or a wrong one."""

    kind = ErrorType.PDF_ENCRYPTED
    http_status = 422


class PdfActiveContent(FinishingError):
    """An input PDF carries JavaScript or a launch action (an /OpenAction, /AA, a named
    script): PDF tools never pass scripts on to the documents they write."""

    kind = ErrorType.PDF_ACTIVE_CONTENT
    http_status = 422


class TooManyPages(FinishingError):
    """A document has more pages than allowed: a PDF-tool job's inputs
    (`PRESSROOM_PDF_MAX_PAGES`), or a rendered PDF (`PRESSROOM_MAX_PAGES`,
    `TooManyPrintedPages`)."""

    kind = ErrorType.TOO_MANY_PAGES
    http_status = 413


class PdfaNotPossible(FinishingError):
    """An input cannot be made PDF/A at the asked level; the message names why (a font
    not embedded, transparency in PDF/A-1, embedded files in PDF/A-1 or 2, encryption)."""

    kind = ErrorType.PDFA_NOT_POSSIBLE
    http_status = 422


class PdfUaNotPossible(FinishingError):
    """PDF/UA identification asked of an input that is not tagged (no structure tree),
    or that has no title or language to declare: the message names what is missing."""

    kind = ErrorType.PDFUA_NOT_POSSIBLE
    http_status = 422


class InvoiceInvalid(FinishingError):
    """A Factur-X XML fails the Factur-X XSD of its profile, or its profile (the XML's
    GuidelineSpecifiedDocumentContextParameter) is not the one declared."""

    kind = ErrorType.FACTURX_INVALID
    http_status = 422


class PageKeepsCrashing(DeterministicError):
    """The page crashed its tab on two attempts in a row (out of memory, a renderer fault):
    a third try would crash again."""

    kind = ErrorType.PAGE_CRASHED


class PrintKeepsTimingOut(DeterministicError):
    """Printing ran out of the render time limit on two attempts in a row, its page
    loaded and its waits over both times: the document is too long or too complex to
    print in time, and a third try would run out again. The same error type as any
    timeout (`timeout`), failed instead of retried."""

    kind = ErrorType.TIMEOUT


class TransientError(PressroomError):
    """A dependency failed; the same work may succeed later: a 503 whose `Retry-After`
    says when to ask again."""

    kind = ErrorType.TRANSIENT
    http_status = 503
    retry_after = 5
    """Seconds a client should wait before it asks again: long enough for a restarted
    PostgreSQL or a reconnected NATS, short enough that a client is not held up."""

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class Unavailable(TransientError):
    """NATS or PostgreSQL cannot be reached right now."""

    kind = ErrorType.UNAVAILABLE


class LogFull(Unavailable):
    """The JOBS log is near `PRESSROOM_STREAM_MAX_BYTES`: new jobs wait until it drains.

    Its last part is kept for the events of jobs already accepted, which are never
    dropped to make room (the stream discards new messages, not old ones).
    """

    kind = ErrorType.LOG_FULL
    retry_after = 30


class RetryLater(Unavailable):
    """The request cannot be decided now (PostgreSQL cannot say whether a tenant's quota
    has room, every template worker is busy and the queue is full); `retry_after` says
    when to try again, and the message names the cause."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SecretUnreadable(Unavailable):
    """A sealed secret does not open with the server keyring (`PRESSROOM_SERVER_KEY`
    lacks the key that sealed it: a wrong key, or a retired one dropped too early).

    Its webhook waits and is retried, never signed with another secret: a receiver would
    reject that signature while the attempt was recorded as delivered. The message names
    the missing key's id, so the operator knows which key to give back.
    """

    kind = ErrorType.SECRET_UNREADABLE


class Refused(Unavailable):
    """PostgreSQL refused a statement's data (an invalid value, a broken constraint, a
    value over a limit), not the connection.

    An `Unavailable` to every caller (a 503, a retry later: a fix on the server's side may
    let it through) but the projector, which skips the event rather than stall the whole
    projection on it.
    """

    kind = ErrorType.REFUSED


class StorageError(TransientError):
    """Object storage refused or failed an operation."""

    kind = ErrorType.STORAGE


class BrowserError(TransientError):
    """Chromium crashed, disconnected or the page failed."""

    kind = ErrorType.BROWSER


class PageCrashed(BrowserError):
    """The page crashed its tab (out of memory, or a renderer fault). Retried once: a page
    that crashes its tab on two attempts in a row fails the job (`PageKeepsCrashing`)."""

    kind = ErrorType.PAGE_CRASHED


class RenderTimeout(TransientError):
    """The render exceeded `PRESSROOM_RENDER_TIMEOUT`."""

    kind = ErrorType.TIMEOUT


class PrintTimeout(RenderTimeout):
    """The render ran out of time while Chromium printed the loaded page. Retried once: a
    second one in a row fails the job (`PrintKeepsTimingOut`). Its message starts with
    `PREFIX`, which is how the next attempt knows from the log what this one ran into."""

    PREFIX = "printing did not end within the render time limit"


class TimestampUnavailable(TransientError):
    """The timestamp server (`PRESSROOM_SIGNING_TSA_URL`) could not be reached or gave no
    timestamp: a signature without its timestamp is not stored, the job is retried."""

    kind = ErrorType.TIMESTAMP_UNAVAILABLE


class SourceUnreachable(TransientError):
    """A `url` source could not be loaded (DNS, connection) or answered 5xx, 408 or 429."""

    kind = ErrorType.SOURCE_UNREACHABLE


def _restore(cls: type[PressroomError], message: str, state: dict[str, Any]) -> PressroomError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error
