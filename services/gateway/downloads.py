"""`GET /files/{key}`: a document in local storage, through its signed, expiring link
(S3 serves its own presigned links; the gateway then answers 404). The link is its own
permission: no API key.

A download is a file to save, never a page to render or sniff, nor to share from a
cache; it is named by `core/model/filenames.content_disposition`. One `Range` is served (206);
one aiohttp's file answer cannot read, or one past the end, is a problem naming `Range`.
"""

from __future__ import annotations

import os

from aiohttp import web

from services.core.model import filenames, outputs
from services.core.model.errors import NotFound, RangeNotSatisfiable, RequestError
from services.core.objectstore.storage import LocalStorage
from services.gateway.headers import header
from services.gateway.keys import STORAGE


async def download(request: web.Request) -> web.FileResponse:
    """`GET /files/{key}`: local-storage downloads, only through an unexpired signed link."""
    storage = request.app[STORAGE]
    if not isinstance(storage, LocalStorage):
        raise NotFound("downloads are served by object storage")
    key = request.match_info["key"]
    path = storage.verify(key, request.query.get("expires", ""), request.query.get("sig", ""))
    _check_range(request, path.stat())
    kind = _OTHERS.get(key.rsplit(".", 1)[-1]) or outputs.content_type_of_key(key)
    return web.FileResponse(path, headers={"Content-Type": kind, **download_headers(key)})


_KINDS = {"png": "image/png", "zip": "application/zip", "json": "application/json"}
"""Content types of the stored files that are not PDFs, by extension."""


_OTHERS = {"zip": "application/zip", "json": "application/json"}
"""Stored files that are no job's `options.output`: archives (a batch's, a PDF-tools
job's several documents) and reports."""


def _check_range(request: web.Request, file: os.stat_result) -> None:
    """Refuse, as a problem, a `Range` that aiohttp's file answer would refuse with an
    empty 416: a 400 for one it cannot read (several ranges, another unit, digits beyond
    `int()`'s limit), a 416 for one that starts past the end. An `If-Range` older than
    the file makes aiohttp send it whole, whatever the range."""
    if header(request, "Range") is None:
        return
    if_range = request.if_range
    if if_range is not None and file.st_mtime > if_range.timestamp():
        return
    try:
        start = request.http_range.start or 0
    except ValueError:
        raise RequestError(
            "Range must be one range of bytes, such as bytes=0-1023", field="Range"
        ) from None
    first = max(0, start + file.st_size) if start < 0 else start  # `bytes=-N`: the last N
    if first >= file.st_size:
        raise RangeNotSatisfiable(
            f"Range starts past the end of the file ({file.st_size} bytes)", size=file.st_size
        )


def download_headers(key: str) -> dict[str, str]:
    """A download is a file to save, never a page to render or sniff, nor to share from a
    cache: `attachment` under the job's name (`<job id>.pdf`)."""
    return {
        "Content-Disposition": filenames.content_disposition(key.rsplit("/", 1)[-1]),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, max-age=60",
    }


def add_routes(app: web.Application) -> None:
    app.router.add_get("/files/{key:.+}", download)
