"""Gotenberg's Chromium form fields, mapped onto Pressroom's own job request.

The result is the JSON body `POST /jobs` takes, checked by the same `parse_job`: there is
no second set of rules. `Mapped.origin` remembers which form field each option came
from, so a problem Pressroom finds in `options.margin.top` is told as `marginTop`.

Gotenberg's defaults are kept where they differ from Pressroom's (Letter paper, 0.39 in
margins, no backgrounds, untagged), so a form gives the document it gives Gotenberg. A
field Pressroom cannot honour, or any field it does not know, is a `400` naming it.

Size: one mapping per group of Gotenberg form fields (page, waiting, network, metadata,
passwords, embeds, screenshot), all writing the same `Mapped` and its record of each
option's form field; split by group, they would share that record across modules.
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from services.core.log.pagesecrets import PageSecrets
from services.core.model.errors import RequestError
from services.core.model.files import sniff
from services.core.sandbox import markdown
from services.gateway.compiles import FairJail
from services.gateway.gotenberg import forms, pagefields
from services.gateway.gotenberg.forms import Form, Upload

LETTER = (8.5, 11.0)
MARGIN = 0.39
"""Gotenberg's default paper (inches) and margin on every side (inches)."""

SPECIAL = ("index.html", "header.html", "footer.html")
"""Files a Chromium form names by file name: the page, its header and its footer."""

PDFA = {"PDF/A-2b": "2b", "PDF/A-3b": "3b"}
"""Gotenberg's `pdfa` values Pressroom writes."""

METADATA_KEYS = {"Title": "title", "Author": "author", "Subject": "subject", "Keywords": "keywords"}
MORE_METADATA = {
    "Creator": "creator",
    "Producer": "producer",
    "CreationDate": "created",
    "ModDate": "modified",
    "Trapped": "trapped",
    "Copyright": "rights",
    "Marked": "marked",
    "PDFVersion": "version",
}
"""ExifTool-style keys the PDF tools' `metadata` step writes besides those four."""
"""ExifTool-style keys of `metadata` that the Chromium routes write (the document
information Pressroom sets while printing)."""

IMAGE_FORMATS = ("png", "jpeg", "webp")
SCREEN = (800, 600)
"""Gotenberg's default screenshot viewport, CSS px."""

_TO_HTML = re.compile(r"\{\{-?\s*toHTML\s+\"([^\"]+)\"\s*-?\}\}")
"""A Markdown form's `{{ toHTML "file.md" }}`: where that file's HTML goes."""


@dataclass
class Mapped:
    """A job body in Pressroom's shape, the uploaded files the page reaches by name, and
    for each option path the form field it came from."""

    body: dict[str, Any]
    files: list[Upload]
    origin: dict[str, str] = field(default_factory=dict)
    fail_on_refused: bool = False
    report: bool = False
    """Answer with what the job's report read (`metadata/read`), not its document."""
    bookmarks: bool = False
    """The report read is the bookmarks' (`bookmarks/read`), not the metadata's."""
    later_metadata: dict[str, str | bool] = field(default_factory=dict)
    """Metadata the printed PDF gets from a PDF-tools step afterwards."""
    later: list[dict[str, Any]] = field(default_factory=list)
    """PDF-tools steps run on the printed PDF, as a second job (`postprocess`)."""
    withheld: list[Upload] = field(default_factory=list)
    """Uploads that are never job files: a `sign` stage's certificate and key (`pipe`)."""
    secrets: PageSecrets = field(default_factory=PageSecrets)
    """Cookies and extra headers, sealed for the job on its way to the log (`pagefields`)."""

    def option(self, path: str, value: Any, source: str) -> None:
        """Set `options.<path>` (dotted) to `value`, told as form field `source`."""
        options = self.body.setdefault("options", {})
        *parents, last = path.split(".")
        for name in parents:
            options = options.setdefault(name, {})
        options[last] = value
        self.origin.setdefault(f"options.{path}", source)

    def field_of(self, pressroom_field: str | None) -> str | None:
        """The form field a Pressroom field came from (the longest known prefix)."""
        if pressroom_field is None:
            return None
        found = [
            path
            for path in self.origin
            if pressroom_field == path or pressroom_field.startswith((path + ".", path + "["))
        ]
        return self.origin[max(found, key=len)] if found else None


