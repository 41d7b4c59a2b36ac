"""Gotenberg 9's stages: `POST /forms/pdf/pipe` (the form's PDFs through a `stages` list)
and the same list after printing on the Chromium conversions (`postprocess`).

Each stage (`{"op": "rotate", "angle": 90}`) becomes steps of one Pressroom PDF-tools job,
in order, through the 8.x routes' own mappings (`pdfengines.BUILDERS`, `split`,
`metadata`, `archival`): the stage's parameters are handed to them as the 8.x form fields
they read (`angle` as `rotateAngle`), so there is one mapping per operation, and a
problem they find is told back by the stage's own name (`stages[2].angle`). An operation
Pressroom does not run, or a parameter it cannot honour, is a `400` naming
`stages[i].op` or `stages[i].<parameter>`; nothing is ignored."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from services.core.model.errors import RequestError
from services.gateway.gotenberg import pdfengines, signing
from services.gateway.gotenberg.chromium import Mapped, refuse
from services.gateway.gotenberg.forms import Form, Upload

Build = Callable[[Form, Mapped], None]


def _split(form: Form, mapped: Mapped) -> None:
    """`every` as 8.x's `intervals`; `ranges` (one part per entry, checked by `_ranges`)
    as the split step's own ranges: 8.x's `pages` mode cuts a range into its pages."""
    ranges = form.json("ranges")
    if ranges is None:
        pdfengines.split(form, mapped, required=True)
    else:
        pdfengines.add_step(mapped, {"step": "split", "ranges": ranges}, "ranges")


def _select(form: Form, mapped: Mapped) -> None:
    """`pages` as 8.x's `splitSpan` in `pages` mode, unified: one PDF of those pages."""
    if form.text("splitSpan") is None:
        raise RequestError("form field 'splitSpan' is required", field="splitSpan")
    pdfengines.split(form, mapped, required=True)


def _sign(form: Form, mapped: Mapped) -> None:
    """The sign route's own mapping (`signing.step_of`); the certificate and key files
    are withheld from the job's files."""
    step, secret = signing.step_of(form)
    pdfengines.add_step(mapped, step, "certificate")
    mapped.withheld.extend(secret)


def _metadata(form: Form, mapped: Mapped) -> None:
    pdfengines.metadata(form, mapped, required=True)


def _remediate(form: Form, mapped: Mapped) -> None:
    pdfengines.archival(form, mapped)


SIGN_FIELDS = ("certificate", "key", "certificatePassword", "timestampUrl", "pades",
               *signing.TEXTS)  # fmt: skip
"""The `sign` stage's parameters: the sign route's fields, read by its mapping."""

OPS: dict[str, tuple[Build, dict[str, str]]] = {
    "merge": (pdfengines.BUILDERS["merge"], {}),
    "flatten": (pdfengines.BUILDERS["flatten"], {}),
    "optimize": (pdfengines.BUILDERS["optimize"], {}),
    "rotate": (pdfengines.BUILDERS["rotate"], {"angle": "rotateAngle", "pages": "rotatePages"}),
    "encrypt": (
        pdfengines.BUILDERS["encrypt"],
        {"userPassword": "userPassword", "ownerPassword": "ownerPassword"},
    ),
    "stamp-text": (
        pdfengines.BUILDERS["stamp"],
        {"text": "stampExpression", "pages": "stampPages"},
    ),
    "split": (_split, {"every": "splitSpan"}),
    "select": (_select, {"pages": "splitSpan"}),
    "set-metadata": (_metadata, {}),
    "remediate": (_remediate, {}),
    "sign": (_sign, {name: name for name in SIGN_FIELDS}),
}
"""Each stage Pressroom runs: the 8.x mapping that makes its steps, and which 8.x form
field each of its parameters is (the rest are read by `_fields`)."""

REFUSED = {
    "redact": "Pressroom does not redact",
    "stamp-image": "the compatible routes take text marks",
    "stamp-pdf": "the compatible routes take text marks",
    "clear-metadata": "Pressroom's metadata step sets values; it does not clear them all",
    "compose": "Pressroom does not impose pages",
    "extract-text": "Pressroom does not extract text",
    "extract-attachments": "Pressroom does not extract attachments",
}
"""Gotenberg 9 stages Pressroom refuses, and why (any other unknown `op` is refused too)."""

METADATA = {
    "title": "Title",
    "author": "Author",
    "subject": "Subject",
    "keywords": "Keywords",
    "creator": "Creator",
    "producer": "Producer",
    "creationDate": "CreationDate",
    "modDate": "ModDate",
}
"""`set-metadata`'s parameters and the ExifTool-style keys of 8.x's `metadata` field."""

PROFILES = {
    **{level: ("pdfa", level) for level in pdfengines.PDFA_LEVELS},
    "PDF/UA-1": ("pdfua", "true"),
}
"""`remediate`'s profiles Pressroom writes, as 8.x's `pdfa` or `pdfua` field."""

