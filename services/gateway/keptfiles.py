"""Files of a stored template version taken by reference (`KeptFiles`): a new version
keeping an earlier one's bundle (`keep_files` of `POST /templates`), or a job of an inline
template getting a version's bundle (`template_files`: an editor's preview of unsaved
text). Only the tenant's own template is read: another tenant's is a 404, as if it did not
exist. The bytes are stored already; the caller claims the digests before it uses them
(`jobfiles.keep_files`), so no sweep deletes them while a version or job needs them.
"""

from __future__ import annotations

from aiohttp import web

from services.core.database import assetdb, templatedb
from services.core.model.errors import NotFound, RequestError
from services.core.model.files import FileRef
from services.gateway.keys import POOL
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import KeptFiles


async def kept_files(
    request: web.Request, tenant: str, kept: KeptFiles, template_id: str, field: str
) -> list[FileRef]:
    """The files `kept` takes from `tenant`'s template `template_id` (`field` names the
    request's field in errors): `NotFound` if the tenant has no such template or version,
    `RequestError` naming the first name the version does not bundle."""
    pool = request.app[POOL]
    with unavailable_without_postgres("cannot read the template's files"):
        row = await templatedb.get_template_version(pool, tenant, template_id, kept.version)
        if row is None:
            known = await templatedb.template_versions(pool, tenant, template_id)
            raise _missing(template_id, kept.version if known else None, field)
        files = await assetdb.template_files(pool, tenant, template_id, row.version)
    if kept.names is None:
        return files
    by_name = {ref.name: ref for ref in files}
    for index, name in enumerate(kept.names):
        if name not in by_name:
            raise RequestError(
                f"version {row.version} of template {template_id!r} bundles no file {name!r}",
                field=f"{field}.names[{index}]",
            )
    return [by_name[name] for name in dict.fromkeys(kept.names)]


def _missing(template_id: str, version: int | None, field: str) -> NotFound:
    """No such template of the tenant (`version` None), or no such version of it."""
    if version is None:
        return NotFound(f"no template {template_id!r}", field=f"{field}.template_id")
    return NotFound(f"no version {version} of template {template_id!r}", field=f"{field}.version")


async def kept_by_version(
    request: web.Request, tenant: str, kept: KeptFiles | None, template_id: str
) -> list[FileRef]:
    """The files a new version of `tenant`'s template `template_id` keeps (`keep_files`);
    `keep_files.template_id`, if given, must be that template (404 if the tenant has no
    template of that id, 400 if it is another of its templates)."""
    if kept is None:
        return []
    named = kept.template_id
    if named is not None and named != template_id:
        await kept_files(request, tenant, kept, named, "keep_files")  # 404 unless its own
        raise RequestError(
            f"keep_files keeps files of the template being stored ({template_id!r}), "
            f"not of {named!r}",
            field="keep_files.template_id",
        )
    return await kept_files(request, tenant, kept, template_id, "keep_files")