def refuse(name: str, why: str) -> RequestError:
    return RequestError(f"form field {name!r} is not supported: {why}", field=name)


def _text(upload: Upload) -> str:
    try:
        return upload.data.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(f"{upload.filename} is not UTF-8 text", field=upload.filename) from None


def source(form: Form, mapped: Mapped, kind: str) -> None:
    """The page: `url`, or `index.html` (for Markdown, with each `{{ toHTML "x.md" }}`
    replaced by that file's HTML, made by Pressroom's Markdown parser)."""
    if kind == "url":
        url = form.text("url")
        if url is None:
            raise RequestError("form field 'url' is required", field="url")
        mapped.body["url"] = url
        mapped.origin["url"] = "url"
        return
    named = {u.filename: u for u in form.files if u.part != "embeds"}
    index = named.get("index.html")
    if index is None:
        raise RequestError("the form has no index.html file", field="index.html")
    html = _text(index)
    if kind == "markdown":
        html = _TO_HTML.sub(lambda found: _markdown(named, found[1], form), html)
    mapped.body["html"] = html
    mapped.origin["html"] = "index.html"


def _markdown(named: dict[str, Upload], name: str, form: Form) -> str:
    if named.get(name) is None:
        raise RequestError(f"index.html asks for {name!r}, which the form lacks", field=name)
    return form.markdown[name]


async def convert_markdown(form: Form, jail: FairJail, tenant: str) -> None:
    """Make the HTML of each Markdown file `index.html` names, in the gateway's template
    workers within the tenant's share (`compiles.FairJail`): a parser can take seconds
    on a large or hostile file, which on the event loop would hold every tenant's
    requests. Missing files and text that is not UTF-8 are left to `source` to refuse."""
    named = {u.filename: u for u in form.files if u.part != "embeds"}
    index = named.get("index.html")
    if index is None:
        return
    for name in dict.fromkeys(_TO_HTML.findall(_text(index))):
        upload = named.get(name)
        if upload is not None and name not in form.markdown:
            form.markdown[name] = (await jail.call(tenant, markdown.to_html, _text(upload)))[0]


def header_footer(form: Form, mapped: Mapped) -> None:
    for upload in form.files:
        if upload.part == "embeds":
            continue
        if upload.filename == "header.html":
            mapped.option("header_template", _text(upload), "header.html")
        elif upload.filename == "footer.html":
            mapped.option("footer_template", _text(upload), "footer.html")


def page(form: Form, mapped: Mapped) -> None:
    """Paper, margins and the other print settings."""
    width = forms.inches(form, "paperWidth", LETTER[0])
    height = forms.inches(form, "paperHeight", LETTER[1])
    mapped.option("width", f"{width:.6g}in", "paperWidth")
    mapped.option("height", f"{height:.6g}in", "paperHeight")
    for side in ("top", "right", "bottom", "left"):
        name = "margin" + side.capitalize()
        mapped.option(f"margin.{side}", f"{forms.inches(form, name, MARGIN):.6g}in", name)
    mapped.origin["options.margin"] = "marginTop"
    mapped.option(
        "prefer_css_page_size", form.flag("preferCssPageSize", False), "preferCssPageSize"
    )
    mapped.option("print_background", form.flag("printBackground", False), "printBackground")
    mapped.option("landscape", form.flag("landscape", False), "landscape")
    mapped.option("scale", form.number("scale", 1.0, 0.1, 2.0), "scale")
    ranges = form.text("nativePageRanges")
    if ranges is not None:
        mapped.option("page_ranges", ranges, "nativePageRanges")
    outline_field = renamed(form, "generateDocumentOutline")
    tagged_field = renamed(form, "generateTaggedPdf")
    outline = form.flag(outline_field, False)
    tagged = form.flag(tagged_field, False) or outline
    mapped.option("tagged", tagged, tagged_field)
    if outline:
        mapped.option("outline", True, outline_field)
    if form.flag("singlePage", False):
        raise refuse("singlePage", "Pressroom prints pages of the paper size asked for")
    if form.flag("omitBackground", False):
        raise refuse("omitBackground", "Pressroom's PDFs keep the page's white background")
    media = form.text("emulatedMediaType") or "print"
    mapped.option("emulate_media", media, "emulatedMediaType")


