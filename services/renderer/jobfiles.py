"""A job's files served to its page by request interception, from storage, cached by digest.

A job that carries files (`JobSubmitted.files`) is loaded at a made-up origin that can
never resolve, `ORIGIN` (`.invalid` is reserved, RFC 2606): its HTML is the answer to the
navigation to `DOCUMENT`, and every request to that origin is answered by the request
filter (`egress.RequestFilter`) from the job's files, before it could reach any network:
`<img src="logo.png">`, `@font-face { src: url(fonts/brand.woff2) }` and
`<link href="style.css">` resolve to `ORIGIN/logo.png`… and are fulfilled with the
file's bytes and its sniffed type. No host name is resolved, no socket opened, no
server started; every other request meets the egress policy as before. Header and
footer templates, which Chromium prints without loading anything, get the files they
name written in: stylesheets as `<style>`, images as `data:` URLs
(`JobFiles.inlined`).

A name the page asks for that is not among the job's files is refused (recorded with
its reason in the job's evidence) and fails the job (`AssetMissing` naming the first
one), so a document is never printed without a file it asked for by name. Only GET
and HEAD are answered.

`FileCache` keeps files' bytes in memory by digest across jobs, within a byte budget
(`PRESSROOM_ASSET_CACHE_BYTES`), least recently used first out. A digest is served to a
tenant only once that tenant's own storage key for it has been read (`files.blob_key`):
two tenants with the same bytes share the memory, never the right to them.
"""

from __future__ import annotations

import asyncio
import base64
import html
import re
import unicodedata
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from services.core.model.errors import AssetMissing, NotFound, PressroomError
from services.core.model.files import FileRef
from services.core.model.pageoptions import PageOptions
from services.core.objectstore.filestore import load_file
from services.core.objectstore.storage import Storage
from services.core.runtime import metrics
from services.renderer.evidence import Evidence, Refusal, clip

ORIGIN = "https://job.pressroom.invalid"
"""Where a job with files is loaded: a name that never resolves, so no request to it can
leave the renderer even if one got past the filter."""

DOCUMENT = ORIGIN + "/"
"""The job's own document (its HTML), at the origin's root."""

QUIET = frozenset({"favicon.ico"})
"""Names a browser asks for by itself: refused when absent, without failing the job."""

HTML = "text/html; charset=utf-8"


class FileCache:
    """Bytes of job files by digest, at most `max_bytes` of them, with the tenants whose
    storage has been seen to hold each."""

    def __init__(self, storage: Storage, max_bytes: int) -> None:
        self.storage = storage
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[str, tuple[bytes, set[str]]] = OrderedDict()
        self._loading: dict[tuple[str, str], asyncio.Future[bytes]] = {}

    async def get(self, tenant: str, ref: FileRef) -> bytes:
        """The bytes of the tenant's file `ref`: from memory if this tenant's key was read
        before, else from storage (`NotFound`, `StorageError`), once for concurrent asks."""
        entry = self._entries.get(ref.digest)
        if entry is not None and tenant in entry[1]:
            self._entries.move_to_end(ref.digest)
            metrics.JOB_FILES_SERVED.labels("memory").inc()
            return entry[0]
        metrics.JOB_FILES_SERVED.labels("storage").inc()
        key = (tenant, ref.digest)
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.ensure_future(load_file(self.storage, tenant, ref))
            self._loading[key] = pending
            pending.add_done_callback(lambda done: self._loaded(tenant, ref.digest, done))
        # Shielded: a request given up on (its tab closed) leaves the load to the others.
        return await asyncio.shield(pending)

    def _loaded(self, tenant: str, digest: str, done: asyncio.Future[bytes]) -> None:
        self._loading.pop((tenant, digest), None)
        if done.cancelled() or done.exception() is not None:
            return
        data = done.result()
        entry = self._entries.get(digest)
        if entry is not None:
            entry[1].add(tenant)
            return
        if len(data) > self.max_bytes:
            return
        self._entries[digest] = (data, {tenant})
        self.size += len(data)
        while self.size > self.max_bytes:
            _, (dropped, _) = self._entries.popitem(last=False)
            self.size -= len(dropped)
        metrics.JOB_FILES_CACHED_BYTES.set(self.size)


