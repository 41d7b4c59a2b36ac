"""Where things are on the log: the stream and its subjects, durable names and lanes, and
the storage keys derived from a job's or a batch's id. No other module spells them.
"""

from __future__ import annotations

import hashlib
import re

STREAM = "JOBS"
SUBJECTS = ["jobs.>", "batches.>"]

DEFAULT_TENANT = "default"
"""The tenant of every job when `PRESSROOM_AUTH=disabled`, and of events written before
tenants existed (they carry none)."""

USAGE_STREAM = "USAGE"
USAGE_SUBJECTS = ["usage.>"]

RENDERER = "renderer"
PROJECTOR = "projector"
NOTIFIER = "notifier"
CONDUCTOR = "conductor"
BATCH_STATE = "BATCH_STATE"
"""The KV bucket through which renderers learn, within milliseconds, which batches may
run (`running`) and which must not start more items (`paused`, `cancelled`)."""


def subject(job_id: str, event: str) -> str:
    """The subject of one job's event: `jobs.<job_id>.<event>`."""
    return f"jobs.{job_id}.{event}"


def job_filter(job_id: str) -> str:
    """Every event of one job (a batch's item included): `jobs.<job_id>.>`."""
    return f"jobs.{job_id}.>"


SINGLES = "singles-"
"""The prefix of the durables through which renderers take each tenant's single jobs."""

LANE_BELL = "pressroom.lanes"
"""Core NATS (not the log): `pressroom.lanes.<lane token>`, published by the gateway once a
tenant's single job is stored, so idle renderers ask that tenant's durable at once instead
of at their next sweep. A hint only: a lost bell delays a job by one sweep, never loses it."""

KEY_NEWS = "pressroom.keys"
"""Core NATS (not the log): a gateway that changed an API key or a tenant tells every
gateway (`gateway/keynews.py`), so a revocation is refused everywhere at once. A hint
too: each gateway still reloads keys from PostgreSQL every `PRESSROOM_AUTH_REFRESH`."""

KEY_DIRECTORY = "KEY_DIRECTORY"
"""The KV bucket holding a copy of every API key (its hash, never the key), tenant and
scopes, revocations included (`gateway/keymirror.py`): a gateway that starts while
PostgreSQL is down authenticates from it. Only gateways may read or write it."""

_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def lane_token(tenant: str) -> str:
    """The tenant as one subject token and durable-name part: its id itself (`ten_…`,
    `default`), or a digest of an id that could not be one."""
    if _TOKEN.fullmatch(tenant):
        return tenant
    return "h" + hashlib.sha256(tenant.encode()).hexdigest()[:24]


def submitted_subject(job_id: str, tenant: str) -> str:
    """Where a single job's submission is stored: `jobs.<job_id>.submitted.<tenant>`, so each
    tenant's single jobs wait in their own durable (`singles_durable`) and one tenant's
    flood queues behind nobody else's job. Four tokens with `submitted` third: no item's
    subject (`jobs.<batch_id>.<index>.<event>`) looks like it. Submissions stored before
    tenants had lanes are `jobs.<job_id>.submitted` (the legacy `renderer` durable)."""
    return f"jobs.{job_id}.submitted.{lane_token(tenant)}"


QUIET = "quiet"
"""The last token of a single job's terminal event when the job has no webhook
(`jobs.<id>.done.quiet`): the notifier's durable (`jobs.*.done`, …) does not match it, so
the notifier is never handed an end it has nothing to send for. Ends logged before this
token existed, and ends of jobs with a webhook, keep `jobs.<id>.<tag>`."""


def kind_of(subject: str) -> str:
    """The event type a subject of the log carries: its last token, but `submitted` for
    a single job's submission (whose last token is its tenant's lane) and the end of a
    single job without a webhook (whose last token is `QUIET`)."""
    tokens = subject.split(".")
    if len(tokens) == 4 and tokens[0] == "jobs" and tokens[2] == "submitted":
        return "submitted"
    if len(tokens) == 4 and tokens[0] == "jobs" and tokens[3] == QUIET:
        return tokens[2]
    return tokens[-1]


