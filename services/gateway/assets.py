"""Stored assets: files a tenant stores once (`POST /assets`) and its jobs name
(`"assets": ["logo.png", "brand.woff2@2"]`), and the files of a job put together.

An asset is a name with versions: the same name stored again with other bytes is the
next version, with the same bytes the same one. The bytes are in storage under the
tenant and their digest (`core/objectstore/filestore`), the versions in PostgreSQL
(`core/database/assetdb`).
Quotas per tenant: `PRESSROOM_ASSET_QUOTA_FILES` versions, `PRESSROOM_ASSET_QUOTA_BYTES`
bytes. Reading them needs `templates:read`, storing and deleting `templates:write`:
assets are configuration, as templates are.

A job's files (`job_files`) are its own (the parts of a multipart `POST /jobs`), the
stored assets it names, and its stored template's bundle, in that order of precedence
by name; together at most `PRESSROOM_MAX_FILES` files and `PRESSROOM_MAX_UPLOAD_BYTES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiohttp import web

from services.core.database import assetdb, fileclaims
from services.core.database.fileclaims import ClaimKind
from services.core.model.errors import AssetMissing, NotFound, PayloadTooLarge, RequestError
from services.core.model.files import FileRef, blob_key
from services.core.objectstore.filestore import checked_name, file_ref
from services.core.objectstore.storage import Storage
from services.core.runtime.settings import Settings
from services.gateway import answers, assetanswers
from services.gateway.auth import caller_of, guarded
from services.gateway.keys import POOL, SETTINGS, STORAGE
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import MAX_VERSION, int_param
from services.gateway.uploads import UploadLimits, read_form

LIST_LIMIT = 50
MAX_LIST_LIMIT = 100
MAX_OFFSET = 2**31 - 1

_VERSIONED = re.compile(r"(?P<name>.+)@(?P<version>[0-9]{1,10})")
"""A stored asset named with its version: `brand.woff2@2`."""


def reference(text: str, field: str) -> tuple[str, int | None]:
    """A job's `assets` entry as (name, version or None for the latest)."""
    found = _VERSIONED.fullmatch(text)
    name, version = (found["name"], int(found["version"])) if found else (text, None)
    if version is not None and not 1 <= version <= MAX_VERSION:
        raise RequestError(f"{field}: version must be from 1 to {MAX_VERSION}", field=field)
    return checked_name(name, field), version


def _version_view(row: assetdb.AssetVersion) -> assetanswers.AssetVersion:
    return assetanswers.AssetVersion(
        name=row.name,
        version=row.version,
        digest=row.digest,
        size=row.size,
        content_type=row.content_type,
        created_at=row.created_at.isoformat(),
    )


def _stored_view(stored: assetdb.Stored) -> assetanswers.StoredAsset:
    row = stored.version
    return assetanswers.StoredAsset(
        name=row.name,
        version=row.version,
        digest=row.digest,
        size=row.size,
        content_type=row.content_type,
        created_at=row.created_at.isoformat(),
        new=stored.new,
    )


def _quota_full(settings: Settings, usage: assetdb.Usage, files: int, size: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"storing {files} more file(s) of {size} bytes would go over the tenant's asset quota "
        f"of {settings.asset_quota_files} versions (PRESSROOM_ASSET_QUOTA_FILES) and "
        f"{settings.asset_quota_bytes} bytes (PRESSROOM_ASSET_QUOTA_BYTES): it stores "
        f"{usage.files} versions of {usage.bytes} bytes; delete some first",
        field="files",
    )


async def store_assets(request: web.Request) -> web.Response:
    """`POST /assets`: store each file of a multipart request as the next version of
    its name (or the same version, for the same bytes). All or none: a refused name,
    type or quota stores nothing."""
    settings, pool = request.app[SETTINGS], request.app[POOL]
    tenant = caller_of(request).tenant
    upload = await read_form(request, UploadLimits.of(settings), fields=())
    if not upload.files:
        raise RequestError("the request has no file part to store", field="files")
    for name, _ in upload.files:
        if _VERSIONED.fullmatch(name):
            raise RequestError(
                f"the asset name {name!r} must not end in @ and a number (jobs name "
                "versions that way)",
                field=name,
            )
    refs = [file_ref(name, data) for name, data in upload.files]
    # Claimed first, bytes last: no sweep deletes them between (`core/database/fileclaims`).
    with unavailable_without_postgres("cannot store the assets"):
        await fileclaims.claim(
            pool, tenant, ClaimKind.STORE, "assets", [ref.digest for ref in refs]
        )
        try:
            stored = await assetdb.store_versions(
                pool, tenant, refs, settings.asset_quota_files, settings.asset_quota_bytes
            )
        except assetdb.QuotaFull as full:
            raise _quota_full(settings, full.usage, len(refs), upload.size) from None
    await _put_all(request.app[STORAGE], tenant, refs, [data for _, data in upload.files])
    body = assetanswers.AssetsStored(assets=[_stored_view(s) for s in stored])
    return answers.respond(body, 201)


