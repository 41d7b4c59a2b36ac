"""The files a stored template version bundles: sent with a multipart `POST /templates`
(part `template` is the JSON, the other parts files), named as stored assets in its
`assets`, or kept from an earlier version by reference (`keep_files`, `keptfiles`), fixed
when the version is stored. Every job rendering that version gets them
(`jobfiles.with_files`), its own files and named assets winning by name."""

from __future__ import annotations

from aiohttp import web

from services.core.database.fileclaims import ClaimKind
from services.core.model.files import FileRef
from services.core.objectstore.filestore import file_ref
from services.gateway import assets, jobfiles, keptfiles
from services.gateway.keys import SETTINGS
from services.gateway.requests import read_json_body
from services.gateway.templaterequests import TemplateRequest, parse_template
from services.gateway.uploads import UploadLimits, is_multipart, read_form

TEMPLATE_PART = "template"
"""The part of a multipart `POST /templates` that holds the template's JSON."""

Bundle = list[tuple[FileRef, bytes | None]]
"""A version's files; bytes for those sent with the request (to store), None for named
assets and kept files (stored already)."""


Own = list[tuple[FileRef, bytes]]
"""The files sent with the request, with their bytes."""


async def read_template(request: web.Request) -> tuple[TemplateRequest, Own]:
    """The template a `POST /templates` stores, and the files sent with it."""
    if not is_multipart(request):
        return parse_template(await read_json_body(request)), []
    limits = UploadLimits.of(request.app[SETTINGS])
    upload = await read_form(request, limits, fields={TEMPLATE_PART})
    template = parse_template(upload.json_bytes(TEMPLATE_PART))
    return template, [(file_ref(name, data), data) for name, data in upload.files]


async def bundle_of(
    request: web.Request, tenant: str, template_id: str, template: TemplateRequest, own: Own
) -> Bundle:
    """The files the new version of `template_id` bundles: those sent with it, then the
    stored assets it names, then the files of an earlier version it keeps
    (`keep_files`), the first winning by name."""
    named = await assets.named_assets(request, tenant, template.assets) if template.assets else []
    kept = await keptfiles.kept_by_version(request, tenant, template.keep_files, template_id)
    refs = assets.merged(request.app[SETTINGS], [ref for ref, _ in own], named, kept)
    data = {ref.name: content for ref, content in own}
    return [(ref, data.get(ref.name)) for ref in refs]


async def store_own(request: web.Request, tenant: str, template_id: str, bundle: Bundle) -> None:
    """Claim the version's files (`core/database/fileclaims`: kept until its rows hold them), then
    write the bytes of those sent with the request (before the version's rows).
    `AssetMissing` for a named asset deleted since it was looked up."""
    own = [(ref, data) for ref, data in bundle if data is not None]
    owner = (ClaimKind.STORE, f"template:{template_id}")
    await jobfiles.keep_files(request, tenant, owner, [ref for ref, _ in bundle], own)
