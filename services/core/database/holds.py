"""Quota holds: the documents a tenant's accepted work may still produce, held against its
monthly quota until that work ends.

A tenant with a monthly quota commits, at any moment, what succeeded this month
(`usage_months.succeeded`, counted by the projector) plus every unit still held
(`quota_held`, the sum of its holds, kept by a trigger on `quota_holds`). Before
the gateway publishes a submission it takes a hold (`take`): 1 unit for a job, one per
item for a batch, keyed by the job's or batch's id. `take` runs in one transaction under
a lock of the tenant's own (`pg_advisory_xact_lock`), and reads the committed total in a
statement that starts after the lock is granted, so concurrent requests (on any number
of gateways) see each other's holds and cannot take the tenant past its quota together.

A hold ends:

- with its work, in the projector's transaction that applies the end
  (`projector/apply.py`, `projector/batches.py`): the first terminal event that counts a
  job in usage deletes the job's hold, or gives back one unit of its batch's; a success
  adds 1 to `succeeded` in the same transaction, so the committed total does not move
  while the unit turns into usage. "First" is decided by `usage_documents` (one row per
  job, kept by a rebuild), so no replay releases anything twice. A batch's own end
  deletes what is left of its hold (items never made, or ended after it);
- when its publish failed (`release`, by the gateway), unless the projector already saw
  the submission in the log (the acknowledgement was lost, the job exists);
- in the reconciler's sweep (`projector/quota.py`): a hold still `pending` after
  `PENDING_GRACE` whose submission the log does not hold (its gateway died between the
  hold and the publish), and a hold whose job or batch the projection shows ended.

Holds are not a projection: a rebuild leaves them alone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

import asyncpg

from services.core.database import db
from services.core.database.db import map_db_errors
from services.core.model.status import BATCH_TERMINAL, TERMINAL


class HoldKind(StrEnum):
    """What a hold is for (SQL type `quota_hold_kind`)."""

    JOB = "job"
    BATCH = "batch"


class HoldState(StrEnum):
    """Where a hold stands (SQL type `quota_hold_state`): `pending` from the gateway's
    `take` until the projector applies the work's submission, then `logged`."""

    PENDING = "pending"
    LOGGED = "logged"


QUOTA_LOCK = 0x71756F74
"""The first key of every tenant's quota lock ("quot"; the second is the hash of the
tenant's id). Two-key advisory locks never meet the one-key ones of migrations and the
reconciler."""

PENDING_GRACE = 300.0
"""Seconds after which a `pending` hold whose submission the log does not hold is
released: far longer than a gateway takes from the hold to the log's acknowledgement
(a publish times out after 5 s; a batch's item list, up to `PRESSROOM_MAX_BATCH_BYTES`,
is stored in between)."""

_LOCK = "SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text))"

# $1 tenant, $2 hold id, $3 kind, $4 units, $5 quota. The month is the database's, in
# UTC, as usage's is. `quota_held` is the tenant's units held (a trigger keeps it equal
# to the sum of its holds). A hold of the same id (a client repeating an
# `Idempotency-Key` whose first request never reached the log) is taken again, not
# counted twice. A projector releasing this tenant's units meanwhile only ever lowers
# the committed total read here (a success moves a unit from held to succeeded), so the
# check stays on the safe side while the trigger's update waits for that transaction.
_TAKE = f"""
WITH committed AS (
    SELECT COALESCE((SELECT u.succeeded FROM usage_months AS u WHERE u.tenant_id = $1
                     AND u.month = date_trunc('month', now() AT TIME ZONE 'UTC')::date),
                    0)::bigint AS succeeded,
           COALESCE((SELECT q.units FROM quota_held AS q WHERE q.tenant_id = $1), 0)
           - COALESCE((SELECT h.units FROM quota_holds AS h
                       WHERE h.id = $2 AND h.tenant_id = $1), 0)::bigint AS held
), taken AS (
    INSERT INTO quota_holds AS h (id, tenant_id, kind, units)
    SELECT $2, $1, $3::quota_hold_kind, $4::integer FROM committed
    WHERE committed.succeeded + committed.held + $4::integer <= $5::bigint
    ON CONFLICT (id) DO UPDATE SET units = EXCLUDED.units,
        state = '{HoldState.PENDING}', created_at = clock_timestamp()
    WHERE h.tenant_id = EXCLUDED.tenant_id
    RETURNING h.id
)
SELECT c.succeeded, c.held, (SELECT count(*) FROM taken) > 0 AS taken FROM committed AS c
"""


