"""A webhook that carries the document itself, as Gotenberg's webhook mode sends it:
the file to `JobSubmitted.webhook_url` on success, a JSON `{"status", "message"}` to
`error_url` on failure, each with its own method and the client's extra headers.

Set by the Gotenberg-compatible routes (`Gotenberg-Webhook-*` headers); sent by the
notifier with the same retries, log of attempts, redelivery, signing headers and address
policy as every webhook (`notifier/filehooks.py`).
"""

from __future__ import annotations

import msgspec

from services.core.model import outputs
from services.core.model.errortypes import ErrorType

METHODS = ("POST", "PUT", "PATCH")
"""The methods Gotenberg sends a webhook with."""


class FileWebhook(msgspec.Struct, frozen=True, omit_defaults=True):
    error_url: str
    """Where a failure is told (`{"status": <HTTP status>, "message": ...}`)."""
    method: str = "POST"
    error_method: str = "POST"
    sealed_headers: str | None = None
    """Extra headers sent with both, as a JSON object sealed with the server key for the
    job (they often hold the receiver's credentials)."""
    filename: str | None = None
    """The file's name in `Content-Disposition` (`Gotenberg-Output-Filename`)."""
    trace: str | None = None
    """Sent back as `Gotenberg-Trace`."""


FAILED_STATUS = {
    ErrorType.WAIT_TIMEOUT: 503,
    ErrorType.TIMEOUT: 503,
    ErrorType.TRANSIENT: 503,
    ErrorType.UNAVAILABLE: 503,
    ErrorType.BROWSER: 503,
    ErrorType.PAGE_CRASHED: 503,
    ErrorType.STALLED: 503,
    ErrorType.WORKER_LOST: 503,
    ErrorType.STORAGE: 503,
    ErrorType.SOURCE_UNREACHABLE: 409,
    ErrorType.SOURCE: 409,
    ErrorType.REFUSED: 403,
    ErrorType.INTERNAL: 500,
    ErrorType.SIGNING_NOT_CONFIGURED: 500,
    ErrorType.SECRET_UNREADABLE: 500,
}
"""The HTTP status Gotenberg gives the like of each failure (`503` for time running out,
`409` for a page that failed to load); any other failure is the document's fault: `400`."""


def failure_status(error_type: str) -> int:
    """The status a failed job of `error_type` is told with (its answer, its error webhook)."""
    try:
        return FAILED_STATUS.get(ErrorType(error_type), 400)
    except ValueError:
        return 500


FILE_TYPES = {
    **{outputs.EXTENSIONS[kind]: outputs.CONTENT_TYPES[kind] for kind in outputs.Output},
    "zip": "application/zip",
}
"""The content type of a job's document by its key's extension: a print or a screenshot
(`outputs`), or the ZIP of a PDF-tools job with several outputs."""


def content_type(object_key: str) -> str:
    return FILE_TYPES.get(object_key.rsplit(".", 1)[-1].lower(), "application/octet-stream")
