"""How a batch's events, and its items' events, change the read model.

Same rules as `apply.py`: every batch event is recorded once in `batch_events`, keyed by
stream sequence, and changes its `batches` row only if it was new; a terminal status
(`done`, `failed`, `cancelled`) never changes again. A row is made by the batch's
`submitted` event alone: a control or terminal event of a batch the projection does not
know (its submission aged out of the log before a rebuild) is recorded, and moves nothing.

An item is a job (`<batch_id>.<index>`): after `apply.apply` has applied its event, the
same transaction moves the batch: the first `started` of any item makes a queued batch
`running`, and the event that ends an item (once per item, `Applied.ended`) adds 1 to one
of `done`, `failed`, `cancelled`. When they add up to `total`, the batch is complete: the
projector publishes `batches.<id>.complete` for the conductor, which packs the archive.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, cast

import asyncpg
from nats.js import JetStreamContext

from services.core.database.holds import HoldKind, HoldState
from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import NotFound
from services.core.model.errortypes import known_type
from services.core.model.status import BATCH_TERMINAL, BatchStatus, JobStatus
from services.projector.apply import Applied

# Parameters $1-$6 are always the event's record (sequence, batch, tenant, type, time,
# body); the statement's one column says whether it was new. As in `apply.py`, `$5` is the
# time the log stored the event, `updated_at` the database's clock.
_RECORD = """
WITH new AS (
    INSERT INTO batch_events (stream_seq, batch_id, tenant_id, type, at, body)
    VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::timestamptz, $6::jsonb)
    ON CONFLICT (stream_seq) DO NOTHING RETURNING stream_seq
)"""
_NEW = "SELECT count(*) > 0 AS new FROM new"
# Statuses are ours, never input: spelled into the SQL text from the one list.
_TERMINAL = ", ".join(f"'{status}'" for status in sorted(BATCH_TERMINAL))
_OPEN = f"b.status NOT IN ({_TERMINAL})"

_RECORD_ONLY = f"{_RECORD} {_NEW}"

# A later copy of a submission changes nothing: the first one made the batch, and marked
# its quota hold (`core/database/holds.py`) as seen in the log.
_SUBMITTED = f"""{_RECORD}, row AS (
    INSERT INTO batches (id, tenant_id, status, total, output, webhook_url, idempotency_key,
                         template_id, template_version, created_at, updated_at, last_seq,
                         progress_webhooks)
    SELECT $2, $3, $7::batch_status, $8::integer, $9::text, $10::text, $11::text, $12::text,
           $13::integer, $5, now(), $1, $14::boolean FROM new
    ON CONFLICT (id) DO NOTHING
), logged AS (
    UPDATE quota_holds AS h SET state = '{HoldState.LOGGED}' FROM new
    WHERE h.id = $2 AND h.kind = '{HoldKind.BATCH}' AND h.state = '{HoldState.PENDING}'
) {_NEW}"""

# A control moves an open batch, in stream order. Resumed ($7 NULL): back to `running` if
# an item had started, else to `queued`.
_CONTROL = f"""{_RECORD}, row AS (
    UPDATE batches AS b SET
        status = COALESCE($7::batch_status,
                          CASE WHEN b.started_at IS NULL THEN '{BatchStatus.QUEUED}'
                               ELSE '{BatchStatus.RUNNING}' END::batch_status),
        last_seq = $1, updated_at = now()
    FROM new WHERE b.id = $2 AND {_OPEN} AND b.last_seq < $1
) {_NEW}"""

# A batch's end gives back what is left of its quota hold: units of items that never
# became jobs (a batch that failed before it expanded) or have not ended yet. Deleting
# twice is deleting nothing.
_ENDED = f"""{_RECORD}, row AS (
    UPDATE batches AS b SET status = $7::batch_status, object_key = $8::text, bytes = $9::bigint,
        error_type = $10::error_type, error_message = $11::text, finished_at = $5,
        last_seq = GREATEST(b.last_seq, $1), updated_at = now()
    FROM new WHERE b.id = $2 AND {_OPEN}
), released AS (
    DELETE FROM quota_holds AS h USING new WHERE h.id = $2 AND h.kind = '{HoldKind.BATCH}'
) {_NEW}"""


def public_body(event: events.AnyBatchEvent) -> dict[str, Any]:
    """What `batch_events.body` holds: the event without its template and secrets, and
    without its producer's clock (the row's `at` is the log's)."""
    body = event.public_view()
    body.pop("at", None)
    return body


