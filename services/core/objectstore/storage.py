"""Object storage: a local folder (embedded default) or an S3-compatible service.

Both give short-lived download URLs. Local URLs point at the gateway's `/files/…` route and
carry an HMAC over the key and expiry; S3 URLs are presigned GETs, so bytes never pass
through the gateway in production.

Size: one `Storage` interface and its two backends, local and S3, each with its sink for
streamed writes, kept side by side so both hold to the same contract; `S3Storage` with its
sink is the part that would split out next.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import hashlib
import hmac
import logging
import os
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import aiohttp
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from services.core.model.errors import NotFound, StorageError
from services.core.model.filenames import content_disposition
from services.core.model.numbers import bounded_int
from services.core.runtime.settings import Settings, SettingsError

log = logging.getLogger(__name__)


READ_CHUNK = 2**20
"""Bytes per chunk `Storage.read` yields: large enough to keep round trips few, small
enough that a conductor streaming a thousand documents holds one at a time."""

INLINE_WRITE = 256 * 2**10
"""Bytes up to which local storage writes a file on the event loop: handing the write to
a thread cost the renderer more CPU than writing a PDF of that size into the page cache,
on every job. Bigger files go to a thread, so a slow
disk holds the loop for a write of this size at most."""

MAX_EXPIRY = 2**63 - 1
"""Largest expiry (Unix time) a local download link can carry."""

PART_SIZE = 8 * 2**20
"""Bytes per part of an S3 multipart upload (S3 wants at least 5 MiB for all but the
last); a streaming writer holds at most one part in memory."""


class Sink(Protocol):
    """Where a streaming writer's bytes go (`Storage.writer`)."""

    async def write(self, data: bytes) -> None: ...


class Storage(Protocol):
    async def put(self, key: str, data: bytes, content_type: str) -> None: ...

    def read(self, key: str) -> AsyncIterator[bytes]:
        """The object's bytes in chunks of about `READ_CHUNK`; `NotFound` if there is no
        such object, `StorageError` if storage fails."""
        ...

    def writer(self, key: str, content_type: str) -> contextlib.AbstractAsyncContextManager[Sink]:
        """A sink whose bytes become the object `key` when the block ends without an
        error; an error inside the block leaves no object (and an old one as it was)."""
        ...

    async def delete(self, key: str) -> None: ...

    async def url(self, key: str, ttl: int) -> str: ...

    def keys(self) -> AsyncIterator[str]:
        """Every object's key, in no set order (`pressroom backup`)."""
        ...


def object_key(tenant: str, job_id: str, extension: str = "pdf") -> str:
    """Where a job's document is stored: under its tenant, and derived from the job id, so
    a re-render overwrites instead of adding a second object. Download links sign the
    whole key, so one tenant's link cannot be bent to another tenant's file."""
    return f"jobs/{tenant}/{job_id}.{extension}"


def sign(secret: str, key: str, expires: int) -> str:
    # surrogatepass: a key from a URL may hold anything; any valid text encodes as always.
    message = f"{key}\n{expires}".encode("utf-8", "surrogatepass")
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


STALE_PARTIAL = 300.0
"""Seconds without a write after which a writer's temp file is an abandoned one (its
process died mid-write, e.g. a conductor killed while packing): the next writer of the
same key removes it. A live writer writes far more often than that."""


def _remove_stale_partials(path: Path) -> None:
    """Remove the temp files of earlier, abandoned writes of `path`."""
    cutoff = time.time() - STALE_PARTIAL
    for partial in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if partial.stat().st_mtime < cutoff:
                partial.unlink()


