"""A job's request read with its files, and its `files` put together.

`POST /jobs` takes JSON, or `multipart/form-data` whose part `job` is the same JSON and
whose other parts are files (`uploads.read_form`), each named by its filename as the page
refers to it. `with_files` gives the job's `submitted` event its `files`: its own parts,
then the stored assets it names (`assets`), then its stored template's bundle (or, for an
inline template, the bundle `template_files` names: `keptfiles`); the
first of these wins on a name (`assets.merged`). `keep_files` claims them all for the
job (`core/database/fileclaims`: no sweep deletes them while it may still render) and then writes
its own parts to storage (the others are stored already); the log carries `FileRef`s,
never bytes.
"""

from __future__ import annotations

import hashlib

from aiohttp import web
from msgspec.structs import replace

from services.core.database import assetdb, fileclaims
from services.core.database.fileclaims import ClaimKind
from services.core.model import events
from services.core.model.errors import AssetMissing, RequestError
from services.core.model.files import FileRef, blob_key
from services.core.objectstore.filestore import file_ref
from services.gateway import assets, keptfiles
from services.gateway.keys import POOL, SETTINGS, STORAGE
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import JobRequest, fingerprint, parse_job, read_json_body
from services.gateway.uploads import UploadLimits, is_multipart, read_form

JOB_PART = "job"
"""The part of a multipart `POST /jobs` that holds the job's JSON."""

Own = list[tuple[FileRef, bytes]]
"""A job's own files (the parts of its request), checked and typed, with their bytes."""


async def read_job(request: web.Request) -> tuple[JobRequest, Own]:
    """The job a `POST /jobs` asks for, and the files it sent with it."""
    if not is_multipart(request):
        job = parse_job(await read_json_body(request))
        _check_source(job, [])
        return job, []
    upload = await read_form(request, UploadLimits.of(request.app[SETTINGS]), fields={JOB_PART})
    raw = upload.fields.get(JOB_PART)
    if raw is None:
        raise RequestError(
            f"a multipart job needs a part named {JOB_PART!r} holding the job's JSON",
            field=JOB_PART,
        )
    job = parse_job(raw)
    own = [(file_ref(name, data), data) for name, data in upload.files]
    _check_source(job, own)
    return job, own


def _check_source(job: JobRequest, own: Own) -> None:
    if job.url is not None and (own or job.assets):
        field = "assets" if job.assets else own[0][0].name
        raise RequestError(
            "files are served to html and template sources only: a url page refers to "
            "its own server's files",
            field=field,
        )


def job_fingerprint(job: JobRequest, own: Own) -> str:
    """What makes two job requests the same (for `Idempotency-Key`): the JSON's fields,
    and the name and digest of every file sent."""
    base = fingerprint(job)
    if not own:
        return base
    files = "\n".join(f"{ref.name}\0{ref.digest}" for ref, _ in own)
    return hashlib.sha256(f"{base}\n{files}".encode()).hexdigest()


async def with_files(
    request: web.Request, event: events.JobSubmitted, job: JobRequest, own: Own
) -> events.JobSubmitted:
    """`event` with the job's files (its own, named assets, its template's bundle or, for
    an inline template, the stored version's that `template_files` names), none written
    yet (`keep_files`). `AssetMissing` for a named asset the tenant lacks, `NotFound` for
    `template_files` naming no template of the tenant, `PayloadTooLarge` over the per-job
    limits."""
    tenant = event.tenant
    named = await assets.named_assets(request, tenant, job.assets) if job.assets else []
    bundled = await _bundled(request, event)
    if job.template_files is not None and job.template_files.template_id is not None:
        bundled = await keptfiles.kept_files(
            request, tenant, job.template_files, job.template_files.template_id, "template_files"
        )
    files = assets.merged(request.app[SETTINGS], [ref for ref, _ in own], named, bundled)
    return replace(event, files=files) if files else event


async def keep_files(
    request: web.Request,
    tenant: str,
    owner: tuple[ClaimKind, str],
    files: list[FileRef],
    own: Own | None = None,
) -> None:
    """Claim `files` for `owner` (a job, a batch, a template version, an upload of
    assets), then write the bytes of `own` (the request's parts): claim first, so a sweep
    cannot delete bytes between their writing and the claim (`core/database/fileclaims`). The
    others must still be an asset's or a template's: `AssetMissing` naming the first
    that no longer is (deleted since it was looked up)."""
    own = own or []
    written = {ref.digest for ref, _ in own}
    stored = [ref.digest for ref in files if ref.digest not in written]
    with unavailable_without_postgres("cannot keep the files"):
        gone = await fileclaims.claim(
            request.app[POOL],
            tenant,
            *owner,
            [ref.digest for ref in files] + list(written),
            stored,
        )
    if gone:
        name = next(ref.name for ref in files if ref.digest in gone)
        raise AssetMissing(f"the stored asset {name!r} was deleted meanwhile", field=name)
    storage = request.app[STORAGE]
    for ref, data in own:
        await storage.put(blob_key(tenant, ref.digest), data, ref.content_type)


async def batch_files(
    request: web.Request, event: events.BatchSubmitted, names: list[str]
) -> events.BatchSubmitted:
    """`event` with the files every item gets: the stored assets the batch names, then
    its stored template's bundle."""
    if names and not event.template:
        raise RequestError(
            "assets are served to template sources only: a url item's page refers to its "
            "own server's files",
            field="assets",
        )
    named = await assets.named_assets(request, event.tenant, names) if names else []
    files = assets.merged(request.app[SETTINGS], named, await _bundled(request, event))
    return replace(event, files=files) if files else event


async def _bundled(
    request: web.Request, event: events.JobSubmitted | events.BatchSubmitted
) -> list[FileRef]:
    """The files of the stored template version `event` renders (none for another source)."""
    if event.template_id is None or event.template_version is None:
        return []
    with unavailable_without_postgres("cannot read the template's files"):
        return await assetdb.template_files(
            request.app[POOL], event.tenant, event.template_id, event.template_version
        )