PERMISSIONS = {
    "print": ("print", "print_high"),
    "printHighQuality": ("print_high",),
    "modifyContent": ("modify",),
    "extractText": ("copy",),
    "modifyAnnotations": ("annotate",),
    "fillForms": ("fill_forms",),
    "assemble": ("assemble",),
}
"""`encrypt`'s permissions and what Pressroom takes off for each set false (no print:
no high-quality print either, which is only a better print)."""

_PDF_DATE = re.compile(r"D:(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(Z|[+-]\d{2}'?\d{2}'?)?")


def stages_of(form: Form) -> list[dict[str, Any]] | None:
    """The `stages` field: a JSON list of objects each naming its `op`; None if absent."""
    given = form.json("stages")
    if given is None:
        return None
    if not isinstance(given, list) or not given:
        raise RequestError("form field 'stages' must be a non-empty JSON list", field="stages")
    for index, stage in enumerate(given):
        if not isinstance(stage, dict):
            where = f"stages[{index}]"
            raise RequestError(f"{where} must be a JSON object", field=where)
    return given


def apply(stages: list[dict[str, Any]], mapped: Mapped, files: list[Upload]) -> None:
    """Each stage's steps appended to `mapped`'s PDF-tools work, told as `stages[i]`;
    `files` are the form's, which a stage names (a `sign` stage's certificate)."""
    steps: list[dict[str, Any]] = mapped.body["pdf"]["steps"]
    for index, stage in enumerate(stages):
        first = len(steps)
        _stage(index, stage, mapped, files)
        for number in range(first, len(steps)):
            mapped.origin[f"pdf.steps[{number}]"] = f"stages[{index}]"


def _stage(index: int, stage: dict[str, Any], mapped: Mapped, files: list[Upload]) -> None:
    where = f"stages[{index}]"
    op = stage.get("op")
    if not isinstance(op, str) or op not in OPS:
        why = REFUSED.get(op, "") if isinstance(op, str) else ""
        known = ", ".join(OPS)
        raise RequestError(
            f"{where}.op: Pressroom does not run the stage {op!r}"
            + (f" ({why})" if why else "")
            + f"; it runs {known}",
            field=f"{where}.op",
        )
    build, renamed = OPS[op]
    params = {name: value for name, value in stage.items() if name != "op"}
    fields, names = _fields(op, params, renamed, where)
    form = Form(fields=fields, files=files if op == "sign" else [])
    steps: list[dict[str, Any]] = mapped.body["pdf"]["steps"]
    first = len(steps)
    try:
        build(form, mapped)
    except RequestError as exc:
        raise _told(exc, names, where) from None
    unknown = [names.get(name, name) for name in form.unknown()]
    if unknown:
        raise RequestError(
            f"{where}.{unknown[0]} is not supported: Pressroom cannot honour it",
            field=f"{where}.{unknown[0]}",
        )
    if op == "encrypt" and "permissions" in params:
        _permissions(params["permissions"], steps[first:], where)


Fields = dict[str, str]
Param = Callable[[str, Any, str, Fields, Fields], bool]


def _fields(
    op: str, params: dict[str, Any], renamed: dict[str, str], where: str
) -> tuple[Fields, Fields]:
    """The 8.x form fields the stage's parameters are, and for each of those the
    parameter's name (to tell a problem by it). A parameter neither renamed nor read by
    the op's own reader (`PARAMS`) goes under a name no mapping reads: refused as unknown
    after the mapping, never taken for an 8.x field of the same name."""
    fields: Fields = {}
    names = {eight: nine for nine, eight in renamed.items()}
    read = PARAMS.get(op)
    for name, value in params.items():
        if value is None:
            continue
        if name in renamed:
            fields[renamed[name]] = _text(value)
        elif read is None or not read(name, value, f"{where}.{name}", fields, names):
            fields[f"stage:{name}"] = _text(value)
            names[f"stage:{name}"] = name
    check = CHECKS.get(op)
    if check is not None:
        check(params, fields, where)
    return fields, names


def _split_param(name: str, value: Any, where: str, fields: Fields, names: Fields) -> bool:
    if name != "ranges":
        return False
    fields["ranges"] = json.dumps(_ranges(value, where))
    names["ranges"] = "ranges"
    return True


def _metadata_param(name: str, value: Any, where: str, fields: Fields, names: Fields) -> bool:
    if name not in METADATA:
        return False
    given = json.loads(fields.get("metadata", "{}"))
    given[METADATA[name]] = _date(value, where) if name.endswith("Date") else value
    fields["metadata"] = json.dumps(given)
    names[f"metadata.{METADATA[name]}"] = name
    return True


