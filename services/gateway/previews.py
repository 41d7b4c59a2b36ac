"""Template previews (`"preview": true` on `POST /jobs`): an editor's renders, which run
on the same renderers as jobs but are not work the tenant pays for.

A preview is never billed (the projector counts no usage for it, and it holds no quota),
never listed by `GET /jobs`, at most `PRESSROOM_PREVIEW_LIMIT` unfinished per tenant, and
superseded: a newer preview of the same template through the same API key cancels the
older ones still unfinished. Its `preview` value on the log says which: the key's id and
the template previewed: the stored template's id, for an inline draft too when it takes
that template's files (`template_files.template_id`, as the console's editor sends its
drafts), so two templates edited through one key do not cancel each other's previews;
`inline` for a template given in the request with no stored template behind it.

Admission is atomic across gateways: under a per-tenant advisory lock, in one
transaction, the unfinished previews are counted from the projection's `jobs` rows and
from `preview_admissions`, the previews admitted but not projected yet, and the new one
is recorded there. An admission counts until its job's row exists (then the row does) or
for `ADMITTED_FOR` seconds at most, so a projector far behind does not hold the tenant's
previews off for ever; a submission the log did not take withdraws its own.
"""

from __future__ import annotations

import contextlib

import asyncpg

from services.core.database.db import map_db_errors
from services.core.model.errors import RateLimited, Unavailable
from services.core.model.events import JobSubmitted
from services.gateway.auth import Caller
from services.gateway.postgres import unavailable_without_postgres

ADMITTED_FOR = 120.0
"""Seconds an admitted preview counts while its job has no row yet."""

_LOCK_CLASS = 0x70726576  # "prev": with the tenant's hash, one admission at a time

_LOCK = "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))"

# The statuses are `status.UNFINISHED`, spelt as the partial index's predicate
# (`jobs_unfinished_previews`) so the index serves the query.
_UNFINISHED = """
SELECT id, preview FROM jobs
WHERE tenant_id = $1 AND preview IS NOT NULL AND status IN ('queued', 'running')
  AND id <> $2
UNION ALL
SELECT a.job_id, a.preview FROM preview_admissions a
WHERE a.tenant_id = $1 AND a.job_id <> $2
  AND a.admitted_at >= now() - make_interval(secs => $3)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id)
"""

_CLEAR = """
DELETE FROM preview_admissions a
WHERE a.tenant_id = $1 AND (a.admitted_at < now() - make_interval(secs => $2)
  OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id))
"""

_RECORD = """
INSERT INTO preview_admissions (job_id, tenant_id, preview, admitted_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (job_id) DO UPDATE SET preview = EXCLUDED.preview, admitted_at = now()
"""


def preview_of(caller: Caller, template_id: str | None) -> str:
    """What a preview previews, through which key: its supersede key (`template_id` the
    stored template previewed, or whose draft is; None for an inline template)."""
    return f"{caller.key_id or '-'}:{template_id or 'inline'}"


@map_db_errors()
async def _admitted(pool: asyncpg.Pool, event: JobSubmitted, limit: int) -> list[str]:
    """Count and record under the tenant's lock (see the module's docstring)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_LOCK, _LOCK_CLASS, event.tenant)
        await conn.execute(_CLEAR, event.tenant, ADMITTED_FOR)
        rows = await conn.fetch(_UNFINISHED, event.tenant, event.job_id, ADMITTED_FOR)
        unfinished = {str(row["id"]): str(row["preview"]) for row in rows}
        superseded = [job for job, key in unfinished.items() if key == event.preview]
        if len(unfinished) - len(superseded) >= limit:
            raise RateLimited(
                f"{limit} previews are still rendering; wait for one to end",
                retry_after=1,
            )
        await conn.execute(_RECORD, event.job_id, event.tenant, event.preview)
    return superseded


async def admit(pool: asyncpg.Pool, event: JobSubmitted, limit: int) -> list[str]:
    """The unfinished previews the new one supersedes (to cancel once it is in the log);
    `RateLimited` if the tenant has `limit` unfinished others (`preview_limit`). The new
    one counts from now on, for every gateway."""
    assert event.preview is not None
    with unavailable_without_postgres("previews are unavailable"):
        return await _admitted(pool, event, limit)


@map_db_errors()
async def _withdrawn(pool: asyncpg.Pool, job_id: str) -> None:
    await pool.execute("DELETE FROM preview_admissions WHERE job_id = $1", job_id)


async def withdraw(pool: asyncpg.Pool, job_id: str) -> None:
    """Stop counting an admitted preview the log did not take; if PostgreSQL is away it
    stops counting after `ADMITTED_FOR` anyway."""
    with contextlib.suppress(Unavailable):
        await _withdrawn(pool, job_id)
