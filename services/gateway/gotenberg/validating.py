"""Gotenberg 9's `POST /forms/pdf/validate`: each uploaded PDF checked against the
`profile` asked, by Pressroom's own validation (`POST /validate`'s: the pipeline's
`validate` step in the validator's worker processes, `gateway/validation`), answered at
once in Gotenberg's shape: `{"<file>": {"profile", "compliant", "violations"}}`.

Pressroom checks what a document claims, so a profile maps onto a claim and the checks
of that claim:

    PDF/A-1a, -1b, -2a, -2b, -2u, -3a, -3b, -3u   the XMP's pdfaid claim (the part, and a
        conformance at least the one asked: a ⊇ u ⊇ b) and the PDF/A checks
    PDF/UA-1                                      the pdfuaid claim and the PDF/UA checks
    Factur-X                                      an embedded invoice, its XSD and profile

An encrypted PDF without its `password`, or with a wrong one, is a 400 naming `password`,
as in Gotenberg. PDF/A-4 (4, 4e, 4f) and PDF/UA-2 are refused (400 naming `profile`):
Pressroom has no checks for them. A violation is `{"check", "message"}`: Pressroom's check name
(docs/pdf-tools.md's validation table) and why it failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from services.core.model.errors import PdfEncrypted, PressroomError, RequestError
from services.gateway.auth import Caller
from services.gateway.gotenberg import forms, replies
from services.gateway.gotenberg.chromium import refuse
from services.gateway.gotenberg.webhooks import URL as WEBHOOK_URL
from services.gateway.keys import SETTINGS, VALIDATOR
from services.gateway.validation import limits_of
from services.pdftools.context import Context
from services.pdftools.pipeline import Input, Result, run
from services.pdftools.report import Status, Validation
from services.pdftools.steps import Validate

PDFA_CHECKS = frozenset({"pdfa_rules", "xmp_present", "xmp_info_consistent", "output_intent",
                         "fonts_embedded", "not_encrypted", "no_active_content",
                         "associated_files", "no_object_streams"})  # fmt: skip
PDFUA_CHECKS = frozenset({"pdfuaid", "marked", "structure_tree", "lang", "display_doc_title",
                          "title"})  # fmt: skip
FACTURX_CHECKS = frozenset({"facturx_xsd", "facturx_profile"})
_PDFA = re.compile(r"PDF/A-([123])([abu])")
_STRICTER = {"b": "abu", "u": "au", "a": "a"}
"""For each conformance asked, the claimed ones that hold it (a ⊇ u ⊇ b)."""
UNCHECKED = ("PDF/A-4", "PDF/A-4e", "PDF/A-4f", "PDF/UA-2")


def _profile(form: forms.Form) -> str:
    given = form.text("profile")
    if given is None:
        raise RequestError("form field 'profile' is required", field="profile")
    if given.lstrip().startswith("["):
        listed = form.json("profile")
        if not isinstance(listed, list) or len(listed) != 1 or not isinstance(listed[0], str):
            raise refuse("profile", "Pressroom checks one profile per request")
        given = listed[0]
    if given in UNCHECKED:
        raise refuse("profile", f"Pressroom has no checks for {given}")
    if not (_PDFA.fullmatch(given) or given in ("PDF/UA-1", "Factur-X")):
        raise RequestError(f"form field 'profile' must be a PDF/A level (PDF/A-1b …), "
                           f"PDF/UA-1 or Factur-X, not {given!r}", field="profile")  # fmt: skip
    return given


def verdict(profile: str, found: Validation) -> dict[str, Any]:
    """Gotenberg's entry for one PDF: whether it holds `profile`, and what does not."""
    violations: list[dict[str, str]] = []
    pdfa = _PDFA.fullmatch(profile)
    if pdfa is not None:
        group, claim = PDFA_CHECKS, (found.pdfa or "").lower()
        part, level = pdfa.groups()
        if not claim or claim[0] != part or claim[1:] not in _STRICTER[level]:
            said = f"PDF/A-{claim[0]}{claim[1:]}" if claim else "no PDF/A level"
            violations.append({"check": "pdfaid", "message": f"the document claims {said}"})
    elif profile == "PDF/UA-1":
        group = PDFUA_CHECKS
        if found.pdfua != "1":
            said = f"PDF/UA-{found.pdfua}" if found.pdfua else "no PDF/UA part"
            violations.append({"check": "pdfuaid", "message": f"the document claims {said}"})
    else:
        group = FACTURX_CHECKS
        if found.facturx is None:
            violations.append({"check": "facturx", "message": "no Factur-X invoice is embedded"})
    for check in found.checks:
        if check.name in group and check.status is Status.FAILED:
            violations.append({"check": check.name, "message": check.reason})
    return {"profile": profile, "compliant": not violations, "violations": violations}


async def validate(
    request: web.Request, authenticate: Callable[[web.Request], Caller]
) -> web.StreamResponse:
    """`POST /forms/pdf/validate`: the verdict for each PDF, JSON by file name
    (`authenticate` as the other form routes do)."""
    headers = {replies.TRACE: replies.trace_of(request)}
    try:
        caller = authenticate(request)
        if request.headers.get(WEBHOOK_URL):
            raise RequestError("this route answers directly: no webhook", field=WEBHOOK_URL)
        form = await forms.read(request)
        profile = _profile(form)
        password = form.text("password") or ""
        unknown = form.unknown()
        if unknown:
            raise refuse(unknown[0], "Pressroom does not know this field")
        pdfs = sorted((u for u in form.files if u.filename.lower().endswith(".pdf")),
                      key=lambda u: u.filename)  # fmt: skip
        if not pdfs:
            raise RequestError("the form has no PDF file", field="files")
        given = [Input(u.filename, u.data, password) for u in pdfs]
        settings = request.app[SETTINGS]
        try:
            result: Result = await request.app[VALIDATOR].call(
                caller.tenant, run, given, [Validate()], Context(), limits_of(settings), {}
            )
        except PdfEncrypted as exc:  # Gotenberg answers 400 for a missing or wrong one
            raise RequestError(f"form field 'password': {exc.message}", field="password") from None
        body = {found.document: verdict(profile, found) for found in result.report.validations}
        return web.json_response(body, headers=headers, dumps=json.dumps)
    except PressroomError as exc:
        return replies.error(exc, headers)
