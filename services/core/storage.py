"""Object storage: a local folder (embedded default) or an S3-compatible service.

Both give short-lived download URLs. Local URLs point at the gateway's `/files/…` route and
carry an HMAC over the key and expiry; S3 URLs are presigned GETs, so bytes never pass
through the gateway in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from services.core.errors import NotFound, StorageError
from services.core.settings import Settings, SettingsError

log = logging.getLogger(__name__)


class Storage(Protocol):
    async def put(self, key: str, data: bytes, content_type: str) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def url(self, key: str, ttl: int) -> str: ...


def object_key(tenant: str, job_id: str, extension: str = "pdf") -> str:
    """Where a job's document is stored: under its tenant, and derived from the job id, so
    a re-render overwrites instead of adding a second object. Download links sign the
    whole key, so one tenant's link cannot be bent to another tenant's file."""
    return f"jobs/{tenant}/{job_id}.{extension}"


def sign(secret: str, key: str, expires: int) -> str:
    mac = hmac.new(secret.encode(), f"{key}\n{expires}".encode(), hashlib.sha256)
    return mac.hexdigest()


class LocalStorage:
    """Files under a folder; written atomically (temp file, then rename)."""

    def __init__(self, root: str, base_url: str, secret: str) -> None:
        self.root = Path(root)
        self.base_url = base_url
        self.secret = secret

    def path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise NotFound("no such file")
        return path

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        try:
            await asyncio.to_thread(self._write, self.path(key), data)
        except OSError as exc:
            raise StorageError(f"cannot write {key}: {exc}") from exc

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    async def url(self, key: str, ttl: int) -> str:
        expires = int(time.time()) + ttl
        query = urllib.parse.urlencode({"expires": expires, "sig": sign(self.secret, key, expires)})
        return f"{self.base_url}/files/{urllib.parse.quote(key)}?{query}"

    def verify(self, key: str, expires: str, sig: str) -> Path:
        """The file behind a signed link, or `NotFound` if the link is forged or expired."""
        try:
            deadline = int(expires)
        except ValueError:
            raise NotFound("invalid or expired link") from None
        good = hmac.compare_digest(sign(self.secret, key, deadline), sig)
        if not good or deadline < time.time():
            raise NotFound("invalid or expired link")
        path = self.path(key)
        if not path.is_file():
            raise NotFound("no such file")
        return path


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

    async def delete(self, key: str) -> None:
        try:
            await self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise StorageError(f"cannot delete {key}: {exc}") from exc

    async def url(self, key: str, ttl: int) -> str:
        name = key.rsplit("/", 1)[-1]
        params = {
            "Bucket": self.bucket,
            "Key": key,
            # S3 answers the download with these headers (as the gateway does locally).
            "ResponseContentDisposition": f'attachment; filename="{name}"',
            "ResponseCacheControl": "private, max-age=60",
        }
        url: str = await self.client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=ttl
        )
        return url


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
