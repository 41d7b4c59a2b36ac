"""Every JetStream stream, saved and put back with JetStream's own snapshot API (what
`nats stream backup` and `nats stream restore` use): the messages with their sequence
numbers and timestamps, and every consumer with its position, so after a restore each
durable carries on where it stood at the snapshot.

A snapshot is asked on `$JS.API.STREAM.SNAPSHOT.<stream>`; the server then sends chunks
to a subject of ours, each to be answered (flow control), and an empty message at the
end. A restore is asked on `$JS.API.STREAM.RESTORE.<stream>` with the stream's
configuration and state; the server names a subject, takes each chunk as a request and
answers the final empty one with the new stream's info. nats-py has no calls for these,
so they are made here on the core client, with the operators' identity (`Role.ADMIN`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from services.core.log import bus
from services.core.model.errors import Unavailable

log = logging.getLogger(__name__)

CHUNK = 128 * 1024
"""Bytes per snapshot chunk (the server's default), well under any `max_payload`."""
SILENCE = 30.0
"""Seconds without a chunk after which a snapshot counts as broken."""
API_TIMEOUT = 10.0


class Saved(msgspec.Struct, frozen=True):
    """One stream in a backup: its name, file, digest, and the configuration and state
    the server reported (which a restore hands back)."""

    name: str
    file: str
    sha256: str
    bytes: int
    messages: int
    first_seq: int
    last_seq: int
    config: dict[str, Any]
    state: dict[str, Any]


async def _api(nc: Client, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    """One JetStream API call; `Unavailable` naming the server's error."""
    with bus.map_bus_errors(f"NATS: {subject}"):
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=API_TIMEOUT)
    answer: dict[str, Any] = json.loads(reply.data)
    if "error" in answer:
        raise Unavailable(f"NATS refused {subject}: {answer['error'].get('description')}")
    return answer


async def names(nc: Client) -> list[str]:
    """Every stream of the account, sorted."""
    found: list[str] = []
    while True:
        page = await _api(nc, "$JS.API.STREAM.NAMES", {"offset": len(found)})
        found += page.get("streams") or []
        if len(found) >= page.get("total", 0) or not page.get("streams"):
            return sorted(found)


class _Receiver:
    """Writes a snapshot's chunks to a file as they come, answering each one."""

    def __init__(self, nc: Client, path: Path) -> None:
        self.nc, self.file = nc, path.open("wb")
        self.digest, self.size = hashlib.sha256(), 0
        self.ended = asyncio.Event()
        self.heard = asyncio.Event()

    async def chunk(self, msg: Msg) -> None:
        self.heard.set()
        if not msg.data:
            self.ended.set()
            return
        self.file.write(msg.data)
        self.digest.update(msg.data)
        self.size += len(msg.data)
        if msg.reply:
            await self.nc.publish(msg.reply, b"")

    async def wait(self, stream: str) -> None:
        while not self.ended.is_set():
            self.heard.clear()
            try:
                await asyncio.wait_for(self.heard.wait(), SILENCE)
            except TimeoutError:
                raise Unavailable(f"the snapshot of {stream} stalled for {SILENCE:g} s") from None


async def save(nc: Client, stream: str, folder: Path) -> Saved:
    """Snapshot `stream` (its consumers included) into `folder/<stream>.snapshot`."""
    path = folder / f"{stream}.snapshot"
    receiver = _Receiver(nc, path)
    inbox = nc.new_inbox()
    with bus.map_bus_errors("NATS"):
        subscription = await nc.subscribe(inbox, cb=receiver.chunk)
    try:
        ask = {"deliver_subject": inbox, "no_consumers": False, "chunk_size": CHUNK}
        meta = await _api(nc, f"$JS.API.STREAM.SNAPSHOT.{stream}", ask)
        await receiver.wait(stream)
    finally:
        receiver.file.close()
        with bus.map_bus_errors("NATS"):
            await subscription.unsubscribe()
    state = meta["state"]
    return Saved(
        name=stream, file=path.name, sha256=receiver.digest.hexdigest(), bytes=receiver.size,
        messages=state.get("messages", 0), first_seq=state.get("first_seq", 0),
        last_seq=state.get("last_seq", 0), config=meta["config"], state=state,
    )  # fmt: skip


async def restore(nc: Client, saved: Saved, folder: Path, *, replace: bool) -> dict[str, Any]:
    """Put a saved stream back; the stream must not exist unless `replace` (then it is
    deleted first). Returns the restored stream's state."""
    path = folder / saved.file
    if _digest(path) != saved.sha256:
        raise Unavailable(f"{path} does not match the digest in the manifest: damaged")
    if saved.name in await names(nc):
        if not replace:
            raise Unavailable(f"stream {saved.name} exists; restore with --replace to drop it")
        await _api(nc, f"$JS.API.STREAM.DELETE.{saved.name}", {})
    ask = {"config": saved.config, "state": saved.state}
    target = (await _api(nc, f"$JS.API.STREAM.RESTORE.{saved.name}", ask))["deliver_subject"]
    with path.open("rb") as file, bus.map_bus_errors(f"NATS: restoring {saved.name}"):
        while data := file.read(CHUNK):
            await nc.request(target, data, timeout=API_TIMEOUT)
        reply = await nc.request(target, b"", timeout=10 * API_TIMEOUT)
    answer: dict[str, Any] = json.loads(reply.data)
    if "error" in answer:
        raise Unavailable(f"NATS refused the restore of {saved.name}: {answer['error']}")
    state: dict[str, Any] = answer["state"]
    return state


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while data := file.read(1 << 20):
            digest.update(data)
    return digest.hexdigest()
