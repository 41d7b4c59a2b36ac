"""Slow and idle clients are let go by the gateway: half-sent heads, trickled bodies, and
more connections than it will hold open."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, header_timeout=1.0, body_timeout=1.0, max_connections=8))
    await stack.start("gateway")
    yield stack
    await stack.close()


async def connect(stack: Stack) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    address = urllib.parse.urlsplit(stack.url)
    assert address.hostname is not None and address.port is not None
    return await asyncio.open_connection(address.hostname, address.port)


async def test_half_a_request_head_is_cut_off(gateway: Stack) -> None:
    reader, writer = await connect(gateway)
    writer.write(b"POST /jobs HTTP/1.1\r\nHost: pressroom\r\nContent-Type: appl")
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
    assert time.monotonic() - started < 5
    writer.close()


async def test_a_body_that_never_arrives_is_a_408_and_the_connection_ends(gateway: Stack) -> None:
    reader, writer = await connect(gateway)
    token = gateway.tenant.key
    writer.write(
        b"POST /jobs HTTP/1.1\r\nHost: pressroom\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 100\r\n\r\n"
        b'{"template": '
    )
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert b"Connection: close" in head
    error = json.loads(body)["error"]
    assert error == {
        "type": "request_timeout",
        "message": "the request body did not arrive within 1 s",
        "field": "body",
    }


@pytest.fixture
async def capped(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, header_timeout=30.0, max_connections=8))
    await stack.start("gateway")
    yield stack
    await stack.close()


async def test_connections_past_the_cap_get_503_and_the_gateway_recovers(
    capped: Stack,
) -> None:
    gateway = capped
    idle = []
    answer = b""
    for _ in range(12):  # the cap is 8; the test's own client may hold some of them
        reader, writer = await connect(gateway)
        idle.append(writer)
        try:
            answer = await asyncio.wait_for(reader.read(), 0.3)
        except TimeoutError:
            continue  # held open: under the cap
        break
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), answer
    assert json.loads(body)["error"]["type"] == "unavailable"
    for writer in idle:
        writer.close()

    async def healthy() -> bool:
        async with gateway.client.get(f"{gateway.url}/healthz") as response:
            return response.status == 200

    await eventually(healthy, 10)
