"""The reconciler's sweep of quota holds (`core/database/holds.py`): no hold outlives its work.

The projector releases a hold as its work ends. Two kinds can slip past it, and each
sweep releases them:

- a hold still `pending` after `holds.PENDING_GRACE` whose submission the log does not
  hold: its gateway died (or lost PostgreSQL) between taking the hold and publishing,
  so no work will ever end it. The log, not the projection, is asked: a projector far
  behind the log must not release the hold of work that is in it;
- a hold whose job or batch the projection shows ended (a job whose id was used again
  once its `Idempotency-Key` expired, a hold taken as its work ended).
"""

from __future__ import annotations

import logging

import asyncpg
from nats.js import JetStreamContext

from services.core.database import holds
from services.core.database.holds import HoldKind, PendingHold
from services.core.log import timeline

log = logging.getLogger(__name__)

SWEEP_LIMIT = 500
"""Pending holds looked at per sweep; the rest wait for the next one."""


async def sweep(js: JetStreamContext, conn: asyncpg.Connection) -> int:
    """Release the holds no work will end; how many. `Unavailable` if NATS or PostgreSQL
    cannot answer (the next sweep tries again)."""
    released = await holds.release_ended(conn)
    for hold in await holds.stale_pending(conn, holds.PENDING_GRACE, SWEEP_LIMIT):
        if not await _in_log(js, hold) and await holds.forget_pending(conn, hold):
            log.warning(
                "quota hold of %s %s released: its submission never reached the log",
                hold.kind,
                hold.id,
            )
            released += 1
    return released


async def _in_log(js: JetStreamContext, hold: PendingHold) -> bool:
    """Whether the log holds the submission the hold was taken for."""
    if hold.kind == HoldKind.BATCH:
        return await timeline.batch_submission(js, hold.id) is not None
    return await timeline.last_event(js, hold.id, "submitted") is not None
