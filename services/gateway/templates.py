"""Stored templates: HTTP routes to create and read them, and resolving a job's
`template_id` into the template it renders.

Templates are configuration, not job events: the gateway writes them to PostgreSQL
directly, every version is kept, and a job records which version it rendered. They are
resolved when a job is submitted, so a new version never changes an accepted job.
"""

from __future__ import annotations

import itertools
import uuid
from typing import TypeVar

import asyncpg
from aiohttp import web
from msgspec.structs import replace

from services.core.database import assetdb, templatedb
from services.core.model import events, pageoptions
from services.core.model.errors import Conflict, NotFound, RequestError
from services.core.model.files import FileRef, blob_key
from services.core.model.subjects import DEFAULT_TENANT
from services.gateway import answers, templatefiles
from services.gateway.auth import caller_of, guarded
from services.gateway.keys import COMPILER, POOL, SETTINGS, STORAGE
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import (
    MAX_VERSION,
    TEMPLATE_ID,
    int_param,
)
from services.gateway.templaterequests import parse_rename

# Derives a template's id from its name; fixed, so a name keeps its id on every pod and
# after every restart.
_TEMPLATE_NAMESPACE = uuid.UUID("0b9e6c3a-58d2-4f0e-8c7a-2d4e1f6a9b35")

LIST_LIMIT = 50
MAX_LIST_LIMIT = 100
MAX_OFFSET = 2**31 - 1


def template_id_for(tenant: str, name: str) -> str:
    """The stable id of `tenant`'s template called `name` (two tenants' templates of one
    name are two templates)."""
    if tenant == DEFAULT_TENANT:
        return uuid.uuid5(_TEMPLATE_NAMESPACE, name).hex  # the id it had before tenants
    return uuid.uuid5(_TEMPLATE_NAMESPACE, f"{tenant}\n{name}").hex


async def _id_for_name(pool: asyncpg.Pool, tenant: str, name: str, new: bool) -> str:
    """The id of `tenant`'s template called `name`: its own if it has one (a renamed
    template keeps its first id; `Conflict` if the request wants a `new` one), else the one
    derived from the name, or, if a renamed template holds that, the first free id derived
    from the name and a counter (derived, so two concurrent first posts of one name still
    meet on one id and its lock, where the race for a `new` name is decided)."""
    with unavailable_without_postgres("cannot store the template"):
        found = await templatedb.template_id_named(pool, tenant, name)
        if found is not None and new:
            raise _taken(name)
        if found is not None:
            return found
        candidate = template_id_for(tenant, name)
        for attempt in itertools.count(1):
            if not await templatedb.template_id_taken(pool, candidate, tenant, name):
                return candidate
            candidate = template_id_for(tenant, f"{name}\n{attempt}")
    raise AssertionError("unreachable")  # itertools.count() never ends


def _taken(name: str) -> Conflict:
    return Conflict(f"a template is named {name!r} already", field="name")


async def create_template(request: web.Request) -> web.Response:
    """`POST /templates`: store a new template, or the next version of one with that name
    (a 409 instead with `"new": true`), once its body, header and footer compile (within
    the tenant's share of the gateway's template workers: `compiles.py`). As multipart,
    the part `template` is the JSON and the other parts are files the version bundles
    (`templatefiles`); `keep_files` keeps an earlier version's files by reference."""
    tenant = caller_of(request).tenant
    template, own = await templatefiles.read_template(request)
    texts = {"body": template.body, "header": template.header, "footer": template.footer}
    await request.app[COMPILER].check(tenant, texts)
    template_id = await _id_for_name(request.app[POOL], tenant, template.name, template.new)
    files = await templatefiles.bundle_of(request, tenant, template_id, template, own)
    await templatefiles.store_own(request, tenant, template_id, files)
    with unavailable_without_postgres("cannot store the template"):
        created = await templatedb.create_template_version(
            request.app[POOL],
            tenant,
            template_id,
            template.name,
            template.body,
            template.header,
            template.footer,
            [ref for ref, _ in files],
            only_new=template.new,
        )
    if created is None:  # another request stored that name since `_id_for_name` looked
        raise _taken(template.name)
    version = created.version
    body = answers.TemplateCreated(
        id=template_id,
        name=template.name,
        version=version,
        created_at=answers.iso(created.created_at),
    )
    location = f"/templates/{template_id}?version={version}"
    return answers.respond(body, 201, {"Location": location})


