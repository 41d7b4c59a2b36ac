"""What the API answers, as typed structures.

Decoding tolerates fields it does not know (a newer gateway may add some), and every
field a route may leave out has a default, so one struct serves every route that shows
the object (`GET /jobs/{id}`, `GET /jobs`, the job stream's `done`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

JOB_TERMINAL = frozenset({"done", "failed", "cancelled"})
BATCH_TERMINAL = frozenset({"done", "failed", "cancelled"})


class ErrorInfo(msgspec.Struct):
    """Why a job, item or batch failed: the API's `error.type` and root-cause message."""

    type: str | None = None
    message: str = ""


class Job(msgspec.Struct):
    """One job as `GET /jobs/{id}` shows it; `url` is its signed download link once done."""

    id: str
    status: str
    attempts: int = 0
    error: ErrorInfo | None = None
    url: str | None = None
    pages: int | None = None
    bytes: int | None = None
    render_ms: int | None = None
    webhook_url: str | None = None
    created_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @property
    def terminal(self) -> bool:
        """Whether the job has ended (`done`, `failed` or `cancelled`)."""
        return self.status in JOB_TERMINAL


class JobEvent(msgspec.Struct):
    """One entry of a job's timeline (`GET /jobs/{id}/events`, the job stream). `details`
    holds the whole entry as the API sent it, with the fields of its kind of event."""

    seq: int
    type: str
    at: dt.datetime | None = None
    attempt: int | None = None
    error: ErrorInfo | None = None
    status: str | None = None
    url: str | None = None
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class Batch(msgspec.Struct):
    """A batch's progress as `GET /batches/{id}` shows it; `url` is the archive's signed
    link once it has ended."""

    id: str
    status: str
    total: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    progress: float = 0.0
    rate: float | None = None
    eta: dt.datetime | None = None
    output: str | None = None
    error: ErrorInfo | None = None
    url: str | None = None
    bytes: int | None = None
    webhook_url: str | None = None
    created_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @property
    def terminal(self) -> bool:
        """Whether the batch has ended (`done`, `failed` or `cancelled`)."""
        return self.status in BATCH_TERMINAL

    @property
    def ended(self) -> int:
        """Items that have ended, whichever way."""
        return self.done + self.failed + self.cancelled


class BatchItem(msgspec.Struct):
    """One item of a batch (`GET /batches/{id}/items`): its own job and outcome."""

    index: int
    status: str
    filename: str | None = None
    job_id: str | None = None
    attempts: int = 0
    error: ErrorInfo | None = None


class TemplateVersion(msgspec.Struct):
    version: int
    created_at: dt.datetime | None = None


class Asset(msgspec.Struct):
    """One stored version of an asset (`POST /assets`, `GET /assets/{name}`); `new` is
    False when storing found these bytes already the name's latest version."""

    name: str
    version: int
    digest: str
    size: int
    content_type: str
    created_at: dt.datetime | None = None
    new: bool | None = None


class AssetSummary(msgspec.Struct):
    """A stored asset in the listing: its latest version and how many it has."""

    name: str
    latest_version: int
    versions: int
    size: int
    content_type: str
    updated_at: dt.datetime | None = None


class BundledFile(msgspec.Struct):
    """A file a template version bundles."""

    name: str
    digest: str
    size: int
    content_type: str
    url: str | None = None
    """A signed link to its bytes (`Client.download_file`), when read by `GET /templates/{id}`."""


class Template(msgspec.Struct):
    """A stored template. `GET /templates/{id}` fills every field; the listing gives
    `latest_version` and `updated_at`; creating one gives `version` and `created_at`."""

    id: str
    name: str
    version: int | None = None
    latest_version: int | None = None
    body: str | None = None
    header: str | None = None
    footer: str | None = None
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    versions: list[TemplateVersion] = msgspec.field(default_factory=list)
    files: list[BundledFile] = msgspec.field(default_factory=list)


class Usage(msgspec.Struct):
    """The tenant's usage of one month (`GET /usage`)."""

    month: str
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    pages: int = 0
    bytes: int = 0
    render_seconds: float = 0.0
    free_tier: int = 0
    billable: int = 0
    tenant: str | None = None


def to_dict(value: msgspec.Struct) -> dict[str, Any]:
    """A model as plain JSON-ready data (what `--json` prints)."""
    data: dict[str, Any] = msgspec.to_builtins(value)
    return data
