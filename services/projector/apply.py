"""How each event changes the read model. Idempotent: the stream sequence is the key.

Rules: an event already recorded (same stream sequence) changes nothing; a terminal status
(`done`, `failed`) never changes again; a non-terminal status only moves forward in stream
order (`last_seq`); a job row is created by whichever of its events arrives first.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg
import msgspec

from services.core import events

TERMINAL_STATUSES = ("done", "failed", "cancelled")

_RECORD = """
INSERT INTO job_events (stream_seq, job_id, type, at, body) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream_seq) DO NOTHING RETURNING stream_seq
"""

_ENSURE_ROW = """
INSERT INTO jobs (id, status, created_at, updated_at) VALUES ($1, 'queued', $2, $2)
ON CONFLICT (id) DO NOTHING
"""

_SUBMITTED = """
UPDATE jobs SET input = $2, webhook_url = $3, idempotency_key = $4, created_at = $5
WHERE id = $1
"""

_PROGRESS = """
UPDATE jobs SET
    status = CASE WHEN $3::bigint > last_seq THEN $2 ELSE status END,
    last_seq = GREATEST(last_seq, $3::bigint),
    attempts = GREATEST(attempts, $4::integer),
    started_at = COALESCE(started_at, $5),
    updated_at = now()
WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')
"""

_DONE = """
UPDATE jobs SET status = 'done', attempts = GREATEST(attempts, $2::integer), object_key = $3,
    bytes = $4, pages = $5, render_ms = $6, finished_at = $7, updated_at = now(),
    last_seq = GREATEST(last_seq, $8::bigint), error_type = NULL, error_message = NULL
WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')
"""

_FAILED = """
UPDATE jobs SET status = 'failed', attempts = GREATEST(attempts, $2::integer),
    error_type = $3, error_message = $4, finished_at = $5, updated_at = now(),
    last_seq = GREATEST(last_seq, $6::bigint)
WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')
"""

_CANCELLED = """
UPDATE jobs SET status = 'cancelled', error_type = 'cancelled', error_message = $2,
    finished_at = $3, updated_at = now(), last_seq = GREATEST(last_seq, $4::bigint)
WHERE id = $1 AND status NOT IN ('done', 'failed', 'cancelled')
"""

_DELETED = """
UPDATE jobs SET object_key = NULL, updated_at = now() WHERE id = $1 AND object_key = $2
"""

_WEBHOOK = """
INSERT INTO webhook_deliveries
    (stream_seq, job_id, webhook_id, attempt, url, outcome, status_code, error, latency_ms, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (stream_seq) DO NOTHING
"""


_NOT_INPUT = {"type", "job_id", "at", "v", "webhook_url", "idempotency_key"}


def job_input_of(event: events.JobSubmitted) -> dict[str, Any]:
    """What the reconciler needs to re-drive the job: its source, data and options."""
    body: dict[str, Any] = msgspec.to_builtins(event)
    return {k: v for k, v in body.items() if k not in _NOT_INPUT}


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


async def apply(conn: asyncpg.Connection, seq: int, event: events.AnyEvent) -> bool:
    """Apply one event inside the caller's transaction; False if it was already applied."""
    body = msgspec.to_builtins(event)
    if isinstance(event, events.JobSubmitted):
        # The input is kept once, on the job row; the timeline only needs what happened.
        body.pop("template", None)
        body.pop("html", None)
        body.pop("data", None)
        body.pop("webhook_secret", None)
    recorded = await conn.fetchval(
        _RECORD, seq, event.job_id, events.event_name(event), _ts(event.at), body
    )
    if recorded is None:
        return False
    if isinstance(event, events.WebhookAttempted):
        await _webhook(conn, seq, event)
        return True
    await conn.execute(_ENSURE_ROW, event.job_id, _ts(event.at))
    await _job(conn, seq, event)
    return True


async def _job(conn: asyncpg.Connection, seq: int, event: events.AnyEvent) -> None:
    at = _ts(event.at)
    match event:
        case events.JobSubmitted():
            job_input = job_input_of(event)
            await conn.execute(
                _SUBMITTED, event.job_id, job_input, event.webhook_url, event.idempotency_key, at
            )
        case events.JobStarted():
            await conn.execute(_PROGRESS, event.job_id, "running", seq, event.attempt, at)
        case events.JobRetrying():
            await conn.execute(_PROGRESS, event.job_id, "queued", seq, event.attempt, None)
        case events.JobDone():
            await conn.execute(
                _DONE, event.job_id, event.attempt, event.object_key, event.bytes,
                event.pages, event.render_ms, at, seq,
            )  # fmt: skip
        case events.JobFailed():
            await conn.execute(
                _FAILED, event.job_id, event.attempt, event.error.type, event.error.message,
                at, seq,
            )  # fmt: skip
        case events.JobCancelled():
            await conn.execute(_CANCELLED, event.job_id, event.reason, at, seq)
        case events.JobDeleted():
            await conn.execute(_DELETED, event.job_id, event.object_key)


async def _webhook(conn: asyncpg.Connection, seq: int, event: events.WebhookAttempted) -> None:
    await conn.execute(
        _WEBHOOK, seq, event.job_id, event.webhook_id, event.attempt, event.url, event.outcome,
        event.status_code, event.error, event.latency_ms, _ts(event.at),
    )  # fmt: skip
