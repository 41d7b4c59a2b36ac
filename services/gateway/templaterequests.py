"""The bodies of the stored-template routes (`POST /templates`, `PATCH /templates/{id}`),
validated as `requests.py` validates jobs."""

from __future__ import annotations

import msgspec

from services.gateway.fieldchecks import convert, no_nul, not_blank
from services.gateway.jsonbody import parse_json
from services.gateway.requests import AssetNames, KeptFiles, TemplateName, check_template_id


class TemplateRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /templates`: a named Jinja2 template, with an optional page header and footer."""

    name: TemplateName
    """The template's name: a new name starts a template, a known one stores its next version."""
    body: str
    """The Jinja2 body; it must compile."""
    header: str | None = None
    """A page header template, printed at the top of every page."""
    footer: str | None = None
    """A page footer template, printed at the bottom of every page."""
    assets: AssetNames = msgspec.field(default_factory=list)
    """Stored assets this version bundles (`logo.png`, `brand.woff2@2`), fixed as they are
    now; files sent with a multipart request win over them by name."""
    keep_files: KeptFiles | None = None
    """Files an earlier version of this template bundles that this version bundles too,
    by reference (no bytes sent again): `{"version": 3}` keeps all of version 3's,
    `{"names": ["logo.png"]}` only those of the latest version. Files sent with the request
    and named `assets` win over them by name."""
    new: bool = False
    """Only start a template: a 409 (`conflict`, naming `name`) if the tenant has one of
    that name already, instead of storing its next version (the console's "New
    template")."""


class RenameRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`PATCH /templates/{id}`: a template's new name."""

    name: TemplateName
    """The new name, unique among the tenant's templates; the id and versions stay."""


def parse_rename(body: bytes) -> RenameRequest:
    """Validate a rename: a non-blank name without NUL."""
    renamed = convert(parse_json(body), RenameRequest)
    not_blank(renamed.name, "name")
    no_nul(renamed.name, "name")
    return renamed


def parse_template(body: bytes) -> TemplateRequest:
    """Validate a stored-template request: a non-blank name and body, no NUL. Whether the
    body, header and footer compile is checked apart (`templating.check_jinja`, in a jail)."""
    template = convert(parse_json(body), TemplateRequest)
    not_blank(template.name, "name")
    not_blank(template.body, "body")
    for field in ("name", "body", "header", "footer"):
        no_nul(getattr(template, field), field)
    if template.keep_files is not None and template.keep_files.template_id is not None:
        check_template_id(template.keep_files.template_id, "keep_files.template_id")
    return template
