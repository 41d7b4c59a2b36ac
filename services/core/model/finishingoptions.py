"""The rules of the finishing options (`pdfa`, `facturx`, `attachments`, `encrypt`),
beyond their types; `options.check_options` runs them with the other rules.

Shared by the gateway (a 400 naming the option) and the renderer's finishing steps,
which read data URLs and invoice XML with the same functions (`data_url`, `invoice_problem`).
"""

from __future__ import annotations

import base64
import binascii
import re
import xml.parsers.expat
from collections.abc import Callable

from services.core.model import filenames
from services.core.model.errors import RequestError
from services.core.model.pageoptions import Attachment, Encrypt, PageOptions

PDFA_LEVELS = ("2b", "3b")
"""PDF/A parts and conformance levels `pdfa` accepts (B: the visual appearance is kept)."""
FACTURX_PROFILES = ("MINIMUM", "BASIC WL", "BASIC", "EN 16931", "EXTENDED")
"""The Factur-X 1.0 profiles, as the XMP's fx:ConformanceLevel names them."""
CII_NAMESPACE = "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_BYTES = 10 * 2**20
"""Largest attachment, decoded bytes (the request body limit bounds them all together)."""
FACTURX_FILE = "factur-x.xml"
"""The name Factur-X gives the invoice embedded in the PDF."""
MIN_PASSWORD = 8
MAX_PASSWORD_BYTES = 127  # AES-256 (R6) uses the first 127 bytes of a UTF-8 password
PERMISSIONS = (
    "print",
    "print_high",
    "copy",
    "annotate",
    "fill_forms",
    "assemble",
    "modify",
)
"""What `encrypt.permissions` may grant a user who opens the file with the user password.
Extraction for accessibility is always allowed: AES-256 follows PDF 2.0, which ignores
that bit."""

_DATA_URL = re.compile(
    r"data:([A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+)(?:;[A-Za-z0-9_.+-]+=[^;,]*)*;base64,"
    r"([A-Za-z0-9+/]*={0,2})"
)


def _fail(name: str, rule: str) -> RequestError:
    return RequestError(f"options.{name} {rule}", field=f"options.{name}")


def data_url(url: str) -> tuple[str, bytes] | None:
    """The MIME type and bytes of a base64 data URL, or None if `url` is not one."""
    match = _DATA_URL.fullmatch(url)  # whole: `$` would let a final newline through
    if match is None:
        return None
    try:
        return match.group(1).lower(), base64.b64decode(match.group(2), validate=True)
    except binascii.Error:
        return None


def invoice_problem(text: str) -> str | None:
    """What makes `text` unfit as a Factur-X invoice: not well-formed XML, a DOCTYPE (no
    entities are expanded, ever), or a root other than CII's CrossIndustryInvoice."""
    roots: list[str] = []
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.StartElementHandler = lambda name, attributes: roots.append(name)
    try:
        parser.Parse(text.encode(), True)
    except (xml.parsers.expat.ExpatError, ValueError) as exc:
        return f"is not well-formed XML ({exc})"
    if not roots or roots[0] != f"{CII_NAMESPACE} CrossIndustryInvoice":
        return f"must have the root element CrossIndustryInvoice in the namespace {CII_NAMESPACE}"
    return None


def _refuse_doctype(*args: object) -> None:
    raise ValueError("a DOCTYPE is not allowed")


def _check_pdfa(options: PageOptions) -> None:
    if options.pdfa is not None and options.pdfa not in PDFA_LEVELS:
        raise _fail("pdfa", "must be one of " + ", ".join(PDFA_LEVELS))
    if options.pdfa == "2b" and options.facturx is not None:
        raise _fail("pdfa", "must be 3b with facturx (Factur-X is a PDF/A-3 file)")
    if options.pdfa == "2b" and options.attachments:
        raise _fail("pdfa", "must be 3b with attachments (PDF/A-2 embeds only PDF/A files)")


def _check_facturx(options: PageOptions) -> None:
    if options.facturx is None:
        return
    if options.facturx.profile not in FACTURX_PROFILES:
        raise _fail("facturx.profile", "must be one of " + ", ".join(FACTURX_PROFILES))
    problem = invoice_problem(options.facturx.xml)
    if problem is not None:
        raise _fail("facturx.xml", problem)


def _check_attachments(options: PageOptions) -> None:
    files = options.attachments or ()
    if len(files) > MAX_ATTACHMENTS:
        raise _fail("attachments", f"may hold at most {MAX_ATTACHMENTS} files")
    names = {filenames.key(FACTURX_FILE)} if options.facturx is not None else set()
    for index, attachment in enumerate(files):
        _check_attachment(f"attachments[{index}]", attachment, names)
        names.add(filenames.key(attachment.name))


def _check_attachment(name: str, attachment: Attachment, taken: set[str]) -> None:
    """A name a reader saves the file under as given (`filenames.problem`), unique in the
    PDF ignoring case and normalisation; a base64 data URL of at most the size limit."""
    problem = filenames.problem(attachment.name)
    if problem is not None:
        raise _fail(f"{name}.name", problem)
    if filenames.key(attachment.name) in taken:
        raise _fail(f"{name}.name", "is already the name of another embedded file (ignoring case)")
    decoded = data_url(attachment.content)
    if decoded is None:
        raise _fail(f"{name}.content", "must be a base64 data URL (data:text/csv;base64,…)")
    if len(decoded[1]) > MAX_ATTACHMENT_BYTES:
        raise _fail(f"{name}.content", f"must be at most {MAX_ATTACHMENT_BYTES} bytes")


def _check_encrypt(options: PageOptions) -> None:
    crypt = options.encrypt
    if crypt is None:
        return
    if options.pdfa is not None or options.facturx is not None:
        raise _fail("encrypt", "cannot be used with pdfa or facturx (PDF/A forbids encryption)")
    _check_password("encrypt.owner_password", crypt.owner_password)
    if crypt.user_password:
        _check_password("encrypt.user_password", crypt.user_password)
    if crypt.user_password == crypt.owner_password:
        raise _fail("encrypt.user_password", "must differ from the owner password")
    _check_permissions(crypt)


def _check_password(name: str, password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise _fail(name, f"must be at least {MIN_PASSWORD} characters")
    if len(password.encode()) > MAX_PASSWORD_BYTES:
        raise _fail(name, f"must be at most {MAX_PASSWORD_BYTES} bytes in UTF-8")


def _check_permissions(crypt: Encrypt) -> None:
    for index, permission in enumerate(crypt.permissions):
        if permission not in PERMISSIONS:
            raise _fail(f"encrypt.permissions[{index}]", "must be one of " + ", ".join(PERMISSIONS))


def _check_output(options: PageOptions) -> None:
    if options.output != "pdf":
        for name in ("pdfa", "facturx", "attachments", "encrypt"):
            if getattr(options, name) is not None:
                raise _fail(name, f"does not apply to {options.output} output")


CHECKS: tuple[Callable[[PageOptions], None], ...] = (
    _check_output,
    _check_pdfa,
    _check_facturx,
    _check_attachments,
    _check_encrypt,
)


def check_finishing(options: PageOptions) -> None:
    """Raise `RequestError` naming the first finishing option that breaks a rule."""
    for check in CHECKS:
        check(options)
