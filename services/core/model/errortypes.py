"""The stable `error.type` names clients branch on: one enum, and what the few that no
exception carries mean. The exceptions that carry the rest are `errors`'.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorType(StrEnum):
    """The stable, machine-readable `error.type` of every error answer and of every failed
    job, item or batch: what a client branches on (the message is for people).

    Most are the `kind` of one class below; the last few are set where no exception is
    raised (`OTHER_TYPES` says what each means). A `StrEnum`: each member is its value
    wherever a string goes (JSON, the log, SQL).
    """

    INTERNAL = "internal"
    DETERMINISTIC = "deterministic"
    VALIDATION = "validation"
    TOO_LARGE = "too_large"
    REQUEST_TIMEOUT = "request_timeout"
    NOT_FOUND = "not_found"
    NO_DIAGNOSIS = "no_diagnosis"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_STREAMS = "too_many_streams"
    QUOTA_EXCEEDED = "quota_exceeded"
    COMPILE_LIMITED = "compile_limited"
    CONFLICT = "conflict"
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable"
    TEMPLATE = "template"
    LIMIT_EXCEEDED = "limit_exceeded"
    OUTPUT_TOO_LARGE = "output_too_large"
    DOM_TOO_LARGE = "dom_too_large"
    HEADER_TOO_LARGE = "header_too_large"
    TOC_TOO_LARGE = "toc_too_large"
    INVALID_EVENT = "invalid_event"
    WAIT_TIMEOUT = "wait_timeout"
    SOURCE = "source"
    FINISHING = "finishing"
    SIGNING_NOT_CONFIGURED = "signing_not_configured"
    PAGE_CRASHED = "page_crashed"
    TRANSIENT = "transient"
    UNAVAILABLE = "unavailable"
    LOG_FULL = "log_full"
    SECRET_UNREADABLE = "secret_unreadable"
    REFUSED = "refused"
    STORAGE = "storage"
    BROWSER = "browser"
    TIMEOUT = "timeout"
    TIMESTAMP_UNAVAILABLE = "timestamp_unavailable"
    SOURCE_UNREACHABLE = "source_unreachable"
    PDF_INVALID = "pdf_invalid"
    PDF_ENCRYPTED = "pdf_encrypted"
    PDF_ACTIVE_CONTENT = "pdf_active_content"
    TOO_MANY_PAGES = "too_many_pages"
    PDFA_NOT_POSSIBLE = "pdfa_not_possible"
    PDFUA_NOT_POSSIBLE = "pdfua_not_possible"
    FACTURX_INVALID = "facturx_invalid"
    HTTP = "http"
    WORKER_LOST = "worker_lost"
    STALLED = "stalled"
    NO_DOCUMENTS = "no_documents"
    DOCUMENT_MISSING = "document_missing"
    CANCELLED = "cancelled"
    ASSET_MISSING = "asset_missing"


OTHER_TYPES = {
    ErrorType.INTERNAL: "A fault of Pressroom's own (HTTP 500); the service's log has the details",
    ErrorType.HTTP: "No such route, or a method the route does not take (404, 405 with `Allow`)",
    ErrorType.WORKER_LOST: "Every delivery of the job crashed or lost its worker; the "
    "projector gave up on it",
    ErrorType.STALLED: "The log stopped driving an unfinished job and re-driving it did not "
    "help; the reconciler failed it",
    ErrorType.NO_DOCUMENTS: "Every item of the batch failed or was cancelled: there is no "
    "archive to make",
    ErrorType.DOCUMENT_MISSING: "An item's document was deleted before the batch's archive "
    "was packed",
    ErrorType.CANCELLED: "The job or batch was cancelled on request before it ended",
}
"""What each type that is no exception's `kind` means (and `internal`, the base class's)."""


def known_type(value: str | None) -> ErrorType | None:
    """A stored error type as answers show it: its member, `internal` for a value no
    member has (answers promise one of `ErrorType`), None for none."""
    if value is None:
        return None
    try:
        return ErrorType(value)
    except ValueError:
        return ErrorType.INTERNAL
