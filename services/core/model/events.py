"""Every message on the log: msgspec Structs tagged by `type`, with a schema version `v`.

Decoders ignore unknown fields, so an old consumer survives a newer producer. Subjects,
the stream's name and the keys derived from ids live in `subjects`.

Size: one Struct per message type, with the encoding and decoding every service shares. The
batch events and their helpers (`encode_batch`, `batch_subject_of`, `batch_msg_id`) are the
part that would split out next.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, TypeVar

import msgspec

from services.core.model.files import FileRef
from services.core.model.hooks import FileWebhook
from services.core.model.pageoptions import PageOptions
from services.core.model.pdfwork import PdfWork
from services.core.model.subjects import (
    DEFAULT_TENANT,
    batch_of,
    batch_subject,
    job_of,
    kind_of,
    lane_token,
    quiet_ends,
    subject,
    submitted_subject,
)

T = TypeVar("T", bound="LogEvent")


def now() -> float:
    """Event timestamps are Unix seconds."""
    return time.time()


class ErrorInfo(msgspec.Struct, omit_defaults=True):
    """A failure as the user sees it: a stable `type` and the root-cause `message`."""

    type: str
    message: str


class Event(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Base of every event: the job it concerns, its tenant, when, and the schema version."""

    job_id: str
    tenant: str = DEFAULT_TENANT
    at: float = msgspec.field(default_factory=now)
    v: int = 1

    def public_view(self) -> dict[str, Any]:
        """The event as a job's timeline holds it: the projector's `job_events` row and
        the gateway's `GET /jobs/{id}/events`."""
        view: dict[str, Any] = msgspec.to_builtins(self)
        return view


class JobSubmitted(Event, tag="submitted"):
    """A client's job, accepted by the gateway; everything needed to render it.

    The source is exactly one of: `template` (Jinja2, with `data`), `html` (used as is),
    `markdown` (optionally wrapped in `template`) or `url` (loaded by the browser). A
    stored template is resolved by the gateway into `template`, and
    `template_id`/`template_version` record which one it was. A PDF-tools job has
    `pdf` instead (`core/model/pdfwork.py`): PDFs in, steps run on them.
    """

    template: str = ""
    html: str | None = None
    url: str | None = None
    # A Markdown source: made into HTML by the renderer (`core/sandbox/markdown`), wrapped in
    # `template` when one is set, styled by `stylesheet`.
    markdown: str | None = None
    stylesheet: str | None = None
    template_id: str | None = None
    template_version: int | None = None
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    options: PageOptions = msgspec.field(default_factory=PageOptions)
    webhook_url: str | None = None
    # Signs this job's webhooks instead of the tenant's secrets; encrypted with the server
    # key (`core/secrets/crypto.seal`), never in plain text on the log.
    webhook_secret: str | None = None
    idempotency_key: str | None = None
    # An item of a batch: its batch, position and file name in the archive. An item's
    # `template` is empty: the renderer reads the batch's (`BatchSubmitted.template`) once.
    batch_id: str | None = None
    index: int | None = None
    filename: str | None = None
    # Files the page may refer to by relative name (assets, multipart parts, a stored
    # template's bundle), stored under the tenant by digest (`core/model/files`); never bytes.
    files: list[FileRef] = msgspec.field(default_factory=list)
    # With `webhook_url`: the webhook carries the file itself (Gotenberg's webhook mode).
    file_webhook: FileWebhook | None = None
    # A PDF-tools job: its inputs and steps, instead of a template, html or url.
    pdf: PdfWork | None = None
    # A preview (`"preview": true`): what it previews and through which key. Not billed,
    # not listed; a newer preview with the same value cancels it (`gateway/previews.py`).
    preview: str | None = None
    # Cookies and extra headers for the page (`core/log/pagesecrets`), sealed with the server
    # key for the job, never in plain text on the log.
    page_secrets: str | None = None

    INPUTS: ClassVar[tuple[str, ...]] = ("template", "html", "markdown", "stylesheet", "data")
    """What the document is made from: large, and kept once, on the job's row."""
    SECRETS: ClassVar[tuple[str, ...]] = ("webhook_secret", "page_secrets")
    """Never shown, not even sealed."""

    def public_view(self) -> dict[str, Any]:
        """The submission without its `INPUTS` and `SECRETS`, its passwords `(hidden)`:
        a timeline says what happened, and a stored template stays identified by `template_id` and
        `template_version`."""
        view = super().public_view()
        for name in (*self.INPUTS, *self.SECRETS):
            view.pop(name, None)
        if self.pdf is not None:
            view["pdf"] = self.pdf.public_view()
        encrypt = view.get("options", {}).get("encrypt") or {}
        for name in ("owner_password", "user_password"):
            if encrypt.get(name):
                encrypt[name] = "(hidden)"  # as a PDF-tools job's passwords
        return view