async def _put_all(storage: Storage, tenant: str, refs: list[FileRef], data: list[bytes]) -> None:
    for ref, content in zip(refs, data, strict=True):
        await storage.put(blob_key(tenant, ref.digest), content, ref.content_type)


async def list_assets(request: web.Request) -> web.Response:
    """`GET /assets?limit&offset`: the tenant's assets by name, and its usage."""
    limit = int_param(request.query, "limit", 1, MAX_LIST_LIMIT) or LIST_LIMIT
    offset = int_param(request.query, "offset", 0, MAX_OFFSET) or 0
    pool, tenant = request.app[POOL], caller_of(request).tenant
    with unavailable_without_postgres("assets are unavailable"):
        rows = await assetdb.list_assets(pool, tenant, limit, offset)
        usage = await assetdb.usage(pool, tenant)
    listed = [
        assetanswers.AssetSummary(
            name=r.name,
            latest_version=r.latest_version,
            versions=r.versions,
            size=r.size,
            content_type=r.content_type,
            updated_at=r.updated_at.isoformat(),
        )
        for r in rows
    ]
    next_offset = offset + len(rows) if len(rows) == limit else None
    page = assetanswers.AssetPage(
        assets=listed,
        limit=limit,
        offset=offset,
        next_offset=next_offset,
        files=usage.files,
        bytes=usage.bytes,
    )
    return answers.respond(page)


def _name_of(request: web.Request) -> str:
    name = request.match_info["name"]
    try:
        return checked_name(name, "name")
    except RequestError:
        raise NotFound(f"no asset {name!r}") from None


async def get_asset(request: web.Request) -> web.Response:
    """`GET /assets/{name}`: every version of the asset; 404 if the tenant has none."""
    name = _name_of(request)
    with unavailable_without_postgres("assets are unavailable"):
        rows = await assetdb.asset_versions(request.app[POOL], caller_of(request).tenant, name)
    if not rows:
        raise NotFound(f"no asset {name!r}")
    return answers.respond(assetanswers.Asset(name=name, versions=[_version_view(r) for r in rows]))


async def delete_asset(request: web.Request) -> web.Response:
    """`DELETE /assets/{name}`: delete every version of the asset at once; its bytes go
    with the conductor's next sweep, once no other asset, template or unfinished job
    needs them (`core/database/fileclaims`); 404 if the tenant has none."""
    name = _name_of(request)
    tenant = caller_of(request).tenant
    with unavailable_without_postgres("cannot delete the asset"):
        count = await assetdb.delete_asset(request.app[POOL], tenant, name)
    if not count:
        raise NotFound(f"no asset {name!r}")
    return answers.respond(assetanswers.AssetRemoved(name=name, versions=count))


async def named_assets(request: web.Request, tenant: str, names: list[str]) -> list[FileRef]:
    """The stored assets a job names (`assets[i]`, `name` or `name@version`), in order;
    `AssetMissing` naming the field of the first the tenant does not have."""
    wanted = [reference(text, f"assets[{index}]") for index, text in enumerate(names)]
    with unavailable_without_postgres("cannot resolve assets"):
        found = await assetdb.find_versions(request.app[POOL], tenant, wanted)
    refs = []
    for index, pair in enumerate(wanted):
        row = found.get(pair)
        if row is None:
            what = f"version {pair[1]} of " if pair[1] is not None else ""
            raise AssetMissing(
                f"assets[{index}]: the tenant has no stored {what}asset {pair[0]!r}",
                field=f"assets[{index}]",
            )
        refs.append(row.ref())
    return refs


def merged(settings: Settings, *layers: Iterable[FileRef]) -> list[FileRef]:
    """The files of a job from `layers`, the first one's winning by name; `PayloadTooLarge`
    over `PRESSROOM_MAX_FILES` or `PRESSROOM_MAX_UPLOAD_BYTES`."""
    files: dict[str, FileRef] = {}
    for layer in layers:
        for ref in layer:
            files.setdefault(ref.name, ref)
    if len(files) > settings.max_files:
        raise PayloadTooLarge(
            f"the job has {len(files)} files, more than {settings.max_files} (PRESSROOM_MAX_FILES)",
            field="assets",
        )
    size = sum(ref.size for ref in files.values())
    if size > settings.max_upload_bytes:
        raise PayloadTooLarge(
            f"the job's files are {size} bytes together, more than {settings.max_upload_bytes} "
            "(PRESSROOM_MAX_UPLOAD_BYTES)",
            field="assets",
        )
    return list(files.values())


def add_routes(app: web.Application) -> None:
    app.router.add_post("/assets", guarded("templates:write", store_assets))
    app.router.add_get("/assets", guarded("templates:read", list_assets))
    app.router.add_get("/assets/{name:.+}", guarded("templates:read", get_asset))
    app.router.add_delete("/assets/{name:.+}", guarded("templates:write", delete_asset))