async def list_templates(request: web.Request) -> web.Response:
    """`GET /templates?limit&offset`: templates, most recently updated first."""
    limit = int_param(request.query, "limit", 1, MAX_LIST_LIMIT) or LIST_LIMIT
    offset = int_param(request.query, "offset", 0, MAX_OFFSET) or 0
    with unavailable_without_postgres("templates are unavailable"):
        rows = await templatedb.list_templates(
            request.app[POOL], caller_of(request).tenant, limit, offset
        )
    listed = [
        answers.TemplateSummary(
            id=r.id,
            name=r.name,
            latest_version=r.latest_version,
            updated_at=answers.iso(r.updated_at),
        )
        for r in rows
    ]
    # A full page may have a successor; a short one is the last.
    next_offset = offset + len(rows) if len(rows) == limit else None
    return answers.respond(
        answers.TemplatePage(templates=listed, limit=limit, offset=offset, next_offset=next_offset)
    )


def _template_view(
    row: templatedb.TemplateVersion,
    versions: list[templatedb.VersionStamp],
    files: list[tuple[FileRef, str]],
) -> answers.Template:
    return answers.Template(
        id=row.id,
        name=row.name,
        version=row.version,
        body=row.body,
        header=row.header,
        footer=row.footer,
        created_at=answers.iso(row.created_at),
        versions=[
            answers.VersionStamp(version=v.version, created_at=answers.iso(v.created_at))
            for v in versions
        ],
        files=[
            answers.BundledFile(
                name=f.name, digest=f.digest, size=f.size, content_type=f.content_type, url=url
            )
            for f, url in files
        ],
    )


async def get_template(request: web.Request) -> web.Response:
    """`GET /templates/{id}[?version=N]`: one version (the latest by default) and the list
    of all versions; 404 if the template or the version does not exist."""
    template_id = request.match_info["template_id"]
    version = int_param(request.query, "version", 1, MAX_VERSION)
    if not TEMPLATE_ID.fullmatch(template_id):
        raise NotFound(f"no template {template_id!r}")
    pool, tenant = request.app[POOL], caller_of(request).tenant
    with unavailable_without_postgres("templates are unavailable"):
        row = await templatedb.get_template_version(pool, tenant, template_id, version)
        versions = await templatedb.template_versions(pool, tenant, template_id) if row else []
        files = await assetdb.template_files(pool, tenant, template_id, row.version) if row else []
    if row is None:
        which = f"version {version} of template" if version is not None else "template"
        raise NotFound(f"no {which} {template_id!r}")
    storage, ttl = request.app[STORAGE], request.app[SETTINGS].url_ttl
    signed = [(f, await storage.url(blob_key(tenant, f.digest), ttl)) for f in files]
    return answers.respond(_template_view(row, versions, signed))


async def _missing(
    pool: asyncpg.Pool, tenant: str, template_id: str, version: int | None
) -> RequestError:
    """Why a lookup found nothing: an unknown template, or an unknown version of one."""
    if version is not None and await templatedb.template_versions(pool, tenant, template_id):
        return RequestError(
            f"template {template_id!r} has no version {version}", field="template_version"
        )
    return RequestError(f"no stored template has id {template_id!r}", field="template_id")


