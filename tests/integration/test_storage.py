"""Storage backends against real servers: moto's S3 and a local folder."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from services.core.model.errors import NotFound
from services.core.objectstore.storage import READ_CHUNK, S3Storage, open_storage, sign
from services.core.runtime.settings import Settings


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
            assert r.headers["Content-Disposition"] == (
                "attachment; filename=\"x.pdf\"; filename*=UTF-8''x.pdf"
            )
            assert r.headers["Cache-Control"] == "private, max-age=60"


async def test_s3_links_name_a_hostile_file_safely_in_both_forms(s3_settings: Settings):
    """The presigned link's `ResponseContentDisposition` goes through the same rule as
    every download: S3 answers with an ASCII header, the exact safe name in RFC 6266's
    `filename*` and an ASCII fallback, no quote to end it early."""
    async with open_storage(s3_settings) as storage:
        key = 'jobs/t/Rechnung M\u00e4rz: "1"\u202e.pdf'
        await storage.put(key, b"%PDF-1.7 test", "application/pdf")
        async with (
            aiohttp.ClientSession() as http,
            http.get(await storage.url(key, 60)) as r,
        ):
            assert r.status == 200
            assert r.headers["Content-Disposition"] == (
                'attachment; filename="Rechnung Marz_ _1_.pdf"; '
                "filename*=UTF-8''Rechnung%20M%C3%A4rz_%20_1_.pdf"
            )


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
            storage.verify("jobs/y.pdf", str(past), sign(storage.secrets[0], "jobs/y.pdf", past))
        future = int(time.time()) + 60
        good = sign(storage.secrets[0], "jobs/y.pdf", future)
        assert storage.verify("jobs/y.pdf", str(future), good)


async def _written_in_pieces(storage, key: str, pieces: list[bytes]) -> None:
    async with storage.writer(key, "application/zip") as sink:
        for piece in pieces:
            await sink.write(piece)


async def _read_back(storage, key: str) -> tuple[bytes, int]:
    """The object's bytes and the size of its largest chunk."""
    chunks = [chunk async for chunk in storage.read(key)]
    return b"".join(chunks), max((len(c) for c in chunks), default=0)


@pytest.mark.parametrize("backend", ["local", "s3"])
async def test_a_streamed_object_reads_back_identical_in_bounded_chunks(
    backend: str, request: pytest.FixtureRequest
):
    """20 MiB written in 1 MiB pieces (three S3 parts, the last one short) is the object
    a reader streams back, in chunks of at most `READ_CHUNK`; a small one is one put."""
    settings = request.getfixturevalue("s3_settings" if backend == "s3" else "settings")
    pieces = [os.urandom(2**20) for _ in range(20)] + [b"tail"]
    async with open_storage(settings) as storage:
        await _written_in_pieces(storage, "batches/t/b/big.zip", pieces)
        data, largest = await _read_back(storage, "batches/t/b/big.zip")
        assert data == b"".join(pieces)
        assert largest <= READ_CHUNK
        await _written_in_pieces(storage, "batches/t/b/small.zip", [b"PK", b"\x03\x04"])
        assert (await _read_back(storage, "batches/t/b/small.zip"))[0] == b"PK\x03\x04"


@pytest.mark.parametrize("backend", ["local", "s3"])
async def test_an_error_inside_the_writer_leaves_no_object(
    backend: str, request: pytest.FixtureRequest
):
    """A pack that crashes half-way (here after two S3 parts) stores nothing, and a read
    of a key that was never written is NotFound, not a storage failure."""
    settings = request.getfixturevalue("s3_settings" if backend == "s3" else "settings")
    async with open_storage(settings) as storage:
        with pytest.raises(RuntimeError, match="crashed"):
            async with storage.writer("batches/t/b/broken.zip", "application/zip") as sink:
                for _ in range(17):
                    await sink.write(os.urandom(2**20))
                raise RuntimeError("crashed")
        with pytest.raises(NotFound):
            await _read_back(storage, "batches/t/b/broken.zip")
        if backend == "local":
            assert [p for p in Path(settings.storage_dir).rglob("*") if p.is_file()] == []
        else:
            listed = await storage.client.list_multipart_uploads(Bucket=storage.bucket)
            assert listed.get("Uploads", []) == []


async def test_a_write_removes_what_an_earlier_killed_writer_of_the_key_left(
    settings: Settings,
):
    """A conductor killed mid-pack leaves its temp file; the re-pack of the same key
    removes it, but not the temp file of a writer still at work (recently written)."""
    async with open_storage(settings) as storage:
        folder = Path(settings.storage_dir) / "batches/t/b"
        folder.mkdir(parents=True)
        abandoned = folder / ".b.zip.0123.tmp"
        live = folder / ".b.zip.4567.tmp"
        other_key = folder / ".other.zip.89ab.tmp"
        for partial in (abandoned, live, other_key):
            partial.write_bytes(b"half an archive")
        hour_ago = time.time() - 3600
        os.utime(abandoned, (hour_ago, hour_ago))
        os.utime(other_key, (hour_ago, hour_ago))
        async with storage.writer("batches/t/b/b.zip", "application/zip") as sink:
            await sink.write(b"the whole archive")
        assert (await _read_back(storage, "batches/t/b/b.zip"))[0] == b"the whole archive"
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            ["b.zip", live.name, other_key.name]
        )