RENAMED = {"generateDocumentOutline": "nativeBookmarks", "generateTaggedPdf": "nativeTaggedPdf"}
"""Chromium fields Gotenberg 9 renamed (its upgrade page): its name is read as the 8.x
one is, and the two together are a `400`."""


def renamed(form: Form, eight: str) -> str:
    """Which of a renamed field's names the form gives (8.x's when neither)."""
    nine = RENAMED[eight]
    if form.text(nine) is None:
        return eight
    if form.text(eight) is not None:
        raise RequestError(
            f"form fields {eight!r} (Gotenberg 8) and {nine!r} (Gotenberg 9) are one setting:"
            " give one of them",
            field=nine,
        )
    return nine


def waiting(form: Form, mapped: Mapped) -> None:
    """`waitDelay`, `waitForExpression`, `waitForSelector` and `skipNetworkIdleEvent`
    as Pressroom's one `wait_for` condition: a delay is the expression
    `performance.now() >= <ms>` (time since the page began loading), joined to an
    expression by `&&`."""
    delay = forms.seconds(form, "waitDelay")
    expression = form.text("waitForExpression")
    selector = form.text("waitForSelector")
    idle = not form.flag("skipNetworkIdleEvent", True)
    idle = not form.flag("skipNetworkAlmostIdleEvent", True) or idle
    conditions = []
    if delay:
        conditions.append(f"performance.now() >= {delay * 1000:.0f}")
    if expression is not None:
        conditions.append(f"!!({expression})")
    given = [n for n, v in (("waitForSelector", selector), ("skipNetworkIdleEvent", idle)) if v]
    if conditions and given:
        raise refuse(
            given[0],
            "Pressroom waits for one condition: waitDelay and "
            "waitForExpression, a selector, or network idle",
        )
    if len(given) > 1:
        raise refuse(given[1], "Pressroom waits for one condition: a selector or network idle")
    source = "waitForExpression" if expression is not None else "waitDelay"
    if conditions:
        mapped.option("wait_for.expression", " && ".join(conditions), source)
    elif selector is not None:
        mapped.option("wait_for.selector", selector, "waitForSelector")
    elif idle:
        mapped.option("wait_for.network_idle", True, "skipNetworkIdleEvent")


def network(form: Form, mapped: Mapped) -> None:
    """What Chromium sends, what the page sees, and when a load fails the job."""
    mapped.secrets = pagefields.secrets(form)
    agent = form.text("userAgent")
    if agent:
        mapped.option("user_agent", agent, "userAgent")
    if form.text("downloadFrom") is not None:
        raise refuse("downloadFrom", DOWNLOAD_FROM)
    codes = form.json("failOnHttpStatusCodes")
    if codes is not None:  # absent or empty: Gotenberg's [499, 599], Pressroom's default
        mapped.option("fail_on_status", codes, "failOnHttpStatusCodes")
    resource_codes = form.json("failOnResourceHttpStatusCodes")
    if resource_codes:
        mapped.option("fail_on_resource_status", resource_codes, "failOnResourceHttpStatusCodes")
        ignored = form.json("ignoreResourceHttpStatusDomains")
        if ignored:
            hosts = ignored_hosts(ignored)
            mapped.option("ignore_resource_status_hosts", hosts, "ignoreResourceHttpStatusDomains")
    else:
        form.json("ignoreResourceHttpStatusDomains")  # nothing to ignore: taken, as Gotenberg
    features = form.json("emulatedMediaFeatures")
    if features:
        mapped.option("media_features", features, "emulatedMediaFeatures")
    if form.flag("failOnConsoleExceptions", False):
        mapped.option("fail_on_page_errors", True, "failOnConsoleExceptions")
    mapped.fail_on_refused = form.flag("failOnResourceLoadingFailed", False)


