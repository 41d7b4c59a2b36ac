"""Multipart requests read into their form fields and their files, within limits.

`read_form` reads a `multipart/form-data` body part by part as it arrives (the gateway
does not read such a body ahead of the handler, `app.errors_as_json`), and stops at the
first limit crossed, so a client learns early and the gateway never holds more than the
limits allow:

- a file over `PRESSROOM_MAX_FILE_BYTES`, more files than `PRESSROOM_MAX_FILES`, or files
  together over `PRESSROOM_MAX_UPLOAD_BYTES`: `413`, naming the file or `files`;
- a form field (the job's JSON part) over `PRESSROOM_MAX_BODY_BYTES`: `413` naming it;
- a body slower than `PRESSROOM_BODY_TIMEOUT`: `408`;
- a malformed body, a nested multipart, an encoded part (`Content-Encoding`, a
  `Content-Transfer-Encoding` other than binary), a file name the safe-name rule refuses
  (`files.name_problem`), or one name given twice: `400` naming the part (a form field
  given again is kept in `Upload.repeated` instead when the caller reads repeated
  fields itself, as Gotenberg's forms do).

A file's name is its part's `filename` (else the part's `name`), percent-decoded (as the
page's URL for it will be) and in NFC: two spellings of one name (`é` composed or
decomposed) are one name, given twice.
"""

from __future__ import annotations

import asyncio
import unicodedata
import urllib.parse
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from services.core.model.errors import PayloadTooLarge, RequestError, RequestTimeout
from services.core.model.files import name_problem
from services.core.runtime.settings import Settings
from services.gateway.headers import header
from services.gateway.jsonbody import parse_json

CHUNK = 64 * 2**10
"""Bytes read from a part at a time."""

MAX_FIELDS = 200
"""Most form fields (parts that are not files) one request may have."""

PLAIN_ENCODINGS = frozenset({"", "binary", "8bit", "7bit"})
"""`Content-Transfer-Encoding`s a part may declare: none that changes its bytes (RFC 7578
deprecates the header; a decoded part could be far larger than what was sent)."""


def is_multipart(request: web.Request) -> bool:
    """Whether the request says its body is `multipart/form-data`."""
    return request.content_type == "multipart/form-data"


@dataclass(frozen=True)
class UploadLimits:
    """What one multipart request may carry."""

    max_file_bytes: int
    max_files: int
    max_bytes: int
    """All files of the request together."""
    max_field_bytes: int
    timeout: float
    """Seconds the whole body may take to arrive."""

    @classmethod
    def of(cls, settings: Settings) -> UploadLimits:
        return cls(
            max_file_bytes=settings.max_file_bytes,
            max_files=settings.max_files,
            max_bytes=settings.max_upload_bytes,
            max_field_bytes=settings.max_body_bytes,
            timeout=settings.body_timeout,
        )


@dataclass
class Upload:
    """A multipart request read: its form fields and its files, in the order sent."""

    fields: dict[str, bytes] = field(default_factory=dict)
    files: list[tuple[str, bytes]] = field(default_factory=list)
    size: int = 0
    """Bytes of the files together."""
    names: set[str] = field(default_factory=set)
    """The files' names."""
    parts: dict[str, str] = field(default_factory=dict)
    """Each file's part name, by file name (Gotenberg's forms send attachments as
    `embeds` parts, every other file as `files`)."""
    repeated: dict[str, list[bytes]] = field(default_factory=dict)
    """The later values of a form field given more than once (its first is in
    `fields`), with `read_form(repeats=True)`."""

    def json(self, name: str) -> dict[str, Any]:
        """The form field `name` decoded as a JSON object (`jsonbody.parse_json`);
        `RequestError` naming it when it is missing."""
        return parse_json(self.json_bytes(name))

    def json_bytes(self, name: str) -> bytes:
        """The form field `name`'s bytes (the JSON of the request); `RequestError` naming
        it when it is missing."""
        raw = self.fields.get(name)
        if raw is None:
            raise RequestError(
                f"the multipart body has no part named {name!r} (the JSON of the request)",
                field=name,
            )
        return raw


async def read_form(
    request: web.Request,
    limits: UploadLimits,
    fields: Collection[str] | None = None,
    *,
    repeats: bool = False,
) -> Upload:
    """Read a `multipart/form-data` request. A part is a form field when its name is in
    `fields` (or, with `fields` None, when it has no `filename`); every other part is a
    file. `RequestError`, `PayloadTooLarge` or `RequestTimeout` naming the part at the
    first problem; a form field given twice is one, unless `repeats` (its later values
    are kept in `Upload.repeated` for the caller to judge)."""
    if not is_multipart(request):
        shown = header(request, "Content-Type") or "none"
        raise RequestError(
            f"Content-Type must be multipart/form-data, got {shown}", field="Content-Type"
        )
    try:
        async with asyncio.timeout(limits.timeout):
            return await _read(await request.multipart(), limits, fields, repeats)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {limits.timeout:g} s", field="body"
        ) from None
    except (ValueError, RuntimeError, AssertionError, HttpProcessingError) as exc:
        # aiohttp's words for a body that is not multipart as its header says
        raise RequestError(f"body is not valid multipart/form-data: {exc}", field="body") from None


