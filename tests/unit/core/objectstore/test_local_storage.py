"""Local storage: writes of one key at once, as a redelivered job racing its first
attempt in the same renderer would make them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.core.model.errors import NotFound
from services.core.objectstore.storage import INLINE_WRITE, LocalStorage, sign


async def test_writes_of_one_key_at_once_all_succeed_and_leave_one_whole_file(
    tmp_path: Path,
) -> None:
    storage = LocalStorage(str(tmp_path), "http://pressroom.test", "secret")
    documents = [bytes([n]) * 2_000_000 for n in range(8)]
    await asyncio.gather(
        *(storage.put("jobs/t/j.pdf", data, "application/pdf") for data in documents)
    )
    stored = (tmp_path / "jobs" / "t" / "j.pdf").read_bytes()
    assert stored in documents
    assert [p.name for p in (tmp_path / "jobs" / "t").iterdir()] == ["j.pdf"]


async def test_small_and_large_documents_are_stored_whole_and_read_back(tmp_path: Path) -> None:
    """A document up to `INLINE_WRITE` is written on the loop, a bigger one in a thread:
    both end as whole files that read back as written."""
    storage = LocalStorage(str(tmp_path / "files"), "http://pressroom.test", "secret")
    small, large = b"%PDF-small" * 100, b"%PDF-large" * (INLINE_WRITE // 5)
    assert len(small) <= INLINE_WRITE < len(large)
    await storage.put("jobs/t/small.pdf", small, "application/pdf")
    await storage.put("jobs/t/large.pdf", large, "application/pdf")
    for key, data in (("jobs/t/small.pdf", small), ("jobs/t/large.pdf", large)):
        assert b"".join([chunk async for chunk in storage.read(key)]) == data
    assert sorted(p.name for p in (tmp_path / "files" / "jobs" / "t").iterdir()) == [
        "large.pdf",
        "small.pdf",
    ]


async def test_a_key_that_leaves_the_folder_is_refused(tmp_path: Path) -> None:
    """Also once the root has been resolved and kept (after the first write)."""
    storage = LocalStorage(str(tmp_path / "files"), "http://pressroom.test", "secret")
    await storage.put("jobs/t/a.pdf", b"a", "application/pdf")
    (tmp_path / "secret.txt").write_text("not for you")
    for key in ("../secret.txt", "jobs/../../secret.txt"):
        with pytest.raises(NotFound):
            storage.path(key)
        with pytest.raises(NotFound):
            await storage.put(key, b"x", "application/pdf")
    assert (tmp_path / "secret.txt").read_text() == "not for you"


ARABIC_INDIC = str.maketrans("0123456789", "".join(chr(0x660 + n) for n in range(10)))
SPELLINGS = {
    "sign": "+{}".format,
    "space before": " {}".format,
    "space after": "{} ".format,
    "newline": "{}\n".format,
    "underscores": "{:_}".format,
    "Arabic-Indic digits": lambda deadline: str(deadline).translate(ARABIC_INDIC),
}


@pytest.mark.parametrize("spell", SPELLINGS.values(), ids=SPELLINGS.keys())
async def test_a_link_whose_expiry_is_spelled_another_way_is_refused(
    tmp_path: Path, spell: Callable[[int], str]
) -> None:
    """The signature covers the expiry's number, and only ASCII digits spell it: `int()`
    would also read a sign, spaces, `_` and other scripts' digits, making one signature
    many links."""
    storage = LocalStorage(str(tmp_path), "http://pressroom.test", "secret")
    await storage.put("jobs/t/a.pdf", b"%PDF", "application/pdf")
    deadline = int(time.time()) + 600
    signature = sign("secret", "jobs/t/a.pdf", deadline)
    assert storage.verify("jobs/t/a.pdf", f"000{deadline}", signature).name == "a.pdf"
    assert int(spell(deadline)) == deadline
    with pytest.raises(NotFound):
        storage.verify("jobs/t/a.pdf", spell(deadline), signature)