def name_of(url: str) -> str | None:
    """The file name a URL at `ORIGIN` asks for (its path, percent-decoded, in NFC, query
    and fragment dropped); "" for the document; None for a URL elsewhere."""
    if not url.startswith(DOCUMENT):
        return None
    path = urllib.parse.urlsplit(url).path.lstrip("/")
    return unicodedata.normalize("NFC", urllib.parse.unquote(path))


class JobFiles:
    """One job's files as its page may ask for them, and what it asked for in vain."""

    def __init__(self, cache: FileCache, tenant: str, files: list[FileRef]) -> None:
        self.cache = cache
        self.tenant = tenant
        self.files = {ref.name: ref for ref in files}
        self.document = b""
        self.missing: list[str] = []
        self.failure: PressroomError | None = None

    def serve(self, html: str) -> None:
        """Serve `html` as the document at `DOCUMENT`."""
        self.document = html.encode()

    def check(self) -> None:
        """After the render: `AssetMissing` naming the first file the page asked for that
        the job does not carry, or the error that kept a file from being read."""
        if self.missing:
            more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
            raise AssetMissing(
                f"the page asks for {self.missing[0]!r}{more}, which is not among the job's "
                f"files ({_listed(self.files)})"
            )
        if self.failure is not None:
            raise self.failure

    async def answer(
        self, event: Mapping[str, Any], evidence: Evidence
    ) -> tuple[str, dict[str, Any]]:
        """The CDP command that settles a paused request to `ORIGIN`: fulfilled with the
        document or a file, else failed with its refusal recorded."""
        request = event["request"]
        url = str(request["url"])
        request_id = event["requestId"]
        name = name_of(url) or ""
        failed = {"requestId": request_id, "errorReason": "BlockedByClient"}
        if str(request.get("method", "GET")) not in ("GET", "HEAD"):
            evidence.refuse(Refusal(clip(url), "job files are only read (GET)"), "filter")
            return "Fetch.failRequest", failed
        if not name:
            return "Fetch.fulfillRequest", _fulfilled(request_id, self.document, HTML)
        ref = self.files.get(name)
        if ref is None:
            evidence.refuse(Refusal(clip(url), f"no file {name!r} among the job's files"), "filter")
            if name not in QUIET and name not in self.missing:
                self.missing.append(name)
                metrics.JOB_FILES_SERVED.labels("missing").inc()
            return "Fetch.failRequest", failed
        try:
            data = await self.cache.get(self.tenant, ref)
        except NotFound:
            self.failure = AssetMissing(f"the job's file {name!r} is no longer stored")
            return "Fetch.failRequest", failed
        except PressroomError as exc:
            self.failure = exc
            return "Fetch.failRequest", failed
        return "Fetch.fulfillRequest", _fulfilled(request_id, data, ref.content_type)

    async def inlined(self, options: PageOptions) -> PageOptions:
        """`options` with the job's files its header and footer templates name written
        in: Chromium prints those templates without loading anything, but honours what
        they hold. A `<link rel="stylesheet" href="style.css">` becomes a `<style>` with
        the stylesheet's text, and every `url()` in it (resolved against the
        stylesheet's own name) or in the template, and every `src="logo.png"`, becomes a
        `data:` URL (images). Its `@font-face` rules are dropped: Chromium uses no web
        font there. `@import` is not followed. A name the job does not carry is missing,
        as on the page."""
        changed = {}
        for field in ("header_template", "footer_template"):
            template = getattr(options, field)
            if template is not None and self.files:
                template = await _replaced(_LINK, template, self._stylesheet)
                changed[field] = await self._inline(template, DOCUMENT)
        return msgspec.structs.replace(options, **changed) if changed else options

    async def _read(self, url: str) -> tuple[FileRef, bytes] | None:
        """The job's file at `url` and its bytes; None for a URL elsewhere (left as it
        is) and for a name the job does not carry (recorded as missing)."""
        name = name_of(url)
        if not name:
            return None
        ref = self.files.get(name)
        if ref is None:
            if name not in self.missing:
                self.missing.append(name)
            return None
        return ref, await self.cache.get(self.tenant, ref)

    async def _stylesheet(self, match: re.Match[str]) -> str:
        """A `<link>` of a header or footer as a `<style>` holding the job's stylesheet
        it names, its `url()`s written in; any other link as it is."""
        attributes = {
            found["name"].lower(): html.unescape(
                found["value"] or found["single"] or found["bare"] or ""
            )
            for found in _ATTRIBUTE.finditer(match.group(0))
        }
        if "stylesheet" not in attributes.get("rel", "").lower().split():
            return match.group(0)
        url = urllib.parse.urljoin(DOCUMENT, attributes.get("href", "").strip())
        read = await self._read(url)
        if read is None:
            return match.group(0) if name_of(url) is None else ""
        css = _FONT_FACES.sub("", read[1].decode("utf-8", "replace"))  # unused there
        css = await self._inline(css, url)
        return "<style>" + re.sub("</(style)", r"<\/\1", css, flags=re.IGNORECASE) + "</style>"

    async def _inline(self, template: str, base: str) -> str:
        """`template` with every job's file it names (`src`, `url()`, relative to
        `base`) as a `data:` URL."""
        found: dict[str, str] = {}
        for match in _REFERENCE.finditer(template):
            value = match.group("src") or match.group("url") or ""
            if value in found:
                continue
            read = await self._read(urllib.parse.urljoin(base, html.unescape(value.strip())))
            if read is not None:
                ref, data = read
                found[value] = f"data:{ref.content_type};base64,{base64.b64encode(data).decode()}"
        if not found:
            return template

        def replaced(match: re.Match[str]) -> str:
            value = match.group("src") or match.group("url") or ""
            if value not in found:
                return match.group(0)
            start, end = match.span("src" if match.group("src") else "url")
            offset = match.start()
            text = match.group(0)
            return text[: start - offset] + found[value] + text[end - offset :]

        return _REFERENCE.sub(replaced, template)


