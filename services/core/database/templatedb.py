"""Stored templates in PostgreSQL: their versions, written atomically, and the reads of
them (`GET /templates`, a job's `template_id`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import asyncpg
import msgspec

from services.core.database.db import fetch_typed, map_db_errors, typed
from services.core.model.files import FileRef


class TemplateSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A stored template in a list: its latest version and when it was stored."""

    id: str
    name: str
    latest_version: int
    updated_at: dt.datetime


class VersionStamp(msgspec.Struct, kw_only=True, frozen=True):
    """Which version of a template, stored when."""

    version: int
    created_at: dt.datetime


class TemplateVersion(VersionStamp, kw_only=True, frozen=True):
    """One version of a stored template, with the template's id and name."""

    id: str
    name: str
    body: str
    header: str | None
    footer: str | None


TEMPLATE_LOCK_CLASS = 0x74706C  # "tpl": with hashtext(id), one advisory lock per template

# Writers of one template queue on this lock first. The upsert alone is not enough: while
# the name is new, concurrent speculative inserts meet on two unique indexes (id and name)
# and PostgreSQL can answer "deadlock detected".
_LOCK_TEMPLATE = "SELECT pg_advisory_xact_lock($1, hashtext($2))"

# The upsert holds the template's row lock until the transaction ends, so each writer sees
# the previous one's `latest_version`. clock_timestamp(), not now(): now() is the
# transaction's start, which for a writer that waited can be earlier than the version it
# follows.
_NEXT_VERSION = """
INSERT INTO templates AS t (id, tenant_id, name, latest_version, created_at, updated_at)
VALUES ($1, $3, $2, 1, clock_timestamp(), clock_timestamp())
ON CONFLICT (id) DO UPDATE
    SET latest_version = t.latest_version + 1, updated_at = clock_timestamp()
RETURNING latest_version, updated_at
"""

_INSERT_VERSION = """
INSERT INTO template_versions (template_id, version, body, header, footer, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
"""


_INSERT_FILE = """
INSERT INTO template_files (tenant_id, template_id, version, name, digest, size, content_type)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""


def _file_row(ref: FileRef) -> tuple[str, str, int, str]:
    return ref.name, ref.digest, ref.size, ref.content_type


@map_db_errors()
async def create_template_version(
    pool: asyncpg.Pool,
    tenant: str,
    template_id: str,
    name: str,
    body: str,
    header: str | None,
    footer: str | None,
    files: Sequence[FileRef] = (),
    only_new: bool = False,
) -> VersionStamp | None:
    """Store the next version of template `template_id` (version 1 if the name is new),
    with the `files` it bundles; with `only_new`, only version 1 (None, nothing stored,
    if the template exists).

    Returns the version stored and when. Atomic: two concurrent calls for one template get
    consecutive versions, never the same one (with `only_new`, one of them gets None).
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_LOCK_TEMPLATE, TEMPLATE_LOCK_CLASS, template_id)
        if only_new and await conn.fetchval("SELECT 1 FROM templates WHERE id = $1", template_id):
            return None
        row = await conn.fetchrow(_NEXT_VERSION, template_id, name, tenant)
        version, created_at = row["latest_version"], row["updated_at"]
        await conn.execute(_INSERT_VERSION, template_id, version, body, header, footer, created_at)
        await conn.executemany(
            _INSERT_FILE, [(tenant, template_id, version, *_file_row(ref)) for ref in files]
        )
    return VersionStamp(version=version, created_at=created_at)


@map_db_errors()
async def list_templates(
    pool: asyncpg.Pool, tenant: str, limit: int, offset: int
) -> list[TemplateSummary]:
    """A tenant's templates, most recently updated first."""
    return await fetch_typed(
        pool,
        TemplateSummary,
        "SELECT id, name, latest_version, updated_at FROM templates WHERE tenant_id = $3 "
        "ORDER BY updated_at DESC, id LIMIT $1 OFFSET $2",
        limit,
        offset,
        tenant,
    )


@map_db_errors()
async def get_template_version(
    pool: asyncpg.Pool, tenant: str, template_id: str, version: int | None
) -> TemplateVersion | None:
    """One version of a tenant's template (the latest if `version` is None), with the
    template's name; None if the tenant has no such template or version."""
    row = await pool.fetchrow(
        """
        SELECT t.id, t.name, v.version, v.body, v.header, v.footer, v.created_at
        FROM templates t
        JOIN template_versions v
          ON v.template_id = t.id AND v.version = COALESCE($2::integer, t.latest_version)
        WHERE t.id = $1 AND t.tenant_id = $3
        """,
        template_id,
        version,
        tenant,
    )
    return typed(row, TemplateVersion) if row is not None else None


@map_db_errors()
async def template_versions(
    pool: asyncpg.Pool, tenant: str, template_id: str
) -> list[VersionStamp]:
    """Every version of a tenant's template, oldest first."""
    return await fetch_typed(
        pool,
        VersionStamp,
        "SELECT v.version, v.created_at FROM template_versions v "
        "JOIN templates t ON t.id = v.template_id AND t.tenant_id = $2 "
        "WHERE v.template_id = $1 ORDER BY v.version",
        template_id,
        tenant,
    )


@map_db_errors()
async def template_id_named(pool: asyncpg.Pool, tenant: str, name: str) -> str | None:
    """The id of `tenant`'s template called `name`; None if the tenant has none (another
    tenant's template of that name is never found)."""
    found: str | None = await pool.fetchval(
        "SELECT id FROM templates WHERE tenant_id = $1 AND name = $2", tenant, name
    )
    return found


@map_db_errors()
async def template_id_taken(pool: asyncpg.Pool, template_id: str, tenant: str, name: str) -> bool:
    """Whether a template other than `tenant`'s called `name` has id `template_id` (a
    renamed one keeps the id of its first name, so a new template of that name needs
    another; one of that name, stored meanwhile, is the same template)."""
    found = await pool.fetchval(
        "SELECT 1 FROM templates WHERE id = $1 AND NOT (tenant_id = $2 AND name = $3)",
        template_id,
        tenant,
        name,
    )
    return found is not None


@map_db_errors()
async def rename_template(
    pool: asyncpg.Pool, tenant: str, template_id: str, name: str
) -> TemplateSummary | None:
    """Give `tenant`'s template `template_id` a new name, its id and versions kept; None
    if the tenant has no such template. `NameTaken` if another of its templates has it."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_LOCK_TEMPLATE, TEMPLATE_LOCK_CLASS, template_id)
        try:
            row = await conn.fetchrow(
                "UPDATE templates SET name = $3, updated_at = clock_timestamp() "
                "WHERE id = $1 AND tenant_id = $2 "
                "RETURNING id, name, latest_version, updated_at",
                template_id,
                tenant,
                name,
            )
        except asyncpg.UniqueViolationError:
            raise NameTaken(name) from None
    return typed(row, TemplateSummary) if row is not None else None


class NameTaken(Exception):
    """Another template of the tenant already has the name."""
