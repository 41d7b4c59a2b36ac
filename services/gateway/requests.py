"""Requests: bodies and query parameters parsed strictly, every problem reported with the
field it concerns.

Size: one Struct per request body (its fields carry their descriptions, the strings under
them, for the OpenAPI document) with its checks beyond types; a split by route would
scatter the source, file and template checks that job and batch requests share.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from aiohttp import web

from services.core.log.pagesecrets import check_secrets
from services.core.model import filenames, outputs, pageoptions
from services.core.model.errors import NotFound, RequestError
from services.core.model.events import BatchItem
from services.core.model.numbers import bounded_int
from services.core.model.options import check_options
from services.core.model.pageoptions import Margin, Mark, Metadata, PageOptions, WaitFor
from services.core.sandbox import markdown
from services.core.secrets.signing import parse_secrets
from services.gateway.fieldchecks import convert, no_nul, not_blank
from services.gateway.headers import header
from services.gateway.jsonbody import parse_json
from services.gateway.pdfrequests import PdfWorkRequest, check_work
from services.gateway.secretrequests import PageSecretsRequest

# Matched whole (`fullmatch`): `$` alone lets a final newline through, into a NATS subject.
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[0-9]{1,7})?$")  # `<batch_id>.<index>`: an item
BATCH_ID = re.compile(r"^b[0-9a-f]{31}$")
TEMPLATE_ID = re.compile(r"^[0-9a-f]{32}$")

# Versions are PostgreSQL `integer`s: a larger number can name no version, and asyncpg
# would refuse to send it.
MAX_VERSION = 2**31 - 1

SOURCES = ("template", "template_id", "html", "url", "markdown", "pdf")
"""The fields a job's document can come from; a job gives exactly one, but for `markdown`,
which `template` or `template_id` may wrap (`pdf`: PDFs in, steps run on them,
`gateway/pdfjobs.py`)."""
WRAPPERS = ("template", "template_id")
"""The sources that may wrap `markdown`: a template given its HTML as `content`."""

Version = Annotated[int, msgspec.Meta(ge=1, le=MAX_VERSION)]
AssetNames = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]],
    msgspec.Meta(max_length=10_000),
]
TemplateName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]

_T = TypeVar("_T")


class MarginRequest(Margin, forbid_unknown_fields=True):
    """`options.margin` as a request gives it: unknown fields are an error."""


class WaitForRequest(WaitFor, forbid_unknown_fields=True):
    """`options.wait_for` as a request gives it: unknown fields are an error."""


class MetadataRequest(Metadata, forbid_unknown_fields=True):
    """`options.metadata` as a request gives it: unknown fields are an error."""


class FacturXRequest(pageoptions.FacturX, forbid_unknown_fields=True):
    """`options.facturx` as a request gives it: unknown fields are an error."""


class AttachmentRequest(pageoptions.Attachment, forbid_unknown_fields=True):
    """An item of `options.attachments` as a request gives it: unknown fields are an error."""


class EncryptRequest(pageoptions.Encrypt, forbid_unknown_fields=True):
    """`options.encrypt` as a request gives it: unknown fields are an error."""


class MarkRequest(Mark, forbid_unknown_fields=True):
    """`options.watermark` or `options.stamp` as a request gives it: unknown fields are an
    error."""


class SignRequest(pageoptions.Sign, forbid_unknown_fields=True):
    """`options.sign` as a request gives it: unknown fields (a key, a certificate) are an
    error."""


class MediaFeatureRequest(pageoptions.MediaFeature, forbid_unknown_fields=True):
    """`options.media_features[]` as a request gives it: strict about fields."""


class OptionsRequest(PageOptions, forbid_unknown_fields=True):
    """`options` as a request gives it: the event's `PageOptions`, strict about fields."""

    margin: MarginRequest | None = None
    wait_for: WaitForRequest | None = None
    metadata: MetadataRequest | None = None
    facturx: FacturXRequest | None = None
    attachments: tuple[AttachmentRequest, ...] | None = None
    encrypt: EncryptRequest | None = None
    watermark: MarkRequest | None = None
    stamp: MarkRequest | None = None
    sign: SignRequest | None = None
    media_features: tuple[MediaFeatureRequest, ...] | None = None


class KeptFiles(msgspec.Struct, forbid_unknown_fields=True):
    """Files a stored template version bundles, taken by reference: no bytes are sent
    again (`keep_files` of `POST /templates`, `template_files` of a job)."""

    template_id: str | None = None
    """The tenant's template whose version holds the files (for `keep_files`, the template
    being stored, which is also the default)."""
    version: Version | None = None
    """Which version of it (the latest by default)."""
    names: AssetNames | None = None
    """The files to take, by name (every file of the version by default; `[]` none)."""


class JobRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /jobs`: exactly one source (see `SOURCES`), data for a template source, page
    options and an optional webhook."""

    template: str | None = None
    """A Jinja2 template, rendered with `data` (one of the four sources)."""
    template_id: str | None = None
    """A stored template's id (`POST /templates`), rendered with `data`."""
    template_name: TemplateName | None = None
    """A stored template's name, instead of its id: the caller's own template of that
    name (another tenant's never resolves)."""
    template_version: Version | None = None
    """With `template_id` or `template_name`: which version (the latest by default)."""
    html: str | None = None
    """HTML printed as it is."""
    url: str | None = None
    """An http(s) page to print (public addresses only, unless the installation allows private
    ones)."""
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    """The template's variables (only with `template` or `template_id`)."""
    webhook_url: str | None = None
    """Where to send the signed webhook when the job ends (`webhookUrl` is taken too)."""
    webhook_secret: str | None = None
    """A `whsec_...` secret to sign this job's webhook with, instead of the tenant's (needs
    `webhook_url`)."""
    markdown: str | None = None
    """Markdown (CommonMark with GitHub's tables, strikethrough and task lists), printed as a styled
    document, or given as `content` to `template` or `template_id`."""
    stylesheet: str | None = None
    """CSS for a `markdown` job, applied after the default style (or given as `stylesheet` to its
    template)."""
    options: OptionsRequest = msgspec.field(default_factory=OptionsRequest)
    """How the page is printed."""
    pdf: PdfWorkRequest | None = None
    """PDFs in and steps run on them (merge, split, pdfa…), instead of a page to print."""
    preview: bool = False
    """A template preview (an editor's render): not billed, not listed by `GET /jobs`, a
    few unfinished at a time per tenant, and cancelled by a newer preview of the same
    template through the same API key. Only with `template`, `template_id` or
    `template_name`."""
    assets: AssetNames = msgspec.field(default_factory=list)
    """Stored assets (`POST /assets`) the page may refer to by relative name: `logo.png`
    (the latest version) or `brand.woff2@2`; files sent with a multipart request win over
    them by name. Only with `html`, `template` or `template_id`."""
    page_secrets: PageSecretsRequest | None = None
    """Cookies and extra headers the page's requests carry (`scope`d headers only where
    their expression matches the URL), sealed with the server key on the log."""
    template_files: KeptFiles | None = None
    """With `template`: files of a stored template version (its `template_id`) the page
    gets by name, as a job rendering that version would; an editor previews unsaved text
    with them. Files sent with the job and named `assets` win over them by name."""


class BatchItemRequest(BatchItem, forbid_unknown_fields=True):
    """One item of `POST /batches`: its data, and its file name, url or markdown when
    given. The gateway fills in every missing file name (`parse_batch`)."""


class BatchRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`POST /batches`: a source shared by every item (`template` or `template_id`, which
    may wrap each item's `markdown`), or a `url` or `markdown` per item; the items, page
    options for all of them, the output and a webhook."""

    items: Annotated[list[BatchItemRequest], msgspec.Meta(min_length=1)]
    """The items, at least one (at most `PRESSROOM_MAX_BATCH_ITEMS`): data per item, or a url per
    item without a template."""
    template: str | None = None
    """A Jinja2 template every item renders with its own data."""
    template_id: str | None = None
    """A stored template every item renders with its own data."""
    template_name: TemplateName | None = None
    """A stored template's name, instead of its id (the caller's own template of that name)."""
    template_version: Version | None = None
    """With `template_id` or `template_name`: which version (the latest by default)."""
    html: str | None = None  # only to refuse it by name: it cannot vary per item
    """Refused: a batch's source must vary per item."""
    webhook_url: str | None = None
    """Where to send the batch's signed webhooks."""
    webhook_secret: str | None = None
    """A `whsec_...` secret for this batch's webhooks (needs `webhook_url`)."""
    options: OptionsRequest = msgspec.field(default_factory=OptionsRequest)
    """How every item's page is printed."""
    output: Literal["zip", "merged"] = "zip"
    """One ZIP of the items' files, or one merged PDF (needs `options.output` pdf)."""
    progress_webhooks: bool = False
    """Also send `batch.progress` webhooks while it runs (needs `webhook_url`)."""
    assets: AssetNames = msgspec.field(default_factory=list)
    """Stored assets every item's page may refer to by name (`logo.png`, `brand.woff2@2`),
    with the stored template's own files; only with `template` or `template_id`."""


async def read_json_body(request: web.Request) -> bytes:
    """The raw body of a request that must say `Content-Type: application/json`."""
    content_type = header(request, "Content-Type") or ""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime != "application/json" and not mime.endswith("+json"):
        shown = content_type or "none"
        raise RequestError(
            f"Content-Type must be application/json, got {shown}", field="Content-Type"
        )
    return await request.read()


def parse_struct(body: bytes, kind: type[_T]) -> _T:
    """A JSON object body as `kind`; `RequestError` naming the field that is wrong."""
    return convert(parse_json(body), kind)


def _one_source(job: JobRequest) -> str:
    """The one source field given; `RequestError` if none or several are.

    With none, the error names `template` (the usual source); with several, the first
    one beyond the first, in `SOURCES` order.
    """
    given = [name for name in SOURCES if _given(job, name)]
    if job.markdown is not None:
        wrappers = [name for name in given if name in WRAPPERS]
        if len(wrappers) > 1:
            raise RequestError("give template or template_id, not both", field="template_id")
        given = [name for name in given if name not in WRAPPERS]
    if len(given) == 1:
        return given[0]
    wanted = f"give exactly one of {', '.join(SOURCES)}"
    if not given:
        raise RequestError(wanted, field="template")
    raise RequestError(f"{wanted}; got {', '.join(given)}", field=given[1])


def _given(job: JobRequest, source: str) -> bool:
    """Whether `job` gives `source`; a `template_name` gives the stored-template source
    `template_id` stands for."""
    if source == "template_id" and job.template_name is not None:
        return True
    return getattr(job, source) is not None


def _check_stored(request: JobRequest | BatchRequest) -> None:
    """`template_id` or `template_name`, not both; a well-formed id; a non-blank name;
    `template_version` only with one of them."""
    if request.template_id is not None and request.template_name is not None:
        raise RequestError("give template_id or template_name, not both", field="template_name")
    if request.template_name is not None:
        not_blank(request.template_name, "template_name")
        no_nul(request.template_name, "template_name")
    if request.template_version is not None and not _stored(request):
        raise RequestError(
            "template_version needs template_id or template_name", field="template_version"
        )
    if request.template_id is not None and not TEMPLATE_ID.fullmatch(request.template_id):
        raise RequestError(
            f"no stored template has id {request.template_id!r}", field="template_id"
        )


def _stored(request: JobRequest | BatchRequest) -> bool:
    return request.template_id is not None or request.template_name is not None


def _check_source(job: JobRequest) -> None:
    """Exactly one non-blank source; `template_version` and `data` only where they apply."""
    source = _one_source(job)
    if source == "template_id" and job.template_name is not None:
        source = "template_name"
    if source != "pdf":
        not_blank(getattr(job, source), source)
    _check_stored(job)
    if job.data and (source in {"html", "url", "pdf"} or _unwrapped_markdown(job)):
        raise RequestError(
            f"data is only used with template or template_id, not with {source}", field="data"
        )
    if source == "markdown":
        _check_markdown(job)
    elif job.stylesheet is not None:
        raise RequestError("stylesheet is only used with markdown", field="stylesheet")
    if job.pdf is not None:
        check_work(job.pdf)
    if job.preview and source not in {*WRAPPERS, "template_name"}:
        raise RequestError(
            "preview is only used with template, template_id or template_name", field="preview"
        )


def _check_template_files(kept: KeptFiles, job: JobRequest) -> None:
    """`template_files` only with an inline `template`, naming a well-formed template id."""
    if job.template is None:
        raise RequestError(
            "template_files is only used with template (a stored template's job gets its "
            "own version's files)",
            field="template_files",
        )
    if kept.template_id is None:
        raise RequestError(
            "template_files needs the template_id whose files to take",
            field="template_files.template_id",
        )
    check_template_id(kept.template_id, "template_files.template_id")


def check_template_id(template_id: str, field: str) -> None:
    """`NotFound` naming `field` unless `template_id` has the form of a template's id."""
    if not TEMPLATE_ID.fullmatch(template_id):
        raise NotFound(f"no template {template_id!r}", field=field)


def _unwrapped_markdown(job: JobRequest) -> bool:
    return job.markdown is not None and job.template is None and not _stored(job)


def _check_markdown(job: JobRequest) -> None:
    """A wrapping template's `data` leaves it the names the Markdown fills in; a
    stylesheet stays inside its `<style>`."""
    for name in job.data:
        if name in markdown.RESERVED:
            raise RequestError(
                f"data.{name} is given to the template by the markdown job itself",
                field=f"data.{name}",
            )
    if job.template is not None:
        not_blank(job.template, "template")
    if job.stylesheet is not None and "</style" in job.stylesheet.lower():
        raise RequestError("stylesheet must not contain </style", field="stylesheet")


def parse_job(body: bytes) -> JobRequest:
    """Validate a job request; `RequestError.field` names the offending field.

    The address policy for `url` and `webhook_url` and the existence of a `template_id`
    are checked by the caller, which can resolve names and reach PostgreSQL.
    """
    raw = parse_json(body)
    if "webhookUrl" in raw:
        if "webhook_url" in raw:
            raise RequestError("give webhook_url or webhookUrl, not both", field="webhookUrl")
        raw["webhook_url"] = raw.pop("webhookUrl")
    job = convert(raw, JobRequest)
    if job.pdf is not None and "options" in raw:
        raise RequestError("options print a page; a pdf job's work is its steps", field="options")
    _check_source(job)
    if job.template_files is not None:
        _check_template_files(job.template_files, job)
    _check_webhook_secret(job.webhook_secret, job.webhook_url)
    check_options(job.options)
    if job.page_secrets is not None:
        check_secrets(job.page_secrets, "page_secrets", pdf=job.pdf is not None)
    return job


def _check_webhook_secret(secret: str | None, webhook_url: str | None) -> None:
    """A per-job signing secret: Standard Webhooks format, and only with a webhook."""
    if secret is None:
        return
    if webhook_url is None:
        raise RequestError("webhook_secret needs a webhook_url", field="webhook_secret")
    try:
        parse_secrets(secret)
    except ValueError as exc:
        raise RequestError(f"webhook_secret is invalid: {exc}", field="webhook_secret") from None


def int_param(query: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    """The integer query parameter `name` within [low, high], None if absent."""
    raw = query.get(name)
    if raw is None:
        return None
    value = bounded_int(raw, low, high)
    if value is None:
        raise RequestError(f"{name} must be an integer from {low} to {high}", field=name)
    return value


def fingerprint(request: JobRequest | BatchRequest) -> str:
    """What makes two requests the same request: every field, in a canonical order."""
    return hashlib.sha256(msgspec.json.encode(request, order="sorted")).hexdigest()


JSON_LINES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines")
"""Content types of a batch sent as JSON Lines: the batch's fields on the first line, then
one item per line."""


def is_json_lines(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in JSON_LINES


def parse_batch_lines(body: bytes, max_items: int) -> BatchRequest:
    """A batch sent as JSON Lines: the first line holds its fields (everything but
    `items`), each further line one item; blank lines are skipped. An item's error names
    it by index like a JSON body's (`items[17].filename`), and a line that is no JSON
    object by its line number."""
    lines = body.split(b"\n")
    fields = parse_json(lines[0]) if lines[0].strip() else {}
    if "items" in fields:
        raise RequestError(
            "in JSON Lines the items are the lines after the first, not an `items` field",
            field="items",
        )
    items: list[dict[str, Any]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if len(items) >= max_items:
            raise RequestError(
                f"a batch has at most {max_items} items (PRESSROOM_MAX_BATCH_ITEMS)",
                field="items",
            )
        try:
            items.append(parse_json(line))
        except RequestError as exc:
            raise _in_line(exc, number, f"items[{len(items)}]") from None
    return _checked_batch(convert({**fields, "items": items}, BatchRequest), max_items)


def _in_line(exc: RequestError, number: int, item: str) -> RequestError:
    """A JSON Lines item's error: about the item (`items[3]`, "line 5 is not valid JSON")
    or about a field inside it (`items[3].data.n`, "line 5: data.n is …")."""
    if exc.field in (None, "body"):
        return RequestError(exc.message.replace("body", f"line {number}", 1), field=item)
    return RequestError(f"line {number}: {exc.message}", field=f"{item}.{exc.field}")


def parse_batch(body: bytes, max_items: int) -> BatchRequest:
    """Validate a batch request; `RequestError.field` names the offending field, inside an
    item by its index (`items[17].filename`). Every item comes back with its file name:
    the one given, or `<index>.<extension>` (`default_filename`).

    As for jobs, the address policy for urls and whether a `template_id` exists are
    checked by the caller.
    """
    return _checked_batch(convert(parse_json(body), BatchRequest), max_items)


def _checked_batch(batch: BatchRequest, max_items: int) -> BatchRequest:
    """The rules beyond the types, shared by JSON and JSON Lines bodies."""
    if len(batch.items) > max_items:
        raise RequestError(
            f"a batch has at most {max_items} items (PRESSROOM_MAX_BATCH_ITEMS); "
            f"got {len(batch.items)}",
            field="items",
        )
    _check_batch_source(batch)
    _check_webhook_secret(batch.webhook_secret, batch.webhook_url)
    if batch.progress_webhooks and batch.webhook_url is None:
        raise RequestError(
            "progress_webhooks needs a webhook_url to send them to", field="progress_webhooks"
        )
    check_options(batch.options)
    if batch.output == "merged" and batch.options.output != "pdf":
        raise RequestError(
            'output "merged" joins PDFs: it needs options.output pdf', field="output"
        )
    _name_items(batch.items, extension_of(batch))
    return batch


def _check_batch_source(batch: BatchRequest) -> None:
    """A template (inline or stored) with data per item, or else a url in every item."""
    if batch.html is not None:
        raise RequestError(
            "a batch needs a source that varies per item: template or template_id with "
            "data per item, or a url or markdown per item; not html",
            field="html",
        )
    if batch.template is not None and _stored(batch):
        field = "template_id" if batch.template_id is not None else "template_name"
        raise RequestError(f"give template or {field}, not both", field=field)
    if batch.template is not None:
        not_blank(batch.template, "template")
    _check_stored(batch)
    templated = batch.template is not None or _stored(batch)
    for index, item in enumerate(batch.items):
        _check_item_source(item, f"items[{index}]", templated)


def _check_item_source(item: BatchItemRequest, name: str, templated: bool) -> None:
    if item.markdown is not None:
        _check_item_markdown(item, name)
    elif templated and item.url is not None:
        raise RequestError(
            f"{name}.url: an item has a url only in a batch without template or template_id",
            field=f"{name}.url",
        )
    if not templated and item.url is None and item.markdown is None:
        raise RequestError(
            f"{name}.url is needed: a batch without template or template_id renders "
            "each item's url or markdown",
            field=f"{name}.url",
        )
    if not templated and item.data:
        raise RequestError(
            f"{name}.data is only used with template or template_id", field=f"{name}.data"
        )


def _check_item_markdown(item: BatchItemRequest, name: str) -> None:
    """An item's Markdown: not blank, not with a url, its data leaving the wrapping
    template the names the Markdown fills in."""
    not_blank(item.markdown or "", f"{name}.markdown")
    if item.url is not None:
        raise RequestError(f"{name}: give url or markdown, not both", field=f"{name}.url")
    for reserved in markdown.RESERVED:
        if reserved in item.data:
            raise RequestError(
                f"{name}.data.{reserved} is given to the template by the item's markdown",
                field=f"{name}.data.{reserved}",
            )


def extension_of(batch: BatchRequest) -> str:
    """The extension of every item's file: what `options.output` makes."""
    return outputs.extension_of(batch.options.output)


def default_filename(index: int, total: int, extension: str) -> str:
    """`00017.pdf`: the index, zero-padded to at least 5 digits (wider for huge batches),
    so an archive's files sort in item order."""
    width = max(5, len(str(total - 1)))
    return f"{index:0{width}d}.{extension}"


def _checked_filename(name: str, extension: str, field: str) -> str:
    """A name the archive will hold as given (`filenames.problem`: no path, drive, device,
    hidden file, control or bidi character, at most 255 bytes) with the extension of what
    the item renders to; in NFC, the one change the rule makes without asking."""
    problem = filenames.problem(name)
    if problem is not None:
        raise RequestError(f"{field} {problem}", field=field)
    if not name.lower().endswith(f".{extension}"):
        raise RequestError(f"{field} must end with .{extension}", field=field)
    return unicodedata.normalize("NFC", name)  # what safe_name makes of it, for less


def _name_items(items: list[BatchItemRequest], extension: str) -> None:
    """Check every given file name, give the others their default, and refuse two items
    with one name (ignoring case and normalisation, `filenames.key`: archives are
    extracted on case-insensitive disks too).
    A clash with a default name is blamed on the item that gave its name."""
    for index, item in enumerate(items):
        if item.filename is not None:
            item.filename = _checked_filename(item.filename, extension, f"items[{index}].filename")
    names = [i.filename or default_filename(n, len(items), extension) for n, i in enumerate(items)]
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        first = seen.setdefault(filenames.key(name), index)
        if first != index:
            blamed, other = (index, first) if items[index].filename is not None else (first, index)
            field = f"items[{blamed}].filename"
            raise RequestError(
                f"{field} {name!r} is also the file name of items[{other}] (ignoring case)",
                field=field,
            )
    for item, name in zip(items, names, strict=True):
        item.filename = name