def _remediate_param(name: str, value: Any, where: str, fields: Fields, names: Fields) -> bool:
    if name != "profile":
        return False
    if value not in PROFILES:
        raise refuse(where, f"Pressroom writes {', '.join(PROFILES)}")
    field, setting = PROFILES[value]
    fields[field] = setting
    names[field] = "profile"
    return True


def _encrypt_param(name: str, value: Any, where: str, fields: Fields, names: Fields) -> bool:
    if name == "algorithm" and value != "aes256":
        raise refuse(where, "Pressroom encrypts with AES-256 (aes256)")
    return name in ("algorithm", "permissions")  # permissions: on the step made


PARAMS: dict[str, Param] = {
    "split": _split_param,
    "set-metadata": _metadata_param,
    "remediate": _remediate_param,
    "encrypt": _encrypt_param,
}


def _split_check(params: dict[str, Any], fields: Fields, where: str) -> None:
    if ("every" in params) == ("ranges" in params):
        raise RequestError(f"{where} takes every or ranges, one of them", field=f"{where}.every")
    if "every" in params:
        fields["splitMode"] = "intervals"


def _select_check(params: dict[str, Any], fields: Fields, where: str) -> None:
    fields.update(splitMode="pages", splitUnify="true")


def _remediate_check(params: dict[str, Any], fields: Fields, where: str) -> None:
    if "profile" not in params:
        raise RequestError(f"{where}.profile is required", field=f"{where}.profile")


def _metadata_check(params: dict[str, Any], fields: Fields, where: str) -> None:
    if "metadata" not in fields:
        raise RequestError(
            f"{where} sets no metadata: give {', '.join(METADATA)}", field=f"{where}.title"
        )


CHECKS: dict[str, Callable[[dict[str, Any], Fields, str], None]] = {
    "split": _split_check,
    "select": _select_check,
    "remediate": _remediate_check,
    "set-metadata": _metadata_check,
}


def _text(value: Any) -> str:
    """A JSON value as the form field Gotenberg 8 would have taken."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _ranges(value: Any, where: str) -> list[str]:
    """`split`'s `ranges`: one part per entry, each a page selection (`1-3`, `4,6`)."""
    if not isinstance(value, list) or not value:
        raise RequestError(f"{where} must be a non-empty list of page selections", field=where)
    if not all(isinstance(entry, str) and entry.strip() for entry in value):
        raise RequestError(f'{where} must be a list of page selections such as "1-3"', field=where)
    return value


def _date(value: Any, where: str) -> str:
    """A PDF date (`D:20260101120000Z`) as the ISO 8601 the metadata step takes."""
    found = _PDF_DATE.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise RequestError(f"{where} must be a PDF date such as D:20260101120000Z", field=where)
    year, month, day, hour, minute, second, zone = found.groups()
    offset = "Z" if zone in (None, "Z") else f"{zone[:3]}:{zone.replace(chr(39), '')[3:5]}"
    return f"{year}-{month}-{day}T{hour}:{minute}:{second}{offset}"


def _permissions(given: Any, made: list[dict[str, Any]], where: str) -> None:
    """`encrypt`'s permissions taken off the step's (each is granted unless false)."""
    if not isinstance(given, dict):
        raise RequestError(
            f"{where}.permissions must be a JSON object", field=f"{where}.permissions"
        )
    for name, allowed in given.items():
        place = f"{where}.permissions.{name}"
        if name not in PERMISSIONS:
            raise refuse(place, f"Gotenberg's permissions are {', '.join(PERMISSIONS)}")
        if not isinstance(allowed, bool):
            raise RequestError(f"{place} must be true or false", field=place)
        if not allowed:
            for step in made:
                step["permissions"] = [p for p in step["permissions"] if p not in PERMISSIONS[name]]


def _told(exc: RequestError, names: dict[str, str], where: str) -> RequestError:
    """A mapping's problem with the 8.x field it read renamed as the stage's parameter."""
    field = exc.field or ""
    name = names.get(field, field.split(".", 1)[0] if field.startswith("metadata.") else field)
    message = exc.message
    for eight, nine in names.items():
        message = message.replace(f"'{eight}'", f"'{where}.{nine}'")
        if eight.startswith("metadata."):
            message = message.replace(eight, f"{where}.{nine}")
    return RequestError(message, field=f"{where}.{name}" if name else where)


def pipe(form: Form) -> Mapped:
    """`POST /forms/pdf/pipe`: the form's PDFs through its `stages`."""
    mapped = Mapped(body={}, files=[])
    pdfengines.inputs(form, mapped)
    stages = stages_of(form)
    if stages is None:
        raise RequestError("form field 'stages' is required", field="stages")
    apply(stages, mapped, form.files)
    mapped.files = [u for u in mapped.files if u not in mapped.withheld]
    unknown = form.unknown()
    if unknown:
        raise refuse(unknown[0], "Pressroom does not know this field")
    return mapped
