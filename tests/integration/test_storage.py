"""Storage backends against real servers: moto's S3 and a local folder."""

from __future__ import annotations

import time
from dataclasses import replace

import aiohttp
import pytest

from services.core.errors import NotFound
from services.core.settings import Settings
from services.core.storage import S3Storage, open_storage, sign


async def test_s3_upload_recreates_a_missing_bucket(s3_settings: Settings):
    """S3 unreachable at start (or a bucket gone) must not fail every later upload."""
    async with open_storage(s3_settings) as storage:
        assert isinstance(storage, S3Storage)
        storage.bucket = f"{s3_settings.s3_bucket}-late"  # never created
        await storage.put("jobs/x.pdf", b"%PDF-1.7 test", "application/pdf")
        async with (
            aiohttp.ClientSession() as http,
            http.get(await storage.url("jobs/x.pdf", 60)) as r,
        ):
            assert r.status == 200
            assert await r.read() == b"%PDF-1.7 test"
            assert r.headers["Content-Disposition"] == 'attachment; filename="x.pdf"'
            assert r.headers["Cache-Control"] == "private, max-age=60"


async def test_local_links_expire_and_resist_forgery(settings: Settings):
    async with open_storage(replace(settings, url_ttl=10)) as storage:
        await storage.put("jobs/y.pdf", b"%PDF-1.7 y", "application/pdf")
        url = await storage.url("jobs/y.pdf", 60)
        query = dict(part.split("=") for part in url.split("?")[1].split("&"))
        assert storage.verify("jobs/y.pdf", query["expires"], query["sig"]).read_bytes() == (
            b"%PDF-1.7 y"
        )
        for key, expires, sig in (
            ("jobs/z.pdf", query["expires"], query["sig"]),  # another file
            ("jobs/y.pdf", str(int(query["expires"]) + 1), query["sig"]),  # longer life
            ("jobs/y.pdf", "1", query["sig"]),  # an old expiry, another expiry's signature
        ):
            with pytest.raises(NotFound, match="invalid or expired"):
                storage.verify(key, expires, sig)
        # Expired, and signed as such: only the expiry check refuses it.
        past = int(time.time()) - 1
        with pytest.raises(NotFound, match="invalid or expired"):
            storage.verify("jobs/y.pdf", str(past), sign(storage.secret, "jobs/y.pdf", past))
        future = int(time.time()) + 60
        assert storage.verify("jobs/y.pdf", str(future), sign(storage.secret, "jobs/y.pdf", future))
