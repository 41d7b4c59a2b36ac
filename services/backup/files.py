"""The stored files (PDFs, archives, item lists, assets), copied out of the configured
storage into a backup folder and back, through the same `Storage` the services use: a
local folder or an S3 bucket alike, one object at a time, streamed.

For a large bucket this is the slow way: production keeps the bucket's own versioning
and replication instead (docs/operations.md), and a backup then skips the files
(`pressroom backup --no-files`).
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
from pathlib import Path

import msgspec

from services.core.model.errors import StorageError
from services.core.objectstore.storage import Storage

FOLDER = "files"
CHUNK = 1 << 20


class Copied(msgspec.Struct, frozen=True):
    """What a backup holds of storage: each key's size and digest."""

    objects: dict[str, tuple[int, str]]


async def save(storage: Storage, folder: Path) -> Copied:
    """Copy every object into `folder/files/<key>`."""
    objects: dict[str, tuple[int, str]] = {}
    async for key in storage.keys():
        target = _under(folder / FOLDER, key)
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        with target.open("wb") as file:
            async for chunk in storage.read(key):
                file.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        objects[key] = (size, digest.hexdigest())
    return Copied(objects)


async def restore(storage: Storage, folder: Path, copied: Copied) -> int:
    """Put every saved object back under its key (an object there is replaced); returns
    how many. A file whose digest differs from the manifest's stops the restore."""
    for key, (_, digest) in sorted(copied.objects.items()):
        source = _under(folder / FOLDER, key)
        content_type = mimetypes.guess_type(key)[0] or "application/octet-stream"
        found = hashlib.sha256()
        async with storage.writer(key, content_type) as sink:
            with source.open("rb") as file:
                while data := file.read(CHUNK):
                    found.update(data)
                    await sink.write(data)
            if found.hexdigest() != digest:
                raise StorageError(f"{source} does not match its digest in the manifest")
    return len(copied.objects)


def _under(root: Path, key: str) -> Path:
    """Where `key` lives under `root`; a key that would leave it is refused."""
    path = (root / key).resolve()
    if root.resolve() not in path.parents:
        raise StorageError(f"object key {key!r} would leave the backup folder")
    return path
