"""Files that travel with a job: stored once per tenant by content, referenced by digest.

A client's file (an asset stored with `POST /assets`, a part of a multipart `POST /jobs`,
a file bundled with a stored template, an input of a PDF-tools job, a file of a
Gotenberg-style form) is written to storage under its tenant and the SHA-256 of its bytes,
and only a `FileRef` (name, digest, size, sniffed type) travels on the log. Same bytes,
same key: storing twice costs nothing, and a renderer caches by digest across jobs and
tenants without ever mixing what it serves (the key and the check are the tenant's).

A name is what the page writes: `logo.png`, `fonts/brand.woff2`. Each `/`-separated
segment must pass the safe-filename rule (`core/model/filenames.problem`), so a name is the
same string on every system that unpacks or serves it, and none climbs out (`..`).
"""

from __future__ import annotations

import hashlib
import re

import msgspec

from services.core.model.filenames import problem

MAX_NAME_SEGMENTS = 8
"""Folders deep a file's name may go (`a/b/c.png` is three)."""

_HEX = re.compile(r"[0-9a-f]{64}")


class FileRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One file of a job, as the log carries it: never the bytes."""

    name: str
    """Relative name the page refers to it by (checked by `name_problem`)."""
    digest: str
    """Lowercase hex SHA-256 of the bytes; with the tenant, the storage key."""
    size: int
    content_type: str
    """Sniffed from the bytes (`sniff`), not taken from the client."""


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def blob_key(tenant: str, digest: str) -> str:
    """Where a tenant's file with this digest is stored. Tenants never share a key, so
    deleting one tenant's file cannot take another's, and a signed link to one names
    its tenant."""
    if not _HEX.fullmatch(digest):
        raise ValueError(f"not a SHA-256 digest: {digest!r}")
    return f"files/{tenant}/sha256/{digest}"


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a file of a job (words to follow the field's name), or None."""
    if name.startswith("/"):
        return "must be relative (no leading /)"
    segments = name.split("/")
    if len(segments) > MAX_NAME_SEGMENTS:
        return f"must be at most {MAX_NAME_SEGMENTS} folders deep"
    for segment in segments:
        reason = problem(segment)
        if reason is not None:
            return reason
    return None


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x00\x01\x00\x00", "font/ttf"),
    (b"true", "font/ttf"),
    (b"OTTO", "font/otf"),
    (b"PK\x03\x04", "application/zip"),
)

_TEXT_BY_SUFFIX = {
    ".css": "text/css",
    ".html": "text/html",
    ".htm": "text/html",
    ".svg": "image/svg+xml",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".xml": "application/xml",
    ".md": "text/markdown",
    ".txt": "text/plain",
}


def sniff(data: bytes, name: str) -> str:
    """The content type of `data`: from its first bytes for binary formats; for text
    (which has no magic), from the name's suffix, and only if the bytes are UTF-8;
    `application/octet-stream` otherwise. A client's declared type is never used."""
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    for magic, content_type in _MAGIC:
        if data.startswith(magic):
            return content_type
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    text_type = _TEXT_BY_SUFFIX.get(suffix)
    if text_type is not None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "application/octet-stream"
        return text_type
    return "application/octet-stream"
