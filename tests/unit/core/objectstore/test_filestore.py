"""Storing a client's file: the name checked, the type sniffed, the bytes written once
per tenant by digest, and read back only as they were stored."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from services.core.model.errors import NotFound, RequestError, StorageError
from services.core.model.files import blob_key, digest_of
from services.core.objectstore.filestore import load_file, store_file, store_files
from services.core.objectstore.storage import LocalStorage

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(str(tmp_path), "http://pressroom.test", "secret")


async def test_a_file_is_stored_under_its_tenant_and_digest_and_read_back(
    storage: LocalStorage, tmp_path: Path
) -> None:
    ref = await store_file(storage, "t1", "img/logo.png", PNG)
    assert (ref.name, ref.size, ref.content_type) == ("img/logo.png", len(PNG), "image/png")
    assert ref.digest == digest_of(PNG)
    assert (tmp_path / blob_key("t1", ref.digest)).read_bytes() == PNG
    assert await load_file(storage, "t1", ref) == PNG


async def test_storing_the_same_bytes_twice_is_one_object(
    storage: LocalStorage, tmp_path: Path
) -> None:
    first = await store_file(storage, "t1", "a.png", PNG)
    second = await store_file(storage, "t1", "b.png", PNG)
    assert first.digest == second.digest
    assert [p.name for p in (tmp_path / "files" / "t1" / "sha256").iterdir()] == [first.digest]


async def test_another_tenants_digest_reads_nothing(storage: LocalStorage) -> None:
    ref = await store_file(storage, "t1", "logo.png", PNG)
    with pytest.raises(NotFound):
        await load_file(storage, "t2", ref)


async def test_stored_bytes_that_do_not_match_the_digest_are_refused(
    storage: LocalStorage, tmp_path: Path
) -> None:
    ref = await store_file(storage, "t1", "logo.png", PNG)
    (tmp_path / blob_key("t1", ref.digest)).write_bytes(PNG + b"tampered")
    with pytest.raises(StorageError, match=r"logo\.png"):
        await load_file(storage, "t1", ref)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("../secret.png", "dot"),
        ("/etc/passwd", "relative"),
        ("fonts/../../x.woff2", "dot"),
        ("a\\b.css", "paths"),
        ("logo\u202egnp.css", "bidirectional"),
        ("CON.css", "reserves"),
        ("", "empty"),
    ],
)
async def test_a_name_the_safe_name_rule_refuses_is_a_400_naming_it(
    storage: LocalStorage, tmp_path: Path, name: str, words: str
) -> None:
    with pytest.raises(RequestError, match=words) as raised:
        await store_file(storage, "t1", name, b"body{}")
    assert raised.value.field == name
    assert not (tmp_path / "files").exists()


async def test_names_are_kept_in_nfc(storage: LocalStorage) -> None:
    decomposed = unicodedata.normalize("NFD", "café.css")
    ref = await store_file(storage, "t1", decomposed, b"p{}")
    assert ref.name == unicodedata.normalize("NFC", "café.css") != decomposed


async def test_a_file_claiming_to_be_png_that_is_html_is_refused(storage: LocalStorage) -> None:
    with pytest.raises(RequestError, match="image/png") as raised:
        await store_file(storage, "t1", "logo.png", b"<html><script>alert(1)</script>")
    assert raised.value.field == "logo.png"


async def test_text_types_come_from_the_name_only_for_utf8_bytes(storage: LocalStorage) -> None:
    css = await store_file(storage, "t1", "style.css", b"p { color: red }")
    svg = await store_file(storage, "t1", "x.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>")
    binary = await store_file(storage, "t1", "x.css", b"\xff\xfe\x00junk")
    assert (css.content_type, svg.content_type) == ("text/css", "image/svg+xml")
    assert binary.content_type == "application/octet-stream"


async def test_store_files_writes_nothing_when_one_is_refused(
    storage: LocalStorage, tmp_path: Path
) -> None:
    with pytest.raises(RequestError) as raised:
        await store_files(storage, "t1", [("ok.png", PNG), ("../bad.png", PNG)])
    assert raised.value.field == "../bad.png"
    assert not (tmp_path / "files").exists()