ENDS = frozenset({"done", "failed", "cancelled"})
"""The event types that end a job."""


def single_job_end(subject: str) -> bool:
    """Whether `subject` is a single job's terminal event (`jobs.<id>.done[.quiet]`…),
    not a batch item's (`jobs.<batch_id>.<index>.done`): one a client may be waiting on."""
    tokens = subject.split(".")
    return tokens[0] == "jobs" and len(tokens) in (3, 4) and tokens[2] in ENDS


_INDEX = re.compile(r"[0-9]{1,7}")


def job_of(subject: str) -> str | None:
    """The id of the job a subject of the log is about (the inverse of `subject_of`), or
    None if it is no job's: `jobs.<id>.<event>`, a single job's submission and quiet end
    (`jobs.<id>.submitted.<lane>`, `jobs.<id>.<tag>.quiet`), an item's
    `jobs.<batch_id>.<index>.<event>`."""
    tokens = subject.split(".")
    if tokens[0] != "jobs" or len(tokens) not in (3, 4):
        return None
    if len(tokens) == 3 or tokens[2] == "submitted" or tokens[3] == QUIET:
        return tokens[1]
    if _INDEX.fullmatch(tokens[2]):
        return f"{tokens[1]}.{tokens[2]}"  # as `item_job_id` makes it
    return None


def quiet_ends(job_id: str, tag: str = "*") -> str:
    """The subject of a single job's webhook-less end `tag` (any of them by default)."""
    return subject(job_id, f"{tag}.{QUIET}")


def singles_durable(tenant: str) -> str:
    """The durable of `tenant`'s single jobs, made by the gateway before its first one."""
    return f"{SINGLES}{lane_token(tenant)}"


def singles_filter(tenant: str) -> str:
    return submissions(lane_token(tenant))


def submissions(lane: str = "*") -> str:
    """The single jobs' submissions in one lane (a lane token), by default in every lane."""
    return f"jobs.*.submitted.{lane}"


def lane_bell(tenant: str) -> str:
    return f"{LANE_BELL}.{lane_token(tenant)}"


def item_job_id(batch_id: str, index: int) -> str:
    """The job id of a batch's item: `<batch_id>.<index>`. Its events are then
    `jobs.<batch_id>.<index>.<event>`: four tokens, which the `renderer` durable's
    `jobs.*.submitted` never matches (items reach renderers through their batch's own
    durable, `bulk_durable`), while `jobs.>` readers see them like any job's."""
    return f"{batch_id}.{index}"


def batch_of(job_id: str) -> tuple[str, int] | None:
    """(batch id, index) of an item's job id; None for a job that is no batch's item."""
    batch_id, dot, index = job_id.partition(".")
    if not dot or not index.isdigit():
        return None
    return batch_id, int(index)


def batch_subject(batch_id: str, event: str) -> str:
    """The subject of one batch's event: `batches.<batch_id>.<event>`."""
    return f"batches.{batch_id}.{event}"


def bulk_durable(batch_id: str) -> str:
    """The durable through which renderers take one batch's items."""
    return f"bulk-{batch_id}"


def bulk_filter(batch_id: str) -> str:
    """The submissions of one batch's items."""
    return f"jobs.{batch_id}.*.submitted"


def batch_items_key(tenant: str, batch_id: str) -> str:
    """Where the gateway stores a batch's item list (JSON Lines, one `BatchItem` each)."""
    return f"batches/{tenant}/{batch_id}/items.jsonl"


def batch_archive_key(tenant: str, batch_id: str, extension: str = "zip") -> str:
    """Where the conductor stores a batch's archive (or merged PDF)."""
    return f"batches/{tenant}/{batch_id}/{batch_id}.{extension}"
