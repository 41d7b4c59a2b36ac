"""Gotenberg 9's `POST /forms/pdf/sign`: each uploaded PDF signed with the certificate
the form brings, as a PDF-tools job of one `sign` step (several PDFs answer as a ZIP).

`certificate` names one of the uploaded files (or is itself a file part): a PKCS#12
opened with `certificatePassword`, or a PEM certificate whose key is in the file `key`
names (or in the certificate's own file). The identity is read here, so a wrong password
is a 400 naming the field before any job exists, and it travels in the step sealed with
the server key (`pdftools/identity`); the certificate and key files are not job files:
they are never stored.
"""

from __future__ import annotations

from typing import Any

from services.core.model.errors import RequestError
from services.gateway.gotenberg.chromium import Mapped, refuse
from services.gateway.gotenberg.forms import Form, Upload
from services.pdftools import identity
from services.pdftools.identity import Part

TEXTS = {"reason": "reason", "location": "location", "contactInfo": "contact",
         "name": "signer_name"}  # fmt: skip
"""Each text field and the `sign` step's field it fills."""

TIMESTAMP_URL = "timestampUrl"
"""Gotenberg 9's field for the timestamp authority that would timestamp the signature
(its sign route, its `sign` stage and its `/forms/pdf/timestamp` route): refused."""
NOT_TIMESTAMPED = (
    "a signature with an uploaded certificate is not timestamped (no request to a "
    "timestamp server is made for a form)"
)


def _named(form: Form, part: Part, *, required: bool) -> Upload | None:
    """The file a field names (`certificate=cert.pem`), or sent as that field's part."""
    sent = [u for u in form.files if u.part == part]
    if sent:
        return sent[0]
    name = form.text(part)
    if name is None:
        if required:
            raise RequestError(f"form field {part.value!r} is required", field=part)
        return None
    found = [u for u in form.files if u.filename == name]
    if not found:
        raise RequestError(f"form field {part.value!r} names {name!r}, which is not an uploaded "
                           "file", field=part)  # fmt: skip
    return found[0]


def _identity(form: Form) -> tuple[str, list[Upload]]:
    """The form's identity as the step carries it, and the files that held it."""
    certificate = _named(form, Part.CERTIFICATE, required=True)
    key = _named(form, Part.KEY, required=False)
    assert certificate is not None  # required
    password = form.text(Part.PASSWORD) or ""
    try:
        own = identity.uploaded(certificate.data, key.data if key is not None else None, password)
    except RequestError as exc:  # told by form field, as every problem of a form
        raise RequestError(f"form field {exc.field!r}: {exc.message}", field=exc.field) from None
    return identity.carried(own), [certificate] + ([key] if key is not None else [])


def _texts(form: Form, step: dict[str, Any]) -> None:
    for field, target in TEXTS.items():
        value = form.text(field)
        if value is not None:  # checked as options.sign's texts are (`check_sign`)
            step[target] = value


def step_of(form: Form) -> tuple[dict[str, Any], list[Upload]]:
    """The `sign` step the form's fields make, and the uploads that held its identity
    (never job files). Gotenberg 9's `sign` stage takes the same fields (`pipe`)."""
    carried, secret = _identity(form)
    if form.text(TIMESTAMP_URL) is not None:
        raise refuse(TIMESTAMP_URL, NOT_TIMESTAMPED)
    form.flag("pades", False)  # Pressroom's signatures are PAdES (ETSI.CAdES.detached) always
    step: dict[str, Any] = {"step": "sign", "identity": carried}
    _texts(form, step)
    return step, secret


def sign(form: Form) -> Mapped:
    """The form as a PDF-tools job: its PDFs (not the certificate and key files) through
    a `sign` step with the form's identity."""
    step, secret = step_of(form)
    kept = [u for u in form.files if u not in secret]
    pdfs = sorted(u.filename for u in kept if u.filename.lower().endswith(".pdf"))
    if not pdfs:
        raise RequestError("the form has no PDF file", field="files")
    unknown = form.unknown()
    if unknown:
        raise refuse(unknown[0], "Pressroom does not know this field")
    mapped = Mapped(body={"pdf": {"inputs": [{"file": n} for n in pdfs], "steps": [step]}},
                    files=kept)  # fmt: skip
    mapped.origin.update({"pdf.inputs": "files", "pdf.steps[0]": Part.CERTIFICATE})
    for field, target in TEXTS.items():
        mapped.origin[f"pdf.steps[0].{target}"] = field
    return mapped