async def _read(
    reader: MultipartReader, limits: UploadLimits, fields: Collection[str] | None, repeats: bool
) -> Upload:
    upload = Upload()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise RequestError("a part must not itself be multipart", field="body")
        is_field = part.name in fields if fields is not None else part.filename is None
        if is_field:
            await _read_field(part, upload, limits, repeats)
        elif part.filename == "":  # a form's file input left empty, as browsers send it
            if await _bytes(part, "files", limits.max_file_bytes, _file_too_large):
                raise RequestError("a file part has an empty filename", field="files")
        else:
            await _read_file(part, upload, limits)
    return upload


async def _read_field(
    part: BodyPartReader, upload: Upload, limits: UploadLimits, repeats: bool
) -> None:
    name = part.name or ""
    _check_plain(part, name)
    if name in upload.fields and not repeats:
        raise RequestError(f"the part {name!r} is given twice", field=name)
    count = len(upload.fields) + sum(len(later) for later in upload.repeated.values())
    if count >= MAX_FIELDS:
        raise PayloadTooLarge(f"more than {MAX_FIELDS} form fields", field=name)
    value = await _bytes(part, name, limits.max_field_bytes, _field_too_large)
    if name in upload.fields:
        upload.repeated.setdefault(name, []).append(value)
    else:
        upload.fields[name] = value


async def _read_file(part: BodyPartReader, upload: Upload, limits: UploadLimits) -> None:
    name = _file_name(part)
    _check_file(part, name, upload.names, len(upload.files), limits)
    data = await _bytes(part, name, limits.max_file_bytes, _file_too_large)
    if upload.size + len(data) > limits.max_bytes:
        raise PayloadTooLarge(
            f"the files of this request are more than {limits.max_bytes} bytes together "
            "(PRESSROOM_MAX_UPLOAD_BYTES)",
            field="files",
        )
    upload.files.append((name, data))
    upload.names.add(name)
    upload.size += len(data)
    upload.parts[name] = part.name or ""


def _file_name(part: BodyPartReader) -> str:
    """The relative name a file part gives: its `filename` (else its `name`),
    percent-decoded as a page's URL will be (some clients, aiohttp's among them, send
    `fonts%2Fa.woff2`), in NFC."""
    given = part.filename or part.name or ""
    try:
        name = urllib.parse.unquote(given, errors="strict")
    except UnicodeDecodeError:
        raise RequestError(
            f"the file name {given!r} is not UTF-8 once percent-decoded", field=given
        ) from None
    return unicodedata.normalize("NFC", name)


def _check_plain(part: BodyPartReader, name: str) -> None:
    """Refuse a part whose bytes are encoded: decoding could make far more than was sent."""
    encoding = part.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise RequestError(
            f"the part {name!r} must not be encoded (Content-Encoding: {encoding})", field=name
        )
    transfer = part.headers.get("Content-Transfer-Encoding", "").strip().lower()
    if transfer not in PLAIN_ENCODINGS:
        raise RequestError(
            f"the part {name!r} must be sent as binary (Content-Transfer-Encoding: {transfer})",
            field=name,
        )


def _check_file(
    part: BodyPartReader, name: str, seen: set[str], count: int, limits: UploadLimits
) -> None:
    if not name:
        raise RequestError("a file part has neither a filename nor a name", field="files")
    problem = name_problem(name)
    if problem is not None:
        raise RequestError(f"the file name {name!r} {problem}", field=name)
    if name in seen:
        raise RequestError(f"the file {name!r} is given twice", field=name)
    if count >= limits.max_files:
        raise PayloadTooLarge(
            f"more than {limits.max_files} files in one request (PRESSROOM_MAX_FILES)",
            field="files",
        )
    _check_plain(part, name)


def _field_too_large(name: str, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the part {name!r} is larger than {limit} bytes (PRESSROOM_MAX_BODY_BYTES)", field=name
    )


def _file_too_large(name: str, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the file {name!r} is larger than {limit} bytes (PRESSROOM_MAX_FILE_BYTES)", field=name
    )


async def _bytes(
    part: BodyPartReader,
    name: str,
    limit: int,
    too_large: Callable[[str, int], PayloadTooLarge],
) -> bytes:
    """The part's bytes, read in chunks; `too_large(name, limit)` as soon as there are
    more than `limit`."""
    data = bytearray()
    while chunk := await part.read_chunk(CHUNK):
        data += chunk
        if len(data) > limit:
            raise too_large(name, limit)
    return bytes(data)
