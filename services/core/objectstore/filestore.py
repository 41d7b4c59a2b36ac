"""Storing a client's file: checked, typed by its bytes, written once per tenant by digest.

`store_file` is what every door that takes files goes through (a multipart job, a
stored asset, a template's bundle, a Gotenberg-style form): the name must pass the
safe-name rule (`files.name_problem`, after NFC), the type is sniffed from the bytes
(`files.sniff`), and a name whose suffix promises a binary format its bytes are not
(`logo.png` that is HTML) is refused rather than stored as something else. The bytes go
to `files.blob_key(tenant, digest)`: the same bytes stored twice are one object, written
again with the same content, so storing is idempotent and a retry costs nothing.
"""

from __future__ import annotations

import unicodedata

from services.core.model.errors import RequestError, StorageError
from services.core.model.files import FileRef, blob_key, digest_of, name_problem, sniff
from services.core.objectstore.storage import Storage

_PROMISED = {
    ".png": ("image/png",),
    ".jpg": ("image/jpeg",),
    ".jpeg": ("image/jpeg",),
    ".gif": ("image/gif",),
    ".webp": ("image/webp",),
    ".woff": ("font/woff",),
    ".woff2": ("font/woff2",),
    ".ttf": ("font/ttf", "font/otf"),
    ".otf": ("font/otf", "font/ttf"),
    ".pdf": ("application/pdf",),
    ".zip": ("application/zip",),
}
"""Suffixes that name a binary format, and the sniffed types their bytes may have (a
`.ttf` with CFF outlines starts as an `.otf` does)."""


def checked_name(name: str, field: str | None = None) -> str:
    """`name` in NFC if it may name a file of a job; else `RequestError` naming `field`
    (the name itself by default)."""
    name = unicodedata.normalize("NFC", name)
    problem = name_problem(name)
    if problem is not None:
        raise RequestError(f"the file name {name!r} {problem}", field=field or name)
    return name


def typed(name: str, data: bytes, field: str | None = None) -> str:
    """The sniffed content type of `data`; `RequestError` if the name's suffix promises a
    binary format the bytes are not."""
    content_type = sniff(data, name)
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    promised = _PROMISED.get(suffix)
    if promised is not None and content_type not in promised:
        raise RequestError(
            f"the file {name!r} is not what its name says: its bytes are not "
            f"{promised[0]} ({content_type})",
            field=field or name,
        )
    return content_type


def file_ref(name: str, data: bytes, field: str | None = None) -> FileRef:
    """What the log will carry for `data` under `name` (checked, typed, digested)."""
    name = checked_name(name, field)
    content_type = typed(name, data, field)
    return FileRef(name=name, digest=digest_of(data), size=len(data), content_type=content_type)


async def store_file(
    storage: Storage, tenant: str, name: str, data: bytes, field: str | None = None
) -> FileRef:
    """Check `name` and `data`, write the bytes under the tenant by digest, and return
    the `FileRef` a job carries. `RequestError` naming `field` (the name by default) for
    a refused name or type; `StorageError` if storage fails."""
    ref = file_ref(name, data, field)
    await storage.put(blob_key(tenant, ref.digest), data, ref.content_type)
    return ref


async def store_files(
    storage: Storage, tenant: str, files: list[tuple[str, bytes]]
) -> list[FileRef]:
    """`store_file` for each (name, bytes), every one checked before any is written."""
    refs = [file_ref(name, data) for name, data in files]
    for ref, (_, data) in zip(refs, files, strict=True):
        await storage.put(blob_key(tenant, ref.digest), data, ref.content_type)
    return refs


async def load_file(storage: Storage, tenant: str, ref: FileRef) -> bytes:
    """The bytes of the tenant's file `ref`, read from its key; `NotFound` if storage has
    none, `StorageError` if it fails or holds other bytes than the digest says (more
    than `ref.size` is not read)."""
    data = bytearray()
    async for chunk in storage.read(blob_key(tenant, ref.digest)):
        data += chunk
        if len(data) > ref.size:
            break
    if len(data) != ref.size or digest_of(bytes(data)) != ref.digest:
        raise StorageError(
            f"the stored file {ref.name!r} does not have the digest it was sent with"
        )
    return bytes(data)