def ignored_hosts(domains: Any) -> Any:
    """Gotenberg's `ignoreResourceHttpStatusDomains` as host names: each entry lowered,
    with a scheme, path, port or leading `*.` or `.` taken off, as Gotenberg reads them
    (`https://CDN.example:443/x` is `cdn.example`). What is no list of strings is passed
    on for `parse_job` to refuse, naming the field."""
    if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
        return domains
    hosts = []
    for domain in domains:
        host = domain.strip().lower().split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
        hosts.append(host.removeprefix("*.").removeprefix("."))
    return hosts


DOWNLOAD_FROM = (
    "Pressroom does not fetch a form's files from URLs: the gateway would make requests to "
    "addresses a caller chooses, outside the renderer's sandbox (SSRF); send the files in "
    "the form, or let the page load them itself under the sandbox's address policy"
)


def finishing(form: Form, mapped: Mapped) -> None:
    """PDF/A, metadata, passwords and embedded files, done by Pressroom's finishing."""
    pdfa = form.text("pdfa")
    if pdfa is not None:
        if pdfa not in PDFA:
            raise refuse("pdfa", f"Pressroom writes {' and '.join(PDFA)}, not {pdfa!r}")
        mapped.option("pdfa", PDFA[pdfa], "pdfa")
    metadata(form, mapped)
    passwords(form, mapped)
    embeds(form, mapped)


def metadata(form: Form, mapped: Mapped) -> None:
    given = form.json("metadata")
    if given is None:
        return
    if not isinstance(given, dict):
        raise RequestError("form field 'metadata' must be a JSON object", field="metadata")
    for key, value in given.items():
        target = METADATA_KEYS.get(key) or MORE_METADATA.get(key)
        if target is None:
            raise refuse(f"metadata.{key}", KNOWN_METADATA)
        value = metadata_value(key, value)
        if key in METADATA_KEYS:
            mapped.option(f"metadata.{target}", value, f"metadata.{key}")
        else:  # written by a PDF-tools step after printing (`postprocess`)
            mapped.later_metadata[target] = value


KNOWN_METADATA = f"Pressroom writes {', '.join([*METADATA_KEYS, *MORE_METADATA])}"


def metadata_value(key: str, value: Any) -> str | bool:
    """A `metadata` value as the PDF tools' `metadata` step takes it: text; a list of
    `Keywords` joined; `Marked` true or false; `PDFVersion` such as `1.5` (a JSON number
    or text)."""
    where = f"metadata.{key}"
    if key == "Keywords" and isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if key == "Marked" and (isinstance(value, bool) or str(value).lower() in ("true", "false")):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if key == "Marked":
        raise RequestError(f"{where} must be true or false", field=where)
    if key == "PDFVersion" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.1f}"
    if not isinstance(value, str):
        raise RequestError(f"{where} must be a string", field=where)
    return value


ALLOW = {
    "allowPrinting": ("print", "print_high"),
    "allowCopying": ("copy",),
    "allowModifying": ("modify",),
    "allowAnnotating": ("annotate",),
    "allowFillingForms": ("fill_forms",),
    "allowAssembling": ("assemble",),
}
"""Gotenberg's permission fields (8.34, each default true) and the Pressroom permissions
(`finishingoptions.PERMISSIONS`) each grants: printing is printing at full quality, as
Gotenberg's `--print=full`."""


