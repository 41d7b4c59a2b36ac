"""A render's diagnosis: what the page did on one attempt, stored beside the job's file.

The renderer writes one per failed attempt (and per attempt of a job asking for it with
`options.diagnostics`): a JSON document (`Diagnosis`) and, when the page could be
captured, a PNG of it. Both keys derive from the tenant, the job and the attempt
(`diagnosis_key`), so a re-render overwrites them; `DELETE /jobs/{id}` removes them with
the job's file. The gateway reads them for `GET /jobs/{id}/diagnostics`, where the
screenshot's key becomes a signed URL.

Decoders tolerate unknown fields (a newer renderer's diagnosis still reads).
"""

from __future__ import annotations

import msgspec

from services.core.objectstore.storage import Storage

MAX_CONSOLE = 200
"""Console lines kept per attempt; later ones are counted in `dropped`."""
MAX_ERRORS = 50
"""Uncaught errors kept per attempt."""
MAX_REQUESTS = 300
"""Requests kept per attempt."""
TEXT_CHARS = 2000
"""Characters kept of a console line or an error (a page may log megabytes)."""


def clipped(text: str, limit: int = TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class ConsoleLine(msgspec.Struct, kw_only=True):
    """A console message: its level (`log`, `info`, `warning`, `error`, `debug`, …), its
    text and where in the page's source it was written, when Chromium says."""

    level: str
    """`log`, `info`, `warning`, `error`, `debug`, ..."""
    text: str
    """The message, cut to 2,000 characters."""
    url: str | None = None
    """The script that wrote it, when Chromium says."""
    line: int | None = None
    """Its line in that script, from 1."""
    column: int | None = None
    """Its column in that line, from 1."""


class PageError(msgspec.Struct, kw_only=True):
    """An uncaught error (or unhandled rejection) of the page's scripts."""

    text: str
    """The error's message, cut to 2,000 characters."""
    url: str | None = None
    """The script it was thrown in, when Chromium says."""
    line: int | None = None
    """Its line in that script, from 1."""
    column: int | None = None
    """Its column in that line, from 1."""


class RequestLine(msgspec.Struct, kw_only=True):
    """A request the page made: `status` once answered, `ms` from start to end,
    `error` Chromium's failure (`net::ERR_…`), and `refused` the egress policy's reason
    when the CDP filter or the egress proxy refused it (as the job's `refused` says)."""

    url: str
    """The URL the page asked for."""
    method: str = "GET"
    """The HTTP method."""
    type: str | None = None
    """Chromium's resource type (`Document`, `Stylesheet`, `Image`, `Font`, ...)."""
    status: int | None = None
    """The answer's HTTP status; null if none came."""
    ms: int | None = None
    """Milliseconds from the request to its end."""
    error: str | None = None
    """Chromium's failure (`net::ERR_...`), if it failed."""
    refused: str | None = None
    """Why the egress policy refused it (a private address, a scheme), if it did."""


class WaitPending(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The `wait_for` condition that had not come true when the attempt ended."""

    selector: str | None = None
    """The selector that never matched."""
    expression: str | None = None
    """The expression that never became truthy."""
    network_idle: bool = False
    """Whether the page was still waiting for the network to go quiet."""
    timeout: float | None = None
    """The wait's timeout, in seconds."""


class AttemptFailure(msgspec.Struct, kw_only=True):
    """The attempt's error, as the job's `error` shows it."""

    type: str
    """The error's type, as the job's `error.type`."""
    message: str
    """The root-cause message."""


class Diagnosis(msgspec.Struct, kw_only=True):
    """One attempt's diagnosis as stored; `screenshot` is the PNG's storage key."""

    attempt: int
    at: str
    error: AttemptFailure | None = None
    console: list[ConsoleLine] = msgspec.field(default_factory=list)
    errors: list[PageError] = msgspec.field(default_factory=list)
    requests: list[RequestLine] = msgspec.field(default_factory=list)
    pending_wait_for: WaitPending | None = None
    screenshot: str | None = None
    dropped: int = 0


def diagnosis_key(tenant: str, job_id: str, attempt: int, extension: str = "json") -> str:
    """Where an attempt's diagnosis (`json`) or screenshot (`png`) is stored: beside the
    job's file, under its tenant, so a re-render of the attempt overwrites it."""
    return f"jobs/{tenant}/{job_id}.diagnosis-{attempt}.{extension}"


encode = msgspec.json.Encoder().encode
decode = msgspec.json.Decoder(Diagnosis).decode


async def forget(storage: Storage, tenant: str, job_id: str, attempts: int) -> None:
    """Remove the diagnoses of `job_id`'s attempts 1 to `attempts`, with their PNGs
    (those it has: removing a missing object is no error)."""
    for attempt in range(1, attempts + 1):
        for extension in ("json", "png"):
            await storage.delete(diagnosis_key(tenant, job_id, attempt, extension))
