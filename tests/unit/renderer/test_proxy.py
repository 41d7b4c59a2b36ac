"""The egress proxy on real sockets, without a browser.

A "public" site runs on 127.0.0.1 and is reached through a dial that maps the public test
address to it (public names cannot be resolved here, so `Egress` gets a fake resolver).
A loopback canary records every connection it accepts: whatever the proxy is asked, the
canary must see nothing, connections included, when the policy refuses.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY

from services.renderer import proxy as proxy_module
from services.renderer.egress import Egress
from services.renderer.evidence import Evidence
from services.renderer.proxy import Door, EgressProxy, Streams, open_tcp
from tests.conftest import eventually

PUBLIC = "93.184.216.34"


@dataclass
class Canary:
    """A raw TCP server that counts the connections it accepts."""

    port: int = 0
    accepted: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            writer.close()

        self.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@dataclass
class Site:
    """A small HTTP/1.1 server that keeps connections alive and records request heads."""

    port: int = 0
    heads: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    break
                self.heads.append(head)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n"
                    b"Keep-Alive: timeout=60\r\n\r\nhello"
                )
                await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@dataclass
class World:
    proxy: EgressProxy
    door: Door
    evidence: Evidence
    site: Site
    canary: Canary
    dialled: list[tuple[str, int]]
    answers: dict[str, list[Sequence[str]]]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    site, canary = Site(), Canary()
    await site.start()
    await canary.start()
    dialled: list[tuple[str, int]] = []
    answers: dict[str, list[Sequence[str]]] = {"public.test": [[PUBLIC]]}

    async def resolve(host: str) -> Sequence[str]:
        queue = answers.get(host)
        if not queue:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return queue.pop(0) if len(queue) > 1 else queue[0]

    async def dial(address: str, port: int) -> Streams:
        dialled.append((address, port))
        if address == PUBLIC:
            return await open_tcp("127.0.0.1", site.port)
        return await open_tcp(address, port)  # anything else really goes there

    egress = Egress(allow_private=False, resolve=resolve, ttl=0)
    proxy = EgressProxy(egress, dial=dial)
    evidence = Evidence()
    door = await proxy.open_door(evidence)
    try:
        yield World(proxy, door, evidence, site, canary, dialled, answers)
    finally:
        await proxy.aclose()
        for server in (site.server, canary.server):
            assert server is not None
            server.close()


async def ask(door: Door, head: bytes) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    """Send `head` to the door; the status line and header block of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
    writer.write(head)
    answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    return answer, reader, writer


