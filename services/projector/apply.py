"""How each event changes the read model. Idempotent: the stream sequence is the key.

Rules: an event already recorded (same stream sequence) changes nothing; a terminal status
(`done`, `failed`) never changes again; a non-terminal status only moves forward in stream
order (`last_seq`); a job row is created by whichever of its events arrives first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from services.core.database.holds import HoldKind, HoldState
from services.core.model import events
from services.core.model.errortypes import known_type
from services.core.model.status import TERMINAL, JobStatus

# Every event is one statement, so one round trip: record it (keyed by stream sequence),
# then, only if it was new, upsert its job row. A job row is created by whichever of its
# events comes first. Parameters $1-$6 are always the event's record (sequence, job,
# type, time, body, tenant); the statement's first column says whether it was new.
# Two clocks, never mixed: when something happened ($4: created_at, started_at,
# finished_at, the timeline's and usage's `at`) is the time the log stored the event, one
# server's clock, the same on every replay; `updated_at`, the reconciler's staleness clock,
# is the database's and is only compared with it. A producer's own clock (`event.at`)
# never reaches a row.
# Casts are explicit: `INSERT ... SELECT` cannot infer them.
_RECORD = """
WITH new AS (
    INSERT INTO job_events (stream_seq, job_id, type, at, body, tenant_id)
    VALUES ($1::bigint, $2::text, $3::text, $4::timestamptz, $5::jsonb, $6::text)
    ON CONFLICT (stream_seq) DO NOTHING RETURNING stream_seq
)"""
_NEW = "SELECT count(*) > 0 AS new FROM new"
# Statuses are ours, never input: spelled into the SQL text from the one list.
_TERMINAL = ", ".join(f"'{status}'" for status in sorted(TERMINAL))
_NOT_TERMINAL = f"WHERE j.status NOT IN ({_TERMINAL})"

# A job's submission, the first time it is recorded, marks the job's quota hold as seen in
# the log (`core/database/holds.py`): the sweep of holds whose submission never arrived passes it
# by. An item's hold is its batch's (`batches.py` marks it).
_LOGGED = f"""logged AS (
    UPDATE quota_holds AS h SET state = '{HoldState.LOGGED}' FROM new
    WHERE h.id = $2 AND h.kind = '{HoldKind.JOB}' AND h.state = '{HoldState.PENDING}'
)"""

_OTHER = f"""{_RECORD}, row AS (
    INSERT INTO jobs (id, tenant_id, status, created_at, updated_at)
    SELECT $2, $6::text, 'queued', $4, now() FROM new
    ON CONFLICT (id) DO NOTHING
) {_NEW}"""

# A job's input, webhook, key and batch (an item's `batch_id` and `index`) are written
# once: a later copy of its submission (a re-drive, a client repeating an
# Idempotency-Key) never replaces them. Every copy moves
# `last_seq` up to its own sequence (the staleness clock `updated_at` stays): the
# reconciler compares it with the renderers' ack floor to tell a job still waiting in the
# log from one the log no longer drives.
_SUBMITTED = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at, input, webhook_url,
                           idempotency_key, last_seq, batch_id, item_index, preview)
    SELECT $2, $6::text, 'queued', $4, now(), $7::jsonb, $8::text, $9::text, $1, $10::text,
           $11::integer, $12::text FROM new
    ON CONFLICT (id) DO UPDATE SET
        last_seq = GREATEST(j.last_seq, EXCLUDED.last_seq),
        input = COALESCE(j.input, EXCLUDED.input),
        batch_id = CASE WHEN j.input IS NULL THEN EXCLUDED.batch_id ELSE j.batch_id END,
        item_index = CASE WHEN j.input IS NULL THEN EXCLUDED.item_index ELSE j.item_index END,
        webhook_url = CASE WHEN j.input IS NULL THEN EXCLUDED.webhook_url ELSE j.webhook_url END,
        idempotency_key = CASE WHEN j.input IS NULL THEN EXCLUDED.idempotency_key
                               ELSE j.idempotency_key END,
        created_at = CASE WHEN j.input IS NULL THEN EXCLUDED.created_at ELSE j.created_at END,
        tenant_id = CASE WHEN j.input IS NULL THEN EXCLUDED.tenant_id ELSE j.tenant_id END,
        preview = CASE WHEN j.input IS NULL THEN EXCLUDED.preview ELSE j.preview END
), {_LOGGED} {_NEW}"""

