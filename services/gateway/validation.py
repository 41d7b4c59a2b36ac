"""`POST /validate`: what a PDF claims and whether it holds, answered at once.

The body is the PDF itself (`Content-Type: application/pdf`), at most
`PRESSROOM_VALIDATE_MAX_BYTES`; an encrypted one's password comes in the
`Pdf-Password` header (never the query: URLs are logged). The PDF is read in a worker
process (`compiles.FairJail`, as template compiles are: each tenant within its share,
refused at once with 429 or 503 beyond it), never on the event loop, by the pipeline's
`validate` step (`pdftools/validate.py`): PDF/A level and structural checks, PDF/UA
markers, an embedded Factur-X invoice against its XSD and declared profile, signatures,
encryption. A file that is no PDF, or one that cannot be read, is a 4xx naming why.
"""

from __future__ import annotations

import re

from aiohttp import web

from services.core.errors import RequestError
from services.core.files import sniff
from services.core.settings import Settings
from services.gateway import answers
from services.gateway.auth import caller_of, guarded
from services.gateway.headers import header
from services.gateway.keys import SETTINGS, VALIDATOR
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input, Result, run
from services.pdftools.report import Validation
from services.pdftools.steps import Validate

ROUTE = "validate"
"""The route's name: its body limit is `PRESSROOM_VALIDATE_MAX_BYTES` (`app._body_limit`)."""
PASSWORD = "Pdf-Password"
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
    """`POST /validate`: the validation of the PDF in the body."""
    settings = request.app[SETTINGS]
    kind = (header(request, "Content-Type") or "").split(";", 1)[0].strip().lower()
    if kind not in ("application/pdf", "application/octet-stream"):
        raise RequestError(
            f"Content-Type must be application/pdf, got {kind or 'none'}", field="Content-Type"
        )
    data = await request.read()
    if not data:
        raise RequestError("the body must be a PDF; it is empty", field="body")
    if sniff(data[:1024], "") != "application/pdf":
        raise RequestError("the body is not a PDF (it does not start with %PDF-)", field="body")
    name = request.query.get("name", "document.pdf")
    if not _NAME.fullmatch(name):
        raise RequestError("name must be a file name of 1 to 200 characters", field="name")
    password = header(request, PASSWORD) or ""
    given = Input(name, data, password)
    result: Result = await request.app[VALIDATOR].call(
        caller_of(request).tenant, run, [given], [Validate()], Context(), limits_of(settings), {}
    )
    report = result.report
    return answers.respond(Validated(validation=report.validations[0], warnings=report.warnings))


def add_routes(app: web.Application) -> None:
    app.router.add_post("/validate", guarded("jobs:write", validate), name=ROUTE)