class JobStarted(Event, tag="started"):
    """A renderer began attempt number `attempt`."""

    attempt: int
    worker: str


class JobRetrying(Event, tag="retrying"):
    """Attempt `attempt` failed transiently; the next one comes after `delay` seconds."""

    attempt: int
    worker: str
    error: ErrorInfo
    delay: float


class JobDone(Event, tag="done"):
    """The document is stored under `object_key`."""

    attempt: int
    object_key: str
    bytes: int
    pages: int
    render_ms: int
    webhook_url: str | None = None
    # Page requests the egress policy refused; the document was made without them.
    refused: list[dict[str, str]] = msgspec.field(default_factory=list)


class JobFailed(Event, tag="failed"):
    """The job ended without a document; `error` says why."""

    attempt: int
    error: ErrorInfo
    webhook_url: str | None = None


class JobCancelled(Event, tag="cancelled"):
    """The client cancelled the job before it finished; it is never rendered after this."""

    reason: str = "cancelled by request"
    webhook_url: str | None = None


class JobDeleted(Event, tag="deleted"):
    """The stored document of a finished job was deleted on request (the status stays)."""

    object_key: str


class WebhookRedeliver(Event, tag="redeliver"):
    """A client asked for the job's webhook to be sent again (`request` tells requests
    apart, so each one is a new message)."""

    request: str


class WebhookAttempted(Event, tag="webhook"):
    """One webhook delivery attempt and its outcome (`delivered`, `retrying`, `gave_up`)."""

    webhook_id: str
    attempt: int
    url: str
    outcome: str
    status_code: int | None = None
    error: str | None = None
    latency_ms: int = 0


AnyEvent = (
    JobSubmitted
    | JobStarted
    | JobRetrying
    | JobDone
    | JobFailed
    | JobCancelled
    | JobDeleted
    | WebhookRedeliver
    | WebhookAttempted
)
TERMINAL = (JobDone, JobFailed, JobCancelled)
Terminal = JobDone | JobFailed | JobCancelled


class BatchState(msgspec.Struct):
    """A batch's value in the `BATCH_STATE` bucket (key: the batch id): its tenant, for
    the renderers' round robin, and whether its items may start."""

    tenant: str
    state: str  # "running", "paused" or "cancelled"


class BatchItem(msgspec.Struct, omit_defaults=True):
    """One line of a batch's stored item list: what varies per item."""

    data: dict[str, Any] = msgspec.field(default_factory=dict)
    """The item's template variables (a batch with a template or `template_id`)."""
    filename: str | None = None
    """The item's file name in the archive, ending in the output's extension; by default its
    index, zero-padded (`00017.pdf`)."""
    url: str | None = None
    """The page to print (a batch without a template)."""
    markdown: str | None = None
    """The item's Markdown, printed as a styled document, or given as `content` to the batch's
    template (instead of a url)."""


