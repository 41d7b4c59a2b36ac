"""`POST /validate`: what a PDF claims and whether it holds, answered at once.

The body is the PDF itself (`Content-Type: application/pdf`), or a
`multipart/form-data` form of one file (and an optional `password` field), at most
`PRESSROOM_VALIDATE_MAX_BYTES`; an encrypted one's password comes in the
`Pdf-Password` header or that field (never the query: URLs are logged). The PDF is read in a worker
process (`compiles.FairJail`, as template compiles are: each tenant within its share,
refused at once with 429 or 503 beyond it), never on the event loop, by the pipeline's
`validate` step (`pdftools/validate.py`): PDF/A level and structural checks, PDF/UA
markers, an embedded Factur-X invoice against its XSD and declared profile, signatures,
encryption. A file that is no PDF, or one that cannot be read, is a 4xx naming why.
"""

from __future__ import annotations

import re

from aiohttp import web

from services.core.model.errors import PayloadTooLarge, RequestError
from services.core.model.files import sniff
from services.core.runtime.settings import Settings
from services.gateway import answers
from services.gateway.auth import caller_of, guarded
from services.gateway.headers import header
from services.gateway.keys import SETTINGS, VALIDATOR
from services.gateway.uploads import UploadLimits, is_multipart, read_form
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input, Result, run
from services.pdftools.report import Validation
from services.pdftools.steps import Validate

ROUTE = "validate"
"""The route's name: its body limit is `PRESSROOM_VALIDATE_MAX_BYTES` (`app._body_limit`)."""
PASSWORD = "Pdf-Password"
MAX_PASSWORD = 1024
_UPLOAD_LIMITS = re.compile(r"\(PRESSROOM_MAX_(?:FILE|UPLOAD)_BYTES\)")
_NAME = re.compile(r"[^/\\\x00-\x1f]{1,200}")


class Validated(answers.Answer, kw_only=True):
    """What the PDF claims and the checks that say whether it holds."""

    validation: Validation
    """Its version, pages, encryption, PDF/A and PDF/UA claims, Factur-X invoice,
    signatures, and each check with its verdict."""
    warnings: list[str]
    """What the reader had to repair or skip (a broken cross-reference table…)."""


def limits_of(settings: Settings) -> Limits:
    """One validation's limits: its bytes, and the PDF tools' page limit."""
    return Limits(input_bytes=settings.validate_max_bytes, pages=settings.pdf_max_pages)


async def validate(request: web.Request) -> web.Response:
    """`POST /validate`: the validation of the PDF in the body (or in its one file)."""
    settings = request.app[SETTINGS]
    name = request.query.get("name", "document.pdf")
    password = header(request, PASSWORD) or ""
    if is_multipart(request):
        name, data, password = await _from_form(request, settings, password)
        where = name
    else:
        data, where = await _raw(request), "body"
    if not data:
        raise RequestError("the PDF is empty", field=where)
    if sniff(data[:1024], "") != "application/pdf":
        raise RequestError("it is not a PDF (it does not start with %PDF-)", field=where)
    if not _NAME.fullmatch(name):
        raise RequestError("name must be a file name of 1 to 200 characters", field="name")
    given = Input(name, data, password)
    result: Result = await request.app[VALIDATOR].call(
        caller_of(request).tenant, run, [given], [Validate()], Context(), limits_of(settings), {}
    )
    report = result.report
    return answers.respond(Validated(validation=report.validations[0], warnings=report.warnings))


async def _raw(request: web.Request) -> bytes:
    kind = (header(request, "Content-Type") or "").split(";", 1)[0].strip().lower()
    if kind not in ("application/pdf", "application/octet-stream"):
        raise RequestError(
            f"Content-Type must be application/pdf or multipart/form-data, got {kind or 'none'}",
            field="Content-Type",
        )
    return await request.read()


async def _from_form(
    request: web.Request, settings: Settings, password: str
) -> tuple[str, bytes, str]:
    """The one file of a multipart body (its name, bytes) and the form's `password`."""
    limit = settings.validate_max_bytes
    limits = UploadLimits(limit, 2, limit, MAX_PASSWORD, settings.body_timeout)
    try:
        upload = await read_form(request, limits, fields={"password"})
    except PayloadTooLarge as exc:  # the limit is this route's own
        message = _UPLOAD_LIMITS.sub("(PRESSROOM_VALIDATE_MAX_BYTES)", exc.message)
        raise PayloadTooLarge(message, field=exc.field) from None
    if len(upload.files) != 1:
        raise RequestError("a multipart body holds exactly one file: the PDF", field="files")
    name, data = upload.files[0]
    given = upload.fields.get("password")
    return name, data, given.decode("utf-8", "replace") if given is not None else password


def add_routes(app: web.Application) -> None:
    app.router.add_post("/validate", guarded("jobs:write", validate), name=ROUTE)
