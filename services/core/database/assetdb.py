"""Stored assets in PostgreSQL: every version of a tenant's file by name, and the files
a stored template version bundles. The bytes are in storage (`core/objectstore/filestore`); these
rows say which of them a tenant has under which name.

Every statement names the tenant: one tenant's rows are never read, counted, used or
deleted by another's request.
"""

from __future__ import annotations

import datetime as dt

import asyncpg
import msgspec

from services.core.database import fileclaims
from services.core.database.db import fetch_typed, map_db_errors, typed
from services.core.model.files import FileRef

ASSET_LOCK_CLASS = 0x617374  # "ast": with hashtext(tenant), one advisory lock per tenant


class AssetVersion(msgspec.Struct, kw_only=True, frozen=True):
    """One stored version of a tenant's asset."""

    name: str
    version: int
    digest: str
    size: int
    content_type: str
    created_at: dt.datetime

    def ref(self) -> FileRef:
        return FileRef(
            name=self.name, digest=self.digest, size=self.size, content_type=self.content_type
        )


class AssetSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A stored asset in a list: its latest version, and how many it has."""

    name: str
    latest_version: int
    versions: int
    size: int
    content_type: str
    updated_at: dt.datetime


class Usage(msgspec.Struct, kw_only=True, frozen=True):
    """What a tenant's stored versions hold: how many, how many bytes."""

    files: int
    bytes: int


class Stored(msgspec.Struct, kw_only=True, frozen=True):
    """The outcome of storing one file: its version, and whether it is a new one."""

    version: AssetVersion
    new: bool


_USAGE = """
SELECT count(*) AS files, COALESCE(sum(size), 0)::bigint AS bytes FROM assets
WHERE tenant_id = $1
"""

_LATEST = """
SELECT name, version, digest, size, content_type, created_at FROM assets
WHERE tenant_id = $1 AND name = $2 ORDER BY version DESC LIMIT 1
"""

_INSERT = """
INSERT INTO assets (tenant_id, name, version, digest, size, content_type, created_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
RETURNING name, version, digest, size, content_type, created_at
"""


class QuotaFull(Exception):
    """Storing would take the tenant over its quota; `usage` is what it holds now."""

    def __init__(self, usage: Usage) -> None:
        super().__init__("asset quota full")
        self.usage = usage


@map_db_errors()
async def store_versions(
    pool: asyncpg.Pool, tenant: str, refs: list[FileRef], max_files: int, max_bytes: int
) -> list[Stored]:
    """Record `refs` as the tenant's assets, all or none: a name whose latest version
    has the same digest keeps that version, any other gets the next one. `QuotaFull` if
    the new versions would take the tenant over `max_files` versions or `max_bytes`.
    Writers of one tenant queue on a lock, so two uploads cannot both squeeze in."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))", ASSET_LOCK_CLASS, tenant
        )
        usage = typed(await conn.fetchrow(_USAGE, tenant), Usage)
        stored: list[Stored] = []
        adding: list[tuple[FileRef, int]] = []
        for ref in refs:
            latest = await conn.fetchrow(_LATEST, tenant, ref.name)
            if latest is not None and latest["digest"] == ref.digest:
                stored.append(Stored(version=typed(latest, AssetVersion), new=False))
                continue
            adding.append((ref, 1 if latest is None else latest["version"] + 1))
        files = usage.files + len(adding)
        size = usage.bytes + sum(ref.size for ref, _ in adding)
        if adding and (files > max_files or size > max_bytes):
            raise QuotaFull(usage)
        for ref, number in adding:
            row = await conn.fetchrow(
                _INSERT, tenant, ref.name, number, ref.digest, ref.size, ref.content_type
            )
            stored.append(Stored(version=typed(row, AssetVersion), new=True))
    order = {ref.name: index for index, ref in enumerate(refs)}
    return sorted(stored, key=lambda s: order[s.version.name])


@map_db_errors()
async def usage(pool: asyncpg.Pool, tenant: str) -> Usage:
    return typed(await pool.fetchrow(_USAGE, tenant), Usage)


@map_db_errors()
async def list_assets(
    pool: asyncpg.Pool, tenant: str, limit: int, offset: int
) -> list[AssetSummary]:
    """A tenant's assets by name, each with its latest version."""
    return await fetch_typed(
        pool,
        AssetSummary,
        """
        SELECT DISTINCT ON (name) name, version AS latest_version,
               count(*) OVER (PARTITION BY name) AS versions, size, content_type,
               created_at AS updated_at
        FROM assets WHERE tenant_id = $1
        ORDER BY name, version DESC
        LIMIT $2 OFFSET $3
        """,
        tenant,
        limit,
        offset,
    )


@map_db_errors()
async def asset_versions(pool: asyncpg.Pool, tenant: str, name: str) -> list[AssetVersion]:
    """Every version of a tenant's asset, oldest first (none: no such asset)."""
    return await fetch_typed(
        pool,
        AssetVersion,
        "SELECT name, version, digest, size, content_type, created_at FROM assets "
        "WHERE tenant_id = $1 AND name = $2 ORDER BY version",
        tenant,
        name,
    )


@map_db_errors()
async def find_versions(
    pool: asyncpg.Pool, tenant: str, wanted: list[tuple[str, int | None]]
) -> dict[tuple[str, int | None], AssetVersion]:
    """The tenant's versions that `wanted` names ((name, version), None for the latest);
    a pair the tenant has nothing for is left out."""
    if not wanted:
        return {}
    rows = await pool.fetch(
        """
        SELECT DISTINCT ON (w.name, w.version) w.name AS wanted_name,
               w.version AS wanted_version, a.name, a.version, a.digest, a.size,
               a.content_type, a.created_at
        FROM unnest($2::text[], $3::integer[]) AS w (name, version)
        JOIN assets a ON a.tenant_id = $1 AND a.name = w.name
                     AND (w.version IS NULL OR a.version = w.version)
        ORDER BY w.name, w.version, a.version DESC
        """,
        tenant,
        [name for name, _ in wanted],
        [version for _, version in wanted],
    )
    return {(row["wanted_name"], row["wanted_version"]): typed(row, AssetVersion) for row in rows}


@map_db_errors()
async def delete_asset(pool: asyncpg.Pool, tenant: str, name: str) -> int:
    """Delete every version of the tenant's asset `name`, and mark their digests for the
    conductor's sweep (`core/database/fileclaims`: the bytes go once nothing needs them): how many
    versions there were."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))", ASSET_LOCK_CLASS, tenant
        )
        rows = await conn.fetch(
            "DELETE FROM assets WHERE tenant_id = $1 AND name = $2 RETURNING digest", tenant, name
        )
        await fileclaims.release(conn, tenant, [row["digest"] for row in rows])
    return len(rows)


@map_db_errors()
async def template_files(
    pool: asyncpg.Pool, tenant: str, template_id: str, version: int
) -> list[FileRef]:
    """The files a version of a tenant's template bundles, by name."""
    return await fetch_typed(
        pool,
        FileRef,
        "SELECT name, digest, size, content_type FROM template_files "
        "WHERE tenant_id = $1 AND template_id = $2 AND version = $3 ORDER BY name",
        tenant,
        template_id,
        version,
    )