def permissions(form: Form, *, protected: bool) -> list[str]:
    """The permissions the `allow…` fields grant. A restriction without a password to
    anchor it (`protected` false) is a `400` naming the field, as in Gotenberg."""
    granted: list[str] = []
    for name, grants in ALLOW.items():
        if form.flag(name, True):
            granted.extend(grants)
        elif not protected:
            raise RequestError(
                f"form field {name!r} restricts a permission: it needs a userPassword or "
                "ownerPassword",
                field=name,
            )
    return granted


def passwords(form: Form, mapped: Mapped) -> None:
    """Gotenberg's passwords as Pressroom's AES-256: the user password opens the file
    with the permissions of the `allow…` fields (every one by default); without an owner
    password a random one is made (no one but the user password's holders can open it,
    as with Gotenberg)."""
    user = form.text("userPassword")
    owner = form.text("ownerPassword")
    granted = permissions(form, protected=user is not None or owner is not None)
    if user is None and owner is None:
        return
    mapped.option("encrypt.owner_password", owner or secrets.token_urlsafe(24), "ownerPassword")
    if user is not None:
        mapped.option("encrypt.user_password", user, "userPassword")
    mapped.option("encrypt.permissions", granted, "ownerPassword")


def embeds(form: Form, mapped: Mapped) -> None:
    attached = []
    for upload in form.files:
        if upload.part != "embeds":
            continue
        kind = sniff(upload.data, upload.filename)
        content = base64.b64encode(upload.data).decode()
        attached.append({"name": upload.filename, "content": f"data:{kind};base64,{content}"})
    if attached:
        mapped.option("attachments", attached, "embeds")


def image(form: Form, mapped: Mapped) -> None:
    """A screenshot's format, quality, viewport and background."""
    kind = form.text("format") or "png"
    if kind not in IMAGE_FORMATS:
        raise RequestError(
            f"form field 'format' must be one of {', '.join(IMAGE_FORMATS)}, got {kind!r}",
            field="format",
        )
    mapped.option("output", kind, "format")
    quality = form.integer("quality", 100, 0, 100)
    if kind != "png":  # PNG is lossless: Gotenberg too leaves `quality` to JPEG and WebP
        mapped.option("quality", quality, "quality")
    width = form.integer("width", SCREEN[0], 1, 4096)
    height = form.integer("height", SCREEN[1], 1, 4096)
    mapped.option("width", f"{width}px", "width")
    if form.flag("clip", False):  # the viewport only; else the whole page
        mapped.option("height", f"{height}px", "height")
    if form.flag("omitBackground", False):
        mapped.option("omit_background", True, "omitBackground")
    form.flag("optimizeForSpeed", False)  # an encoder hint; the image is the same picture
    mapped.option("emulate_media", form.text("emulatedMediaType") or "print", "emulatedMediaType")


def _common(form: Form, kind: str) -> Mapped:
    mapped = Mapped(body={}, files=[])
    source(form, mapped, kind)
    waiting(form, mapped)
    network(form, mapped)
    return mapped


def _finish(form: Form, mapped: Mapped) -> Mapped:
    mapped.files = [u for u in form.files if u.part != "embeds" and u.filename not in SPECIAL]
    unknown = form.unknown()
    if unknown:
        raise refuse(unknown[0], "Pressroom does not know this field")
    return mapped


def convert(form: Form, kind: str) -> Mapped:
    """A Chromium conversion form (`kind`: `html`, `url` or `markdown`) as a Pressroom
    job body that prints a PDF."""
    mapped = _common(form, kind)
    header_footer(form, mapped)
    page(form, mapped)
    finishing(form, mapped)
    return _finish(form, mapped)


def screenshot(form: Form, kind: str) -> Mapped:
    """A Chromium screenshot form (`kind`: `html`, `url` or `markdown`) as a Pressroom
    job body that makes an image."""
    mapped = _common(form, kind)
    image(form, mapped)
    return _finish(form, mapped)