class BatchEvent(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Base of every batch event, on `batches.<batch_id>.<suffix>`."""

    batch_id: str
    tenant: str = DEFAULT_TENANT
    at: float = msgspec.field(default_factory=now)
    v: int = 1

    def public_view(self) -> dict[str, Any]:
        view: dict[str, Any] = msgspec.to_builtins(self)
        return view


class BatchSubmitted(BatchEvent, tag="batch_submitted"):
    """A client's batch, accepted by the gateway: the shared source and options, and where
    its item list is stored (`items_key`, `total` lines), never the items themselves.

    The source is a `template` (a stored one resolved into it, as for jobs) or, when
    `template` is empty, each item's own `url`.
    """

    total: int
    items_key: str
    template: str = ""
    template_id: str | None = None
    template_version: int | None = None
    options: PageOptions = msgspec.field(default_factory=PageOptions)
    output: str = "zip"
    webhook_url: str | None = None
    webhook_secret: str | None = None  # sealed, like a job's
    idempotency_key: str | None = None
    progress_webhooks: bool = False  # also `batch.progress` webhooks while it runs
    # Files every item's page may refer to by name (named assets, the template's bundle),
    # as on a job; the renderer gives them to each item with the template.
    files: list[FileRef] = msgspec.field(default_factory=list)

    SECRETS: ClassVar[tuple[str, ...]] = ("webhook_secret",)

    def public_view(self) -> dict[str, Any]:
        view = super().public_view()
        for name in ("template", *self.SECRETS):
            view.pop(name, None)
        return view


class BatchPaused(BatchEvent, tag="batch_paused"):
    """No item of the batch starts until it is resumed (items rendering finish)."""


class BatchResumed(BatchEvent, tag="batch_resumed"):
    """The batch's items start again where they stopped."""


class BatchCancel(BatchEvent, tag="batch_cancel"):
    """A client cancelled the batch: no item starts again, items not yet ended are
    cancelled, and it ends `cancelled` with the archive of what finished."""

    reason: str = "cancelled by request"


class BatchComplete(BatchEvent, tag="batch_complete"):
    """Every item of the batch has ended (published once, by the projector)."""


class BatchProgress(BatchEvent, tag="batch_progress"):
    """How far a running batch has come (published by the projector, at most every few
    seconds, for a batch that asked for progress webhooks)."""

    total: int
    done: int
    failed: int
    cancelled: int
    webhook_url: str | None = None


class BatchFinished(BatchEvent, kw_only=True):
    """Base of a batch's terminal events: the counts of its items' outcomes."""

    total: int
    done: int
    failed: int
    cancelled: int
    webhook_url: str | None = None


class BatchDone(BatchFinished, tag="batch_done"):
    """The archive (with its manifest) is stored under `object_key`."""

    object_key: str
    bytes: int


class BatchFailed(BatchFinished, tag="batch_failed"):
    """Nothing could be produced: no item made a document."""

    error: ErrorInfo
    object_key: str | None = None  # the archive, which then holds only the manifest


class BatchCancelled(BatchFinished, tag="batch_cancelled"):
    """A cancelled batch's end: the archive of what finished before the cancel."""

    object_key: str | None = None
    bytes: int = 0


AnyBatchEvent = (
    BatchSubmitted
    | BatchPaused
    | BatchResumed
    | BatchCancel
    | BatchComplete
    | BatchProgress
    | BatchDone
    | BatchFailed
    | BatchCancelled
)
BATCH_TERMINAL = (BatchDone, BatchFailed, BatchCancelled)
BatchTerminal = BatchDone | BatchFailed | BatchCancelled
LogEvent = AnyEvent | AnyBatchEvent
"""Anything on the JOBS stream."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)
_log_decoder = msgspec.json.Decoder(LogEvent)


def decode_log(payload: bytes, *, subject: str) -> LogEvent:
    """Decode any message of the JOBS stream, job or batch event, stored on `subject`;
    raises `msgspec.ValidationError` if it is not an event that may stand there
    (`belongs`)."""
    return _checked(_log_decoder.decode(payload), subject)


def _checked(event: T, subject: str) -> T:
    if not belongs(subject, event):
        raise msgspec.ValidationError(f"{_describe(event)} cannot stand on {subject}")
    return event


def _describe(event: LogEvent) -> str:
    if isinstance(event, BatchEvent):
        return f"a {batch_event_name(event)} event of batch {event.batch_id}"
    return f"a {event_name(event)} event of job {event.job_id}"


def belongs(subject: str, event: LogEvent) -> bool:
    """Whether `event` may stand on `subject`: its own job's (or batch's) subject, for its
    own kind, and a single job's submission in its own tenant's lane.

    NATS grants each service the subjects it may publish on (`core/log/busaccess.py`), never
    what the message says; readers that check this make a payload unable to claim another
    kind or another job than its subject (a renderer's `done` subject carrying a
    submission, say, is no submission)."""
    if isinstance(event, BatchEvent):
        return subject == batch_subject(event.batch_id, batch_event_name(event))
    if job_of(subject) != event.job_id or kind_of(subject) != event_name(event):
        return False
    tokens = subject.split(".")
    if isinstance(event, JobSubmitted) and len(tokens) == 4 and tokens[2] == "submitted":
        return tokens[3] == lane_token(event.tenant)
    return True


def batch_event_name(event: AnyBatchEvent) -> str:
    """The last token of a batch event's subject: its tag without `batch_`."""
    return str(type(event).__struct_config__.tag).removeprefix("batch_")


