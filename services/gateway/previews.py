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
"""

from __future__ import annotations

import asyncpg

from services.core.database.db import map_db_errors
from services.core.model.errors import RateLimited
from services.core.model.events import JobSubmitted
from services.gateway.auth import Caller
from services.gateway.postgres import unavailable_without_postgres

_UNFINISHED = (
    "SELECT id FROM jobs WHERE tenant_id = $1 AND status IN ('queued', 'running') "
    "AND preview IS NOT NULL AND ($2::text IS NULL OR preview = $2) "
    "AND id <> $3"
)


def preview_of(caller: Caller, template_id: str | None) -> str:
    """What a preview previews, through which key: its supersede key (`template_id` the
    stored template previewed, or whose draft is; None for an inline template)."""
    return f"{caller.key_id or '-'}:{template_id or 'inline'}"


@map_db_errors()
async def _unfinished(pool: asyncpg.Pool, tenant: str, key: str | None, job_id: str) -> list[str]:
    rows = await pool.fetch(_UNFINISHED, tenant, key, job_id)
    return [str(row["id"]) for row in rows]


async def admit(pool: asyncpg.Pool, event: JobSubmitted, limit: int) -> list[str]:
    """The unfinished previews the new one supersedes (to cancel once it is in the log);
    `RateLimited` if the tenant has `limit` unfinished others (`preview_limit`)."""
    assert event.preview is not None
    with unavailable_without_postgres("previews are unavailable"):
        superseded = await _unfinished(pool, event.tenant, event.preview, event.job_id)
        others = await _unfinished(pool, event.tenant, None, event.job_id)
    if len(others) - len(superseded) >= limit:
        raise RateLimited(
            f"{limit} previews are still rendering; wait for one to end",
            retry_after=1,
        )
    return superseded
