"""Local storage: writes of one key at once, as a redelivered job racing its first
attempt in the same renderer would make them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from services.core.storage import LocalStorage


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