# `started` ($7 = 'running', $9 true: it starts now) and `retrying` ($7 = 'queued'): a
# non-terminal status only moves forward in stream order.
_PROGRESS = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at, last_seq, attempts,
                           started_at)
    SELECT $2, $6::text, $7::job_status, $4, now(), $1, $8::integer,
           CASE WHEN $9::boolean THEN $4 END
    FROM new
    ON CONFLICT (id) DO UPDATE SET
        status = CASE WHEN EXCLUDED.last_seq > j.last_seq THEN EXCLUDED.status ELSE j.status END,
        last_seq = GREATEST(j.last_seq, EXCLUDED.last_seq),
        attempts = GREATEST(j.attempts, EXCLUDED.attempts),
        started_at = COALESCE(j.started_at, EXCLUDED.started_at),
        updated_at = now()
    {_NOT_TERMINAL}
) {_NEW}"""

# A terminal event that ends its job (`row` returns it only then) counts once in usage,
# unless the job is a preview (never billed, and it holds no quota):
# `usage_documents` is keyed by job id, so a job rendered twice, or replayed by a
# rebuild, adds nothing the second time; `usage_months` adds up what was new. The month
# is the terminal event's, in UTC. The last row says what was counted, with the tenant's
# successful documents of that month so far (the document's ordinal when it succeeded),
# and `ended`: the status this event ended its job with (NULL if the job had already
# ended). Usage outlives a rebuild (`usage_documents` is kept), the job row does not: so a
# batch counts its items' ends by `ended`, which a replay into emptied tables gives again.
# The job's quota hold (`core/database/holds.py`) is released by the same new usage row, never
# by `ended`: a replay into emptied tables ends the job again, but counts nothing new, so
# it releases nothing twice. A single job's hold is its own (deleted); an item's is its
# batch's, which gives back one unit (the item's id is `<batch_id>.<index>`).
_ENDED = f""", doc AS (
    INSERT INTO usage_documents (job_id, tenant_id, month, outcome, pages, bytes, render_ms, at)
    SELECT id, tenant_id, date_trunc('month', finished_at AT TIME ZONE 'UTC')::date, status,
           COALESCE(pages, 0), COALESCE(bytes, 0), COALESCE(render_ms, 0), finished_at
    FROM row WHERE row.preview IS NULL
    ON CONFLICT (job_id) DO NOTHING
    RETURNING job_id, tenant_id, month, outcome, pages, bytes, render_ms, at
), tally AS (
    INSERT INTO usage_months AS m (tenant_id, month, succeeded, failed, cancelled, pages,
                                   bytes, render_ms)
    SELECT tenant_id, month, (outcome = 'done')::int, (outcome = 'failed')::int,
           (outcome = 'cancelled')::int, pages, bytes, render_ms FROM doc
    ON CONFLICT (tenant_id, month) DO UPDATE SET
        succeeded = m.succeeded + EXCLUDED.succeeded, failed = m.failed + EXCLUDED.failed,
        cancelled = m.cancelled + EXCLUDED.cancelled, pages = m.pages + EXCLUDED.pages,
        bytes = m.bytes + EXCLUDED.bytes, render_ms = m.render_ms + EXCLUDED.render_ms
    RETURNING m.succeeded
), released AS (
    DELETE FROM quota_holds AS h USING doc
    WHERE h.id = doc.job_id AND h.kind = '{HoldKind.JOB}'
), item_released AS (
    UPDATE quota_holds AS h SET units = h.units - 1 FROM doc
    WHERE strpos(doc.job_id, '.') > 0 AND h.id = split_part(doc.job_id, '.', 1)
      AND h.kind = '{HoldKind.BATCH}' AND h.units > 0
)
SELECT (SELECT count(*) > 0 FROM new) AS new, (SELECT r.status FROM row AS r) AS ended,
       d.job_id, d.tenant_id, d.month, d.outcome, d.pages, d.bytes, d.at, t.succeeded
FROM (SELECT 1) AS one LEFT JOIN doc AS d ON true LEFT JOIN tally AS t ON true"""
_ENDS = (
    "RETURNING j.id, j.tenant_id, j.status, j.pages, j.bytes, j.render_ms, j.finished_at, j.preview"
)

_DONE = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at, last_seq, attempts,
                           object_key, bytes, pages, render_ms, finished_at)
    SELECT $2, $6::text, 'done', $4, now(), $1, $7::integer, $8::text, $9::bigint,
           $10::integer, $11::integer, $4 FROM new
    ON CONFLICT (id) DO UPDATE SET status = 'done',
        attempts = GREATEST(j.attempts, EXCLUDED.attempts), object_key = EXCLUDED.object_key,
        bytes = EXCLUDED.bytes, pages = EXCLUDED.pages, render_ms = EXCLUDED.render_ms,
        finished_at = EXCLUDED.finished_at, updated_at = now(),
        last_seq = GREATEST(j.last_seq, EXCLUDED.last_seq),
        error_type = NULL, error_message = NULL
    {_NOT_TERMINAL}
    {_ENDS}
){_ENDED}"""