async def test_plain_http_goes_to_the_checked_address_in_origin_form(world: World) -> None:
    answer, reader, writer = await ask(
        world.door,
        b"GET http://public.test/hello?x=1 HTTP/1.1\r\nHost: public.test\r\n"
        b"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 OK")
    # The client is told the connection ends with this response, however the server
    # wanted it: a second request on it could be meant for another host.
    assert b"Connection: close" in answer and b"keep-alive" not in answer.lower()
    assert await reader.readexactly(5) == b"hello"
    writer.close()  # as Chromium does after a `Connection: close` response
    (head,) = world.site.heads
    assert head.startswith(b"GET /hello?x=1 HTTP/1.1\r\n")
    assert b"Connection: close" in head
    assert b"Proxy-" not in head
    assert world.dialled == [(PUBLIC, 80)]
    assert world.evidence.refused.facts() == []


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "0x7f.1:{port}",
        "2130706433:{port}",
        "[::1]:{port}",
        "[::ffff:127.0.0.1]:{port}",
    ],
)
async def test_connect_to_loopback_is_refused_and_never_dialled(world: World, target: str) -> None:
    target = target.format(port=world.canary.port)
    answer, _, writer = await ask(world.door, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
    writer.close()
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert world.dialled == []
    assert world.canary.accepted == 0
    (refusal,) = world.evidence.refused.facts()
    assert refusal["url"] == target
    assert "loopback" in refusal["reason"]


async def test_plain_http_to_loopback_is_refused(world: World) -> None:
    url = f"http://127.0.0.1:{world.canary.port}/admin"
    answer, reader, writer = await ask(world.door, f"GET {url} HTTP/1.1\r\n\r\n".encode())
    body = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"egress policy" in body
    assert world.canary.accepted == 0
    assert world.evidence.refused.facts()[0]["url"] == url


async def test_connect_tunnels_bytes_to_a_public_host(world: World) -> None:
    answer, reader, writer = await ask(world.door, b"CONNECT public.test:443 HTTP/1.1\r\n\r\n")
    assert answer == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    writer.write(b"GET /through HTTP/1.1\r\nHost: public.test\r\n\r\n")
    reply = await asyncio.wait_for(reader.readuntil(b"hello"), 5)
    writer.close()
    assert reply.startswith(b"HTTP/1.1 200 OK")
    assert world.site.heads[0].startswith(b"GET /through ")
    assert world.dialled == [(PUBLIC, 443)]


async def test_a_name_that_rebinds_to_loopback_is_refused_at_the_second_answer(
    world: World,
) -> None:
    world.answers["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
    first, _, w1 = await ask(world.door, b"CONNECT rebind.test:80 HTTP/1.1\r\n\r\n")
    second, _, w2 = await ask(world.door, b"CONNECT rebind.test:80 HTTP/1.1\r\n\r\n")
    w1.close()
    w2.close()
    assert first.startswith(b"HTTP/1.1 200")
    assert second.startswith(b"HTTP/1.1 403")
    # What was dialled is the address judged, never the name re-resolved by someone else.
    assert world.dialled == [(PUBLIC, 80)]
    assert world.canary.accepted == 0


async def test_a_name_with_public_and_loopback_answers_is_refused(world: World) -> None:
    world.answers["mixed.test"] = [[PUBLIC, "127.0.0.1"]]
    answer, _, writer = await ask(world.door, b"CONNECT mixed.test:443 HTTP/1.1\r\n\r\n")
    writer.close()
    assert answer.startswith(b"HTTP/1.1 403")
    assert "DNS rebinding" in world.evidence.refused.facts()[0]["reason"]
    assert world.dialled == []


async def test_garbage_and_oversized_heads_get_400(world: World) -> None:
    answer, _, writer = await ask(world.door, b"HELLO\r\n\r\n")
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400")
    big = b"GET http://public.test/ HTTP/1.1\r\nX: " + b"a" * 40_000 + b"\r\n\r\n"
    answer, _, writer = await ask(world.door, big)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400")
    answer, _, writer = await ask(world.door, b"GET ftp://public.test/ HTTP/1.1\r\n\r\n")
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400")
    assert world.dialled == []


async def test_a_client_that_never_finishes_its_head_is_let_go(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy_module, "HEAD_TIMEOUT", 0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", world.door.port)
    writer.write(b"CONNECT public.test:443 HTTP/1.1\r\n")  # and nothing more
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    assert world.door.connections == 0


async def test_closing_the_door_cuts_open_tunnels(world: World) -> None:
    answer, reader, writer = await ask(world.door, b"CONNECT public.test:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200")
    assert world.door.connections == 1
    await world.door.close()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_the_door_of_no_job_refuses_even_public_hosts(world: World) -> None:
    """The default context's door: only Chromium's own calls home arrive there."""
    closed = await world.proxy.open_door()  # no evidence: no job's
    try:
        answer, _, writer = await ask(closed, b"CONNECT public.test:443 HTTP/1.1\r\n\r\n")
        writer.close()
    finally:
        await closed.close()
    assert answer.startswith(b"HTTP/1.1 403")
    assert world.dialled == []


def late(source: str) -> float:
    value = REGISTRY.get_sample_value("pressroom_late_evidence_total", {"source": source})
    return value or 0.0


async def test_a_connection_after_the_job_ended_is_refused_unread_and_counted(
    world: World,
) -> None:
    """A page's late connection (a timer's fetch as its context is being closed) reaches
    nothing and records nothing: the door's evidence is its one job's, sealed."""
    world.evidence.seal()
    before = late("connection")
    answer, _, writer = await ask(world.door, b"CONNECT public.test:443 HTTP/1.1\r\n\r\n")
    writer.close()
    assert answer.startswith(b"HTTP/1.1 403")
    assert world.dialled == []
    assert world.evidence.refused.facts() == []
    assert late("connection") == before + 1


async def test_a_refusal_decided_after_the_job_ended_is_dropped_and_counted(
    world: World,
) -> None:
    """The proxy's verdict on a name comes after a lookup: if the job's render ended
    meanwhile, its refusal is dropped and counted, never recorded late."""
    answer = asyncio.Event()

    async def slow(host: str) -> Sequence[str]:
        await answer.wait()
        return ["127.0.0.1"]

    evidence = Evidence()
    proxy = EgressProxy(Egress(allow_private=False, resolve=slow))
    door = await proxy.open_door(evidence)
    try:
        before = late("proxy")
        reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
        writer.write(b"CONNECT slow.test:443 HTTP/1.1\r\n\r\n")
        await writer.drain()
        await eventually(lambda: door.connections == 1, 5, "the connection accepted")
        evidence.seal()
        answer.set()
        status = await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)
        writer.close()
    finally:
        await proxy.aclose()
    assert status.startswith(b"HTTP/1.1 403")
    assert evidence.refused.facts() == []
    assert late("proxy") == before + 1


async def test_a_closed_door_is_forgotten() -> None:
    """A door per job: the proxy keeps only the open ones."""
    proxy = EgressProxy(Egress(allow_private=False))
    doors = [await proxy.open_door(Evidence()) for _ in range(20)]
    assert proxy.doors == 20
    for door in doors:
        await door.close()
    assert proxy.doors == 0
    await proxy.aclose()