@dataclass(frozen=True)
class Committed:
    """A tenant's committed documents when a hold was asked for, and whether it was taken."""

    succeeded: int
    held: int
    taken: bool


async def take(
    pool: asyncpg.Pool, tenant: str, hold_id: str, kind: HoldKind, units: int, quota: int
) -> Committed:
    """Hold `units` for `tenant`'s job or batch `hold_id` if they fit in `quota` beside
    this month's successes and the tenant's other holds; `Unavailable` if PostgreSQL
    cannot say."""
    async with db.transaction(pool) as conn:
        await conn.execute(_LOCK, QUOTA_LOCK, tenant)
        row = await conn.fetchrow(_TAKE, tenant, hold_id, kind, units, quota)
    return Committed(int(row["succeeded"]), int(row["held"]), bool(row["taken"]))


@map_db_errors()
async def held(pool: asyncpg.Pool, tenant: str) -> int:
    """The units `tenant` holds now (`quota_held`, what the quota check reads)."""
    units = await pool.fetchval("SELECT units FROM quota_held WHERE tenant_id = $1", tenant)
    return int(units or 0)


@map_db_errors()
async def release(pool: asyncpg.Pool, hold_id: str) -> None:
    """Give back a hold whose submission did not reach the log, unless the projector has
    seen it there after all (then the work exists and its end releases it)."""
    await pool.execute(
        f"DELETE FROM quota_holds WHERE id = $1 AND state = '{HoldState.PENDING}'", hold_id
    )


@dataclass(frozen=True)
class PendingHold:
    id: str
    kind: HoldKind
    created_at: dt.datetime


@map_db_errors()
async def stale_pending(
    conn: asyncpg.Connection, older_than: float, limit: int
) -> list[PendingHold]:
    """Holds still `pending` `older_than` seconds after they were taken, oldest first."""
    rows = await conn.fetch(
        f"SELECT id, kind, created_at FROM quota_holds WHERE state = '{HoldState.PENDING}' "
        "AND created_at < clock_timestamp() - make_interval(secs => $1::double precision) "
        "ORDER BY created_at LIMIT $2",
        older_than,
        limit,
    )
    return [PendingHold(r["id"], HoldKind(r["kind"]), r["created_at"]) for r in rows]


@map_db_errors()
async def forget_pending(conn: asyncpg.Connection, hold: PendingHold) -> bool:
    """Release a pending hold the log has no submission for; a hold taken again since
    (same id, newer `created_at`) stays. True if it was released."""
    status = await conn.execute(
        f"DELETE FROM quota_holds WHERE id = $1 AND state = '{HoldState.PENDING}' "
        "AND created_at = $2",
        hold.id,
        hold.created_at,
    )
    return bool(status != "DELETE 0")


_JOB_ENDED = ", ".join(f"'{status}'" for status in sorted(TERMINAL))
_BATCH_ENDED = ", ".join(f"'{status}'" for status in sorted(BATCH_TERMINAL))


@map_db_errors()
async def release_ended(conn: asyncpg.Connection) -> int:
    """Release every hold whose job or batch the projection shows ended (the projector
    releases them as they end: any found here slipped past it); how many."""
    jobs = await conn.execute(
        f"DELETE FROM quota_holds AS h USING jobs AS j WHERE h.kind = '{HoldKind.JOB}' "
        f"AND j.id = h.id AND j.status IN ({_JOB_ENDED})"
    )
    batches = await conn.execute(
        f"DELETE FROM quota_holds AS h USING batches AS b WHERE h.kind = '{HoldKind.BATCH}' "
        f"AND b.id = h.id AND b.status IN ({_BATCH_ENDED})"
    )
    return int(jobs.split()[-1]) + int(batches.split()[-1])