def batch_subject_of(event: AnyBatchEvent) -> str:
    return batch_subject(event.batch_id, batch_event_name(event))


def batch_msg_id(event: AnyBatchEvent) -> str:
    """The `Nats-Msg-Id` of a batch event: one terminal event per batch (like jobs), one
    submission, one `complete`; controls are unique per publish."""
    if isinstance(event, BATCH_TERMINAL):
        return f"{event.batch_id}.terminal"
    if isinstance(event, BatchSubmitted | BatchComplete):
        return f"{event.batch_id}.{batch_event_name(event)}"
    if isinstance(event, BatchProgress):  # one per count: a repeat adds nothing
        return f"{event.batch_id}.progress.{event.done + event.failed + event.cancelled}"
    return f"{event.batch_id}.{batch_event_name(event)}.{event.at!r}"


def encode_batch(event: AnyBatchEvent) -> bytes:
    return _encoder.encode(event)


class DocumentUsed(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One billable document, on `usage.<tenant>.document` in the USAGE stream.

    The contract for billing connectors: `idempotency_key` is stable per job (the same
    on every republication), so a connector that forwards each message once per key
    (Stripe meter events: `identifier`) bills each document exactly once.
    """

    idempotency_key: str
    tenant: str
    job_id: str
    month: str  # YYYY-MM, UTC, of the job's terminal event
    ordinal: int  # the tenant's n-th successful document of that month
    pages: int
    bytes: int
    at: float
    quantity: int = 1
    v: int = 1


def usage_subject(tenant: str) -> str:
    return f"usage.{tenant}.document"


_NUL = b"\\u0000"


def encode(event: AnyEvent) -> bytes:
    """The event as the log stores it. PostgreSQL's `text` and `jsonb` cannot hold NUL, so
    an event whose strings do (a page's error message, say) is stored `storable`: what
    the log carries, the projection can always hold."""
    data = _encoder.encode(event)
    if _NUL in data:  # rare: a NUL, or the text "\\u0000" escaped in a string
        data = _encoder.encode(storable(event))
    return data


def storable(event: AnyEvent) -> AnyEvent:
    """`event` with every NUL in its strings (keys included) replaced by U+FFFD."""
    return msgspec.convert(_without_nul(msgspec.to_builtins(event)), type(event))


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    return value


def decode(payload: bytes, *, subject: str) -> AnyEvent:
    """Decode a job's event stored on `subject`; raises `msgspec.ValidationError` or
    `DecodeError` on garbage, and on an event that may not stand there (`belongs`)."""
    return _checked(_decoder.decode(payload), subject)


def event_name(event: AnyEvent) -> str:
    """The tag of an event, which is also the last token of its subject."""
    return str(type(event).__struct_config__.tag)


def subject_of(event: AnyEvent) -> str:
    if isinstance(event, JobSubmitted) and batch_of(event.job_id) is None:
        return submitted_subject(event.job_id, event.tenant)
    if isinstance(event, TERMINAL) and event.webhook_url is None and batch_of(event.job_id) is None:
        return quiet_ends(event.job_id, event_name(event))
    return subject(event.job_id, event_name(event))


def msg_id(event: AnyEvent) -> str:
    """The `Nats-Msg-Id` that makes re-publishing the same fact harmless.

    All terminal events share one id per job, so a racing second terminal event (a
    redelivered render, a cancel racing a render) is dropped by the duplicate window.
    """
    if isinstance(event, TERMINAL):
        return f"{event.job_id}.terminal"
    if isinstance(event, JobSubmitted):
        return event.job_id
    if isinstance(event, JobDeleted):
        return f"{event.job_id}.deleted"
    if isinstance(event, WebhookRedeliver):
        return f"{event.job_id}.redeliver.{event.request}"
    if isinstance(event, JobStarted | JobRetrying):
        # Unique per publish: a re-driven job restarts at attempt 1 and must still show.
        return f"{event.job_id}.{event_name(event)}.{event.attempt}.{event.at!r}"
    if isinstance(event, WebhookAttempted):
        # Unique per publish: a redelivery starts again at attempt 1.
        return f"{event.job_id}.webhook.{event.webhook_id}.{event.attempt}.{event.at!r}"
    raise TypeError(type(event))