def tag(event: events.AnyBatchEvent) -> str:
    """The event's type tag (`batch_done`), for metrics."""
    return str(type(event).__struct_config__.tag)


async def apply(
    conn: asyncpg.Connection, seq: int, event: events.AnyBatchEvent, at: dt.datetime
) -> bool:
    """Apply one batch event, stored by the log at `at`, inside the caller's transaction;
    True if it was new."""
    record = (
        seq, event.batch_id, event.tenant, events.batch_event_name(event), at,
        public_body(event),
    )  # fmt: skip
    statement, params = _STATEMENTS[type(event)]
    return bool(await conn.fetchval(statement, *record, *params(event)))


def _error(event: events.BatchFailed) -> tuple[str | None, str]:
    """The batch's error: a type the code does not know (a newer producer's) is stored as
    `internal`, as answers would show it; the log keeps the original."""
    return known_type(event.error.type), event.error.message


def _no_params(event: Any) -> tuple[Any, ...]:
    return ()


# Each batch event type: its statement, and its parameters after the record's six.
_STATEMENTS: dict[type, tuple[str, Callable[[Any], tuple[Any, ...]]]] = {
    events.BatchSubmitted: (
        _SUBMITTED,
        lambda e: (
            BatchStatus.QUEUED, e.total, e.output, e.webhook_url, e.idempotency_key,
            e.template_id, e.template_version, e.progress_webhooks,
        ),
    ),
    events.BatchPaused: (_CONTROL, lambda e: (BatchStatus.PAUSED,)),
    events.BatchResumed: (_CONTROL, lambda e: (None,)),
    # A cancel request leaves the status: the batch ends `cancelled` with its terminal
    # event, once the conductor has cancelled its items and packed what finished.
    events.BatchCancel: (_RECORD_ONLY, _no_params),
    events.BatchComplete: (_RECORD_ONLY, _no_params),
    events.BatchProgress: (_RECORD_ONLY, _no_params),
    events.BatchDone: (
        _ENDED, lambda e: (BatchStatus.DONE, e.object_key, e.bytes, None, None)
    ),
    events.BatchFailed: (
        _ENDED, lambda e: (BatchStatus.FAILED, e.object_key, None, *_error(e))
    ),
    events.BatchCancelled: (
        _ENDED, lambda e: (BatchStatus.CANCELLED, e.object_key, e.bytes, None, None)
    ),
}  # fmt: skip


# An item's first start (in any attempt) starts its batch, unless it is paused or ended.
_ITEM_STARTED = f"""
UPDATE batches AS b SET started_at = COALESCE(b.started_at, $3),
    status = CASE WHEN b.status = '{BatchStatus.QUEUED}' THEN '{BatchStatus.RUNNING}'
                  ELSE b.status END,
    updated_at = now()
WHERE b.id = $1 AND b.tenant_id = $2 AND {_OPEN}
"""

# An item ended ($3, its status): counted whatever the batch's status, so the counts stay
# true. Returns the counts, to tell whether every item has ended.
_ITEM_ENDED = f"""
UPDATE batches AS b SET done = b.done + ($3::text = '{JobStatus.DONE}')::int,
    failed = b.failed + ($3::text = '{JobStatus.FAILED}')::int,
    cancelled = b.cancelled + ($3::text = '{JobStatus.CANCELLED}')::int, updated_at = now()
WHERE b.id = $1 AND b.tenant_id = $2
RETURNING b.status, b.total, b.done + b.failed + b.cancelled AS ended, b.done, b.failed,
          b.cancelled, b.progress_webhooks, b.webhook_url
"""

