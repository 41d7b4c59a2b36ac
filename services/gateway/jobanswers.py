"""What the job and batch routes answer (`jobs.py`, `joblist.py`, `batches.py`,
`diagnostics.py`): a job's status, a batch's progress and items, their timelines,
webhook attempts and diagnoses, and why they failed.

Apart from `answers.py`, whose conventions these follow (an `Answer` each, `UNSET` for a
field some answers leave out, each field described by the string under it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from services.core.model.errortypes import ErrorType
from services.core.model.status import BatchStatus, JobStatus
from services.core.objectstore import diagnosis
from services.gateway.answers import UNSET, Answer, Count, Timestamp, Unset

TimelineEntry = Annotated[
    dict[str, Any],
    msgspec.Meta(
        title="TimelineEntry",
        description="One event of the log: its stream sequence `seq`, its `type`, when the "
        "log stored it (`at`), and the event's own fields (never a secret or the input).",
        extra_json_schema={
            "required": ["seq", "type", "at"],
            "properties": {
                "seq": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The event's stream sequence: unique, increasing.",
                },
                "type": {
                    "type": "string",
                    "description": "The event's name: `submitted`, `started`, `retrying`, "
                    "`done`, `failed`, `cancelled`, ... (a batch's: `batch_submitted`, ...).",
                },
                "at": {
                    "type": "string",
                    "format": "date-time",
                    "description": "When the log stored the event.",
                },
            },
        },
    ),
]


class Failure(Answer, kw_only=True):
    """Why a job, an item or a batch failed: the error's type and root-cause message."""

    type: ErrorType | None
    """What kind of error: `template`, `wait_timeout`, `source`, `timeout`, ... (see `ErrorType`).
    """
    message: str
    """The root cause, as the template engine, Chromium or the source said it."""


# Jobs --------------------------------------------------------------------------------


class JobAccepted(Answer, kw_only=True):
    """`POST /jobs`: the job is durable in the log; poll `url` for its status."""

    id: str
    """The job's id."""
    status: JobStatus
    """Always `queued` at first."""
    url: str
    """Where to poll the job's status (`GET /jobs/{id}`)."""


class Job(Answer, kw_only=True):
    """A job's status. A job only the log knows yet (the projection has not caught up)
    has only `id`, `status` (`queued`) and `attempts`."""

    id: str
    """The job's id: 32 hex digits, or `<batch id>.<index>` for a batch's item."""
    status: JobStatus
    """Where the job is; `done`, `failed` and `cancelled` never change again."""
    attempts: Count
    """Render attempts started so far (a retried job has more than one)."""
    error: Failure | Unset | None = UNSET
    """Why the job failed: its type and root-cause message; null unless `failed`."""
    url: str | Unset | None = UNSET
    """A signed link to the document, valid for `PRESSROOM_URL_TTL` seconds (ask again for a fresh
    one); null unless `done`."""
    pages: int | Unset | None = UNSET
    """The document's pages; null until `done`."""
    bytes: int | Unset | None = UNSET
    """The document's size in bytes; null until `done`."""
    render_ms: int | Unset | None = UNSET
    """Milliseconds the successful attempt took to render; null until `done`."""
    webhook_url: str | Unset | None = UNSET
    """Where the job's webhook goes; null without one."""
    created_at: Timestamp | Unset | None = UNSET
    """When the job was accepted (an ISO 8601 timestamp with its offset)."""
    started_at: Timestamp | Unset | None = UNSET
    """When its first attempt started; null while queued."""
    finished_at: Timestamp | Unset | None = UNSET
    """When it ended; null until it has."""


class JobPage(Answer, kw_only=True):
    """`GET /jobs`: a page of the tenant's jobs, newest first; `next_offset` is null on the
    last page."""

    jobs: list[Job]
    """The jobs, newest first."""
    limit: int
    """How many were asked for at most."""
    offset: int
    """How many were skipped."""
    next_offset: int | None
    """The `offset` of the next page; null on the last page."""


class JobRemoved(Answer, kw_only=True):
    """`DELETE /jobs/{id}`: the job's status after the cancel (or its end, if it ended
    first); a finished job's file is deleted, so `url` is always null."""

    id: str
    """The job's id."""
    status: JobStatus
    """The job's status after the request: `cancelled`, or how it ended if it ended first."""
    url: None = None
    """Always null: a finished job's file is deleted."""


class Timeline(Answer, kw_only=True):
    """`GET /jobs/{id}/events`, `GET /batches/{id}/events`: the timeline, oldest first."""

    id: str
    """The job's or batch's id."""
    events: list[TimelineEntry]
    """The events, oldest first."""


class WebhookAttempt(Answer, kw_only=True):
    """One recorded attempt to deliver a webhook (a batch's also names its `event`)."""

    webhook_id: str
    """The `webhook-id` header sent: the same on every attempt of one event."""
    event: str | Unset = UNSET
    """A batch's webhook event (`batch.done`, `batch.progress`, ...); left out for a job's."""
    attempt: int
    """The attempt's number, from 1."""
    url: str
    """Where it was sent."""
    outcome: str
    """`delivered`, `retrying` (another attempt follows) or `gave_up`."""
    status_code: int | None
    """The receiver's HTTP status; null if none came."""
    error: str | None
    """Why it failed without an answer (a timeout, a refused address); null otherwise."""
    latency_ms: int
    """Milliseconds until the answer or the failure."""
    at: Timestamp | None
    """When the attempt was made."""