_FAILED = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at, last_seq, attempts,
                           error_type, error_message, finished_at)
    SELECT $2, $6::text, 'failed', $4, now(), $1, $7::integer, $8::error_type, $9::text, $4
    FROM new
    ON CONFLICT (id) DO UPDATE SET status = 'failed',
        attempts = GREATEST(j.attempts, EXCLUDED.attempts), error_type = EXCLUDED.error_type,
        error_message = EXCLUDED.error_message, finished_at = EXCLUDED.finished_at,
        updated_at = now(), last_seq = GREATEST(j.last_seq, EXCLUDED.last_seq)
    {_NOT_TERMINAL}
    {_ENDS}
){_ENDED}"""

_CANCELLED = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at, last_seq,
                           error_type, error_message, finished_at)
    SELECT $2, $6::text, 'cancelled', $4, now(), $1, 'cancelled', $7::text, $4 FROM new
    ON CONFLICT (id) DO UPDATE SET status = 'cancelled', error_type = 'cancelled',
        error_message = EXCLUDED.error_message, finished_at = EXCLUDED.finished_at,
        updated_at = now(), last_seq = GREATEST(j.last_seq, EXCLUDED.last_seq)
    {_NOT_TERMINAL}
    {_ENDS}
){_ENDED}"""

# The file named by the event is gone; a later render's file (another key) is not.
_DELETED = f"""{_RECORD}, row AS (
    INSERT INTO jobs AS j (id, tenant_id, status, created_at, updated_at)
    SELECT $2, $6::text, 'queued', $4, $4 FROM new
    ON CONFLICT (id) DO UPDATE SET object_key = NULL, updated_at = now()
    WHERE j.object_key = $7::text
) {_NEW}"""

_WEBHOOK = f"""{_RECORD}, row AS (
    INSERT INTO webhook_deliveries
        (stream_seq, job_id, webhook_id, attempt, url, outcome, status_code, error, latency_ms, at)
    SELECT $1, $2, $7::text, $8::integer, $9::text, $10::text, $11::integer, $12::text,
           $13::integer, $4 FROM new
    ON CONFLICT (stream_seq) DO NOTHING
) {_NEW}"""


_NOT_INPUT = {"type", "job_id", "tenant", "at", "v", "webhook_url", "idempotency_key"}


def job_input_of(event: events.JobSubmitted) -> dict[str, Any]:
    """What the reconciler needs to re-drive the job: its source, data and options."""
    body: dict[str, Any] = msgspec.to_builtins(event)
    return {k: v for k, v in body.items() if k not in _NOT_INPUT}


@dataclass(frozen=True)
class Counted:
    """A job that ended and was counted in its tenant's usage just now."""

    job_id: str
    tenant: str
    month: dt.date
    outcome: str
    pages: int
    bytes: int
    at: dt.datetime
    succeeded: int  # the tenant's successful documents of that month, this one included


@dataclass(frozen=True)
class Applied:
    """What applying one event did: whether it was new, the status it ended its job with
    (only the first time the job ends, in stream order), and what it counted in usage."""

    new: bool
    counted: Counted | None = None
    ended: JobStatus | None = None


async def apply(
    conn: asyncpg.Connection, seq: int, event: events.AnyEvent, at: dt.datetime
) -> Applied:
    """Apply one event, stored by the log at `at`, inside the caller's transaction."""
    body = event.public_view()  # a submission's input is kept once, on the job row
    body.pop("at", None)  # its producer's clock: the row's `at` is the log's
    record = (seq, event.job_id, events.event_name(event), at, body, event.tenant)
    statement, params = _STATEMENTS.get(type(event), (_OTHER, _no_params))
    row = await conn.fetchrow(statement, *record, *params(event))
    if len(row) == 1:
        return Applied(bool(row["new"]))
    ended = JobStatus(row["ended"]) if row["ended"] is not None else None
    if row["job_id"] is None:
        return Applied(bool(row["new"]), ended=ended)
    counted = Counted(
        job_id=row["job_id"], tenant=row["tenant_id"], month=row["month"],
        outcome=row["outcome"], pages=row["pages"], bytes=row["bytes"], at=row["at"],
        succeeded=row["succeeded"],
    )  # fmt: skip
    return Applied(bool(row["new"]), counted, ended)


def _no_params(event: Any) -> tuple[Any, ...]:
    return ()


# Each event type: its statement, and its parameters after the record's five.
_STATEMENTS: dict[type, tuple[str, Callable[[Any], tuple[Any, ...]]]] = {
    events.JobSubmitted: (
        _SUBMITTED,
        lambda e: (
            job_input_of(e), e.webhook_url, e.idempotency_key, e.batch_id, e.index, e.preview
        ),
    ),
    events.JobStarted: (_PROGRESS, lambda e: (JobStatus.RUNNING, e.attempt, True)),
    events.JobRetrying: (_PROGRESS, lambda e: (JobStatus.QUEUED, e.attempt, False)),
    events.JobDone: (
        _DONE, lambda e: (e.attempt, e.object_key, e.bytes, e.pages, e.render_ms)
    ),
    events.JobFailed: (_FAILED, lambda e: (e.attempt, known_type(e.error.type), e.error.message)),
    events.JobCancelled: (_CANCELLED, lambda e: (e.reason,)),
    events.JobDeleted: (_DELETED, lambda e: (e.object_key,)),
    events.WebhookAttempted: (
        _WEBHOOK,
        lambda e: (
            e.webhook_id, e.attempt, e.url, e.outcome, e.status_code, e.error, e.latency_ms
        ),
    ),
}  # fmt: skip