_COUNTS = """
SELECT b.status, b.total, b.done + b.failed + b.cancelled AS ended
FROM batches AS b WHERE b.id = $1 AND b.tenant_id = $2
"""


PROGRESS_FRESH = 60.0
"""Seconds after which an item's end is too old to report as progress: a rebuild replays
every item's end, long after, and must not send a batch's progress again."""


def progress(
    batch_id: str, tenant: str, row: asyncpg.Record, at: dt.datetime
) -> events.BatchProgress | None:
    """The progress of a batch that asked for progress webhooks, as of an item that has
    just ended (`at`, the log's time of its end); None for any other batch, or an end
    replayed long after."""
    if not row["progress_webhooks"] or row["webhook_url"] is None:
        return None
    if (dt.datetime.now(dt.UTC) - at).total_seconds() > PROGRESS_FRESH:
        return None
    return events.BatchProgress(
        batch_id=batch_id, tenant=tenant, total=row["total"], done=row["done"],
        failed=row["failed"], cancelled=row["cancelled"], webhook_url=row["webhook_url"],
    )  # fmt: skip


async def follow_item(
    conn: asyncpg.Connection, event: events.AnyEvent, applied: Applied, at: dt.datetime
) -> events.BatchComplete | events.BatchProgress | None:
    """Move the batch of an item's just-applied `event`, inside the caller's transaction.

    Returns the batch's `complete` event when every item has ended and the batch has not:
    the caller publishes it before committing. Before that, an item's end returns the
    batch's progress if it asked for progress webhooks (the caller throttles them).
    Asked at every terminal event of an item, new or not, so a batch whose counts reached
    `total` in a transaction that committed without publishing (none should) still
    completes on a replay; `publish_complete` makes the repeats harmless.
    """
    batch = subjects.batch_of(event.job_id)
    if batch is None:
        return None
    batch_id = batch[0]
    if isinstance(event, events.JobStarted):
        if applied.new:
            await conn.execute(_ITEM_STARTED, batch_id, event.tenant, at)
        return None
    if not isinstance(event, events.TERMINAL):
        return None
    if applied.ended is not None:
        row = await conn.fetchrow(_ITEM_ENDED, batch_id, event.tenant, applied.ended)
    else:
        row = await conn.fetchrow(_COUNTS, batch_id, event.tenant)
    if row is None or BatchStatus(row["status"]).terminal:
        return None
    if row["ended"] < row["total"]:
        return progress(batch_id, event.tenant, row, at) if applied.ended is not None else None
    return events.BatchComplete(batch_id=batch_id, tenant=event.tenant)


async def publish_complete(js: JetStreamContext, complete: events.BatchComplete) -> None:
    """Publish a batch's `complete` unless the log already holds one.

    The dedup id drops a second copy within the duplicate window; asking the log first
    keeps a rebuild (which replays every item's end long after) from publishing another
    one, which would have the conductor pack the batch again.
    """
    if await _logged(js, events.batch_subject_of(complete)):
        return
    await bus.publish_batch(js, complete)


async def _logged(js: JetStreamContext, subject: str) -> bool:
    """Whether the log holds a message on `subject`; `Unavailable` if NATS does not say."""
    try:
        with bus.map_bus_errors("cannot read the batch's complete event"):
            await js.get_last_msg(subjects.STREAM, subject)
    except NotFound:
        return False
    return True


def storable(event: events.AnyBatchEvent) -> events.AnyBatchEvent:
    """`events.storable` for a batch event: NUL in its strings replaced by U+FFFD (the
    replacement works on any event struct; its signature names job events)."""
    return cast(events.AnyBatchEvent, events.storable(cast(events.AnyEvent, event)))