class LocalStorage:
    """Files under a folder; written atomically (temp file, then rename)."""

    def __init__(self, root: str, base_url: str, secret: str) -> None:
        """`secret` is `PRESSROOM_URL_SECRET`: one key or several (space-separated), the
        first signs links and every one verifies them, so a new key can take over while
        the links the old one signed run out (`PRESSROOM_URL_TTL`)."""
        self.root = Path(root)
        self.base_url = base_url
        self.secrets = tuple(secret.split()) or (secret,)
        self._resolved: Path | None = None  # the root, resolved once it exists

    def path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self._root() not in path.parents:
            raise NotFound("no such file")
        return path

    def _root(self) -> Path:
        """The root folder with every symlink resolved: once it exists that cannot change
        under a running service, so it is resolved once (a realpath is a syscall per
        folder of the path, on every read and write)."""
        if self._resolved is not None:
            return self._resolved
        resolved = self.root.resolve()
        if resolved.is_dir():
            self._resolved = resolved
        return resolved

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        try:
            path = self.path(key)
            if len(data) <= INLINE_WRITE:
                self._write(path, data)
            else:
                await asyncio.to_thread(self._write, path, data)
        except OSError as exc:
            raise StorageError(f"cannot write {key}: {exc}") from exc

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own per write: two writes of one key at once (a redelivered job
        # racing its first attempt) would otherwise truncate and rename each other's file.
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def read(self, key: str) -> AsyncIterator[bytes]:
        try:
            file = await asyncio.to_thread(self.path(key).open, "rb")
        except FileNotFoundError:
            raise NotFound(f"no such object: {key}") from None
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc
        try:
            while chunk := await asyncio.to_thread(file.read, READ_CHUNK):
                yield chunk
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc
        finally:
            file.close()

    @contextlib.asynccontextmanager
    async def writer(self, key: str, content_type: str) -> AsyncIterator[Sink]:
        """Writes a temp file beside the target and renames it over the target on a clean
        exit, so a reader never sees half an object."""
        path = self.path(key)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            await asyncio.to_thread(_remove_stale_partials, path)
            file = await asyncio.to_thread(_open_new, tmp)
        except OSError as exc:
            raise StorageError(f"cannot write {key}: {exc}") from exc
        try:
            yield _FileSink(file, key)
            await asyncio.to_thread(_close_and_replace, file, tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot write {key}: {exc}") from exc
        finally:
            file.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    async def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    async def keys(self) -> AsyncIterator[str]:
        """Every file's key; writers' temp files (`.name.….tmp`) are not objects."""
        files = await asyncio.to_thread(lambda: [p for p in self.root.rglob("*") if p.is_file()])
        for path in files:
            if not path.name.startswith("."):
                yield path.relative_to(self.root).as_posix()

    async def url(self, key: str, ttl: int) -> str:
        expires = int(time.time()) + ttl
        signature = sign(self.secrets[0], key, expires)
        query = urllib.parse.urlencode({"expires": expires, "sig": signature})
        return f"{self.base_url}/files/{urllib.parse.quote(key)}?{query}"

    def verify(self, key: str, expires: str, sig: str) -> Path:
        """The file behind a signed link, or `NotFound` if the link is forged or expired."""
        deadline = bounded_int(expires, 0, MAX_EXPIRY)
        if deadline is None:
            raise NotFound("invalid or expired link")
        # As bytes: compare_digest refuses str with non-ASCII characters (a forged `sig`).
        given = sig.encode("utf-8", "surrogatepass")
        good = [hmac.compare_digest(sign(s, key, deadline).encode(), given) for s in self.secrets]
        if not any(good) or deadline < time.time():
            raise NotFound("invalid or expired link")
        path = self.path(key)
        if not path.is_file():
            raise NotFound("no such file")
        return path


def _open_new(path: Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")


def _close_and_replace(file: IO[bytes], tmp: Path, path: Path) -> None:
    file.close()
    os.replace(tmp, path)


class _FileSink:
    """A local streaming writer's sink: each write goes to the temp file at once."""

    def __init__(self, file: IO[bytes], key: str) -> None:
        self.file = file
        self.key = key

    async def write(self, data: bytes) -> None:
        try:
            await asyncio.to_thread(self.file.write, data)
        except OSError as exc:
            raise StorageError(f"cannot write {self.key}: {exc}") from exc


class S3Storage:
    """An S3-compatible bucket through one aiobotocore client."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    async def ensure_bucket(self) -> None:
        try:
            await self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            await self.client.create_bucket(Bucket=self.bucket)

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        try:
            try:
                await self._put(key, data, content_type)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
                    raise
                # The bucket was not there when we started (storage was down) or is gone.
                await self.client.create_bucket(Bucket=self.bucket)
                await self._put(key, data, content_type)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise StorageError(f"cannot upload {key}: {exc}") from exc

    async def _put(self, key: str, data: bytes, content_type: str) -> None:
        await self.client.put_object(
            Bucket=self.bucket, Key=key, Body=data, ContentType=content_type
        )

    async def read(self, key: str) -> AsyncIterator[bytes]:
        try:
            response = await self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"NoSuchKey", "NoSuchBucket"}:
                raise NotFound(f"no such object: {key}") from None
            raise StorageError(f"cannot read {key}: {exc}") from exc
        except (BotoCoreError, OSError) as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc
        body = response["Body"]
        try:
            while chunk := await body.read(READ_CHUNK):
                yield chunk
        except (BotoCoreError, ClientError, OSError, aiohttp.ClientError) as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc
        finally:
            body.close()

    @contextlib.asynccontextmanager
    async def writer(self, key: str, content_type: str) -> AsyncIterator[Sink]:
        """A multipart upload of `PART_SIZE` parts, completed on a clean exit and aborted
        on an error (S3 keeps no object then); an object smaller than one part is one
        plain `put`."""
        sink = _PartSink(self, key, content_type)
        try:
            yield sink
            await sink.finish()
        except BaseException:
            await sink.abort()
            raise

    async def delete(self, key: str) -> None:
        try:
            await self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise StorageError(f"cannot delete {key}: {exc}") from exc

    async def keys(self) -> AsyncIterator[str]:
        try:
            async for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket
            ):
                for item in page.get("Contents", []):
                    yield item["Key"]
        except (BotoCoreError, ClientError, OSError) as exc:
            raise StorageError(f"cannot list the bucket {self.bucket}: {exc}") from exc

    async def url(self, key: str, ttl: int) -> str:
        params = {
            "Bucket": self.bucket,
            "Key": key,
            # S3 answers the download with these headers (as the gateway does locally).
            "ResponseContentDisposition": content_disposition(key.rsplit("/", 1)[-1]),
            "ResponseCacheControl": "private, max-age=60",
        }
        url: str = await self.client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=ttl
        )
        return url


class _PartSink:
    """An S3 streaming writer's sink: buffers up to one part, uploads each full one."""

    def __init__(self, storage: S3Storage, key: str, content_type: str) -> None:
        self.storage = storage
        self.key = key
        self.content_type = content_type
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[dict[str, Any]] = []

    async def write(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= PART_SIZE:
            # One copy of the part, and the old buffer freed before the upload (which
            # itself holds about one more part while it sends).
            with memoryview(self.buffer) as view:
                part = bytes(view[:PART_SIZE])
                rest = bytearray(view[PART_SIZE:])
            self.buffer = rest
            await self._upload(part)

    async def _upload(self, part: bytes) -> None:
        client, bucket = self.storage.client, self.storage.bucket
        with _s3_errors(f"cannot upload {self.key}"):
            if self.upload_id is None:
                started = await client.create_multipart_upload(
                    Bucket=bucket, Key=self.key, ContentType=self.content_type
                )
                self.upload_id = str(started["UploadId"])
            number = len(self.parts) + 1
            answer = await client.upload_part(
                Bucket=bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=part
            )
            self.parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    async def finish(self) -> None:
        if self.upload_id is None:  # under one part: a plain put
            await self.storage.put(self.key, bytes(self.buffer), self.content_type)
            return
        if self.buffer:
            await self._upload(bytes(self.buffer))
            self.buffer.clear()
        with _s3_errors(f"cannot upload {self.key}"):
            await self.storage.client.complete_multipart_upload(
                Bucket=self.storage.bucket, Key=self.key, UploadId=self.upload_id,
                MultipartUpload={"Parts": self.parts},
            )  # fmt: skip
        self.upload_id = None

    async def abort(self) -> None:
        """Drop the parts uploaded so far; S3 would otherwise keep (and bill) them."""
        if self.upload_id is None:
            return
        try:
            await self.storage.client.abort_multipart_upload(
                Bucket=self.storage.bucket, Key=self.key, UploadId=self.upload_id
            )
        except (BotoCoreError, ClientError, OSError) as exc:
            log.warning("cannot abort the upload of %s: %s", self.key, exc)


@contextlib.contextmanager
def _s3_errors(context: str) -> Iterator[None]:
    try:
        yield
    except (BotoCoreError, ClientError, OSError) as exc:
        raise StorageError(f"{context}: {exc}") from exc


@contextlib.asynccontextmanager
async def open_storage(settings: Settings) -> AsyncIterator[Storage]:
    """The configured backend, ready to use; its client is closed on exit."""
    if settings.storage == "local":
        if not settings.url_secret:
            raise SettingsError("PRESSROOM_URL_SECRET must be set to sign local download links")
        yield LocalStorage(settings.storage_dir, settings.base_url, settings.url_secret)
        return
    session = get_session()
    config = Config(
        connect_timeout=5,
        read_timeout=30,
        retries={"max_attempts": 2, "mode": "standard"},
        signature_version="s3v4",
    )
    async with session.create_client(
        "s3",
        endpoint_url=settings.s3_endpoint or None,
        region_name=settings.s3_region,
        aws_access_key_id=settings.s3_access_key or None,
        aws_secret_access_key=settings.s3_secret_key or None,
        config=config,
    ) as client:
        storage = S3Storage(client, settings.s3_bucket)
        try:
            await storage.ensure_bucket()
        except (BotoCoreError, ClientError, OSError) as exc:
            # Not fatal: uploads fail transiently and are retried until storage is back.
            log.warning("bucket %s not reachable at start: %s", settings.s3_bucket, exc)
        yield storage