async def _lookup(
    pool: asyncpg.Pool, tenant: str, template_id: str, version: int | None
) -> templatedb.TemplateVersion:
    """The stored version a job names; `RequestError` naming the field if there is none."""
    with unavailable_without_postgres("cannot resolve template_id"):
        row = await templatedb.get_template_version(pool, tenant, template_id, version)
        if row is None:
            raise await _missing(pool, tenant, template_id, version)
    return row


def _with_chrome(
    options: pageoptions.PageOptions, stored: templatedb.TemplateVersion
) -> pageoptions.PageOptions:
    """`options` with the stored header and footer wherever the request set none.

    Only for PDF output: a header and footer decorate printed pages, and the option rules
    refuse them with any other output.
    """
    if options.output != "pdf":
        return options
    if stored.header is not None and options.header_template is None:
        options = replace(options, header_template=stored.header)
    if stored.footer is not None and options.footer_template is None:
        options = replace(options, footer_template=stored.footer)
    return options


_Submitted = TypeVar("_Submitted", events.JobSubmitted, events.BatchSubmitted)
"""What names a stored template: a job's or a batch's submission."""


def _with_stored(event: _Submitted, stored: templatedb.TemplateVersion) -> _Submitted:
    """`event` rendering `stored`: its body as the template, its id and version recorded,
    and its header and footer in the page options (see `_with_chrome`)."""
    return replace(
        event,
        template=stored.body,
        template_id=stored.id,
        template_version=stored.version,
        options=_with_chrome(event.options, stored),
    )


async def resolve(
    pool: asyncpg.Pool,
    event: _Submitted,
    tenant: str,
    template_id: str,
    version: int | None,
) -> _Submitted:
    """`event` rendering `tenant`'s stored template `template_id` at `version` (the
    latest if None). `RequestError` naming `template_id` or `template_version` if the
    tenant has nothing stored under them, `Unavailable` if PostgreSQL cannot be reached."""
    return _with_stored(event, await _lookup(pool, tenant, template_id, version))


async def resolve_named(
    pool: asyncpg.Pool,
    event: _Submitted,
    tenant: str,
    name: str,
    version: int | None,
) -> _Submitted:
    """`event` rendering `tenant`'s stored template called `name` at `version` (the
    latest if None). `RequestError` naming `template_name` if the tenant has no template
    of that name (another tenant's never counts), `template_version` if it lacks that
    version."""
    with unavailable_without_postgres("cannot resolve template_name"):
        template_id = await templatedb.template_id_named(pool, tenant, name)
    if template_id is None:
        raise RequestError(f"no stored template is named {name!r}", field="template_name")
    return _with_stored(event, await _lookup(pool, tenant, template_id, version))


async def rename_template(request: web.Request) -> web.Response:
    """`PATCH /templates/{id}` `{"name": …}`: rename a template; its id and every version
    stay. 404 if the tenant has no such template, 409 if another of its templates has the
    name."""
    template_id = request.match_info["template_id"]
    if not TEMPLATE_ID.fullmatch(template_id):
        raise NotFound(f"no template {template_id!r}")
    renamed = parse_rename(await request.read())
    tenant = caller_of(request).tenant
    try:
        with unavailable_without_postgres("cannot rename the template"):
            row = await templatedb.rename_template(
                request.app[POOL], tenant, template_id, renamed.name
            )
    except templatedb.NameTaken:
        raise Conflict(f"another template is named {renamed.name!r}", field="name") from None
    if row is None:
        raise NotFound(f"no template {template_id!r}")
    return answers.respond(
        answers.TemplateSummary(
            id=row.id, name=row.name, latest_version=row.latest_version,
            updated_at=answers.iso(row.updated_at),
        )
    )  # fmt: skip


def add_routes(app: web.Application) -> None:
    app.router.add_post("/templates", guarded("templates:write", create_template))
    app.router.add_get("/templates", guarded("templates:read", list_templates))
    app.router.add_get("/templates/{template_id}", guarded("templates:read", get_template))
    app.router.add_patch("/templates/{template_id}", guarded("templates:write", rename_template))