async def _replaced(
    pattern: re.Pattern[str], text: str, change: Callable[[re.Match[str]], Awaitable[str]]
) -> str:
    """`text` with each match of `pattern` replaced by what `change` makes of it."""
    parts, last = [], 0
    for match in pattern.finditer(text):
        parts += [text[last : match.start()], await change(match)]
        last = match.end()
    return "".join([*parts, text[last:]])


_REFERENCE = re.compile(
    r"""\bsrc\s*=\s*(?P<q1>["'])(?P<src>[^"']*)(?P=q1)"""
    r"""|url\(\s*(?P<q2>["']?)(?P<url>[^"')]*)(?P=q2)\s*\)""",
    re.IGNORECASE,
)
"""A file named in a header or footer template: an `src` attribute or a CSS `url()`."""

_FONT_FACES = re.compile(r"@font-face\s*\{[^}]*\}", re.IGNORECASE)
"""A stylesheet's web fonts, which Chromium does not use in a header or footer (the
text prints in the renderer's own fonts; `core/model/options.check_header_footer`)."""

_LINK = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
"""A `<link>` element of a header or footer template."""

_ATTRIBUTE = re.compile(
    r"""(?P<name>[a-zA-Z-]+)\s*=\s*(?:"(?P<value>[^"]*)"|'(?P<single>[^']*)'|(?P<bare>[^\s>]+))"""
)
"""One attribute of an element (its value double-quoted, single-quoted or bare)."""


def _fulfilled(request_id: Any, data: bytes, content_type: str) -> dict[str, Any]:
    return {
        "requestId": request_id,
        "responseCode": 200,
        "responseHeaders": [
            {"name": "Content-Type", "value": content_type},
            {"name": "Content-Length", "value": str(len(data))},
            {"name": "X-Content-Type-Options", "value": "nosniff"},
            {"name": "Cache-Control", "value": "no-store"},
        ],
        "body": base64.b64encode(data).decode("ascii"),
    }


def _listed(files: Mapping[str, FileRef], most: int = 10) -> str:
    names = sorted(files)
    shown = ", ".join(repr(name) for name in names[:most])
    if len(names) > most:
        shown += f" and {len(names) - most} more"
    return shown or "none"