class WebhookAttempts(Answer, kw_only=True):
    """`GET /jobs/{id}/webhooks`, `GET /batches/{id}/webhooks`: every attempt, oldest
    first."""

    id: str
    """The job's or batch's id."""
    attempts: list[WebhookAttempt]
    """Every attempt, oldest first."""


class Redelivery(Answer, kw_only=True):
    """`POST /jobs/{id}/webhooks/redeliver`: the redelivery is on the log."""

    id: str
    """The job's id."""
    redelivery: Literal["queued"] = "queued"
    """Always `queued`: the redelivery is on the log."""


class DiagnosisAttempt(Answer, kw_only=True):
    """One attempt's diagnosis: when it ended and with which `error` (null for a
    successful attempt that asked for one), the page's `console` lines and uncaught
    `errors` (text, level, source location), every request (URL, status, `ms`, Chromium's
    `error`, the egress policy's `refused` reason), the `wait_for` condition still
    `pending_wait_for`, and a signed `screenshot` URL of the page (PNG; null if the page
    could not be captured). `dropped` counts what went over the caps."""

    attempt: int
    """The attempt's number, from 1."""
    at: Timestamp
    """When the attempt ended."""
    error: diagnosis.AttemptFailure | None
    """How the attempt failed; null for a successful one that asked for a diagnosis."""
    console: list[diagnosis.ConsoleLine]
    """The page's console messages, at most 200."""
    errors: list[diagnosis.PageError]
    """The page's uncaught errors, at most 50."""
    requests: list[diagnosis.RequestLine]
    """Every request the page made, at most 300."""
    pending_wait_for: diagnosis.WaitPending | None
    """The `wait_for` condition that had not come true; null if none."""
    screenshot: str | None
    """A signed link to a PNG of the page when the attempt ended; null if it could not be captured.
    """
    dropped: Count
    """Console lines, errors and requests left out over those caps."""


class Diagnostics(Answer, kw_only=True):
    """`GET /jobs/{id}/diagnostics`: the diagnosis of each attempt that kept one, oldest
    first."""

    id: str
    """The job's id."""
    attempts: list[DiagnosisAttempt]
    """One entry per attempt that kept a diagnosis, oldest first."""


# Batches -----------------------------------------------------------------------------


class BatchAccepted(Answer, kw_only=True):
    """`POST /batches`: the item list is stored and the batch is durable in the log."""

    id: str
    """The batch's id: `b` and 31 hex digits."""
    status: BatchStatus
    """Always `queued` at first."""
    total: int
    """How many items it holds."""
    url: str
    """Where to follow its progress (`GET /batches/{id}`)."""


class Batch(Answer, kw_only=True):
    """A batch's progress: counts, `progress` from 0 to 1, `rate` (items ended per second)
    and `eta` while it runs, the archive's signed `url` once it has ended."""

    id: str
    """The batch's id."""
    status: BatchStatus
    """Where the batch is; `done`, `failed` and `cancelled` never change again."""
    total: Count
    """How many items it holds."""
    done: Count
    """Items rendered."""
    failed: Count
    """Items that failed."""
    cancelled: Count
    """Items cancelled (a batch cancelled part way)."""
    progress: Annotated[float, msgspec.Meta(ge=0, le=1)]
    """The share of items that have ended, from 0 to 1."""
    rate: float | None
    """Items ended per second since the batch started; null unless it is running."""
    eta: Timestamp | None
    """When every item should have ended at that rate; null when unknown."""
    output: Literal["zip", "merged"]
    """One ZIP of the items' files, or one merged PDF."""
    error: Failure | None
    """Why the batch failed; null unless `failed`."""
    url: str | None
    """A signed link to the archive, valid for `PRESSROOM_URL_TTL` seconds; null until it is packed.
    """
    bytes: int | None
    """The archive's size in bytes; null until it is packed."""
    webhook_url: str | None
    """Where the batch's webhooks go; null without one."""
    created_at: Timestamp | None
    """When the batch was accepted (an ISO 8601 timestamp with its offset)."""
    started_at: Timestamp | None
    """When its first item was released; null while queued."""
    finished_at: Timestamp | None
    """When it ended; null until it has."""


class BatchPage(Answer, kw_only=True):
    """`GET /batches`: a page of the tenant's batches, newest first."""

    batches: list[Batch]
    """The batches, newest first."""
    limit: int
    """How many were asked for at most."""
    offset: int
    """How many were skipped."""
    next_offset: int | None
    """The `offset` of the next page; null on the last page."""


class BatchItem(Answer, kw_only=True):
    """One item's outcome, by its index in the request."""

    index: Count
    """The item's place in the request, from 0."""
    filename: str | None  # None while the item is not expanded yet
    """Its file name in the archive; null while the batch is not expanded yet."""
    job_id: str
    """The item's job (`GET /jobs/{id}` shows it)."""
    status: JobStatus
    """Where the item is."""
    attempts: Count
    """Render attempts started so far."""
    error: Failure | None
    """Why the item failed; null unless `failed`."""


class ItemPage(Answer, kw_only=True):
    """`GET /batches/{id}/items`: a page of the batch's items, by index."""

    items: list[BatchItem]
    """The items, by index."""
    limit: int
    """How many were asked for at most."""
    offset: int
    """How many were skipped."""
    next_offset: int | None
    """The `offset` of the next page; null on the last page."""


class BatchControl(Answer, kw_only=True):
    """`POST /batches/{id}/pause|resume|cancel`: the batch's status as the request leaves
    it; a cancel also says `cancelling`."""

    id: str
    """The batch's id."""
    status: BatchStatus
    """The batch's status after the request."""
    cancelling: bool | Unset = UNSET
    """Only on a cancel: whether the batch is cancelling (false if it had already ended)."""
