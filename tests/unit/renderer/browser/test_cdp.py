"""The DevTools connection against a fake browser on the other end of two real pipes:
commands answered, errors, events by session, cancelled commands, split and joined
messages, and a browser that goes away."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.renderer.browser.cdp import CommandError, Connection, ConnectionLost
from services.renderer.browser.output import _STREAM_CHUNK


class FakeBrowser:
    """Chromium's end of the pipes: reads NUL-ended commands, writes what a test says."""

    def __init__(self, commands: int, messages: int) -> None:
        self.commands = os.fdopen(commands, "rb", 0)
        self.messages = os.fdopen(messages, "wb", 0)
        self._buffer = b""

    async def command(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = await asyncio.to_thread(self.commands.read, 65536)
            assert chunk, "the connection closed its command pipe"
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        found: dict[str, Any] = json.loads(raw)
        return found

    async def write(self, *messages: dict[str, Any], raw: bytes = b"") -> None:
        """Write in a thread: a full pipe blocks until the connection reads it."""
        data = b"".join(json.dumps(m).encode() + b"\0" for m in messages) + raw
        await asyncio.to_thread(self.messages.write, data)

    def close(self) -> None:
        self.messages.close()
        self.commands.close()


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Connection, FakeBrowser]]:
    commands_in, commands_out = os.pipe()
    messages_in, messages_out = os.pipe()
    connection = await Connection.open(messages_in, commands_out)
    browser = FakeBrowser(commands_in, messages_out)
    yield connection, browser
    connection.close()
    browser.close()


async def test_a_command_gets_its_answer_and_an_error_names_the_method(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    connection, browser = pair
    first = asyncio.create_task(connection.browser.send("Target.getTargets"))
    second = asyncio.create_task(connection.session("S1").send("Page.navigate", {"url": "x"}))
    one, two = await browser.command(), await browser.command()
    assert (one["method"], "sessionId" in one) == ("Target.getTargets", False)
    assert (two["sessionId"], two["params"]) == ("S1", {"url": "x"})
    await browser.write(
        {"id": two["id"], "error": {"code": -32000, "message": "No frame"}},
        {"id": one["id"], "result": {"targetInfos": []}},
    )
    assert await first == {"targetInfos": []}
    with pytest.raises(CommandError, match=r"Page\.navigate: No frame") as raised:
        await second
    assert raised.value.code == -32000


async def test_events_reach_their_session_and_an_expectation_set_before_the_command(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    """The event a command causes may come before its answer: `expect` first catches it."""
    connection, browser = pair
    heard: list[tuple[str, Any]] = []
    tab = connection.session("T")
    tab.on("Network.requestWillBeSent", lambda p: heard.append(("T", p["requestId"])))
    connection.session("U").on("Network.requestWillBeSent", lambda p: heard.append(("U", p)))
    loaded = tab.expect("Page.loadEventFired")
    sent = asyncio.create_task(tab.send("Page.reload"))
    command = await browser.command()
    await browser.write(
        {"method": "Network.requestWillBeSent", "sessionId": "T", "params": {"requestId": "r1"}},
        {"method": "Page.loadEventFired", "sessionId": "T", "params": {"timestamp": 1}},
        {"id": command["id"], "result": {}},
    )
    await sent
    assert await loaded == {"timestamp": 1}
    assert heard == [("T", "r1")]


async def test_a_command_given_up_on_leaves_the_connection_working(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    connection, browser = pair
    slow = asyncio.create_task(connection.browser.send("Browser.getVersion"))
    given_up = await browser.command()
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    after = asyncio.create_task(connection.browser.send("Browser.getVersion"))
    answered = await browser.command()
    await browser.write({"id": given_up["id"], "result": {"late": True}})  # dropped
    await browser.write({"id": answered["id"], "result": {"product": "Chrome/156"}})
    assert await after == {"product": "Chrome/156"}


async def test_a_message_split_over_many_reads_and_several_in_one_are_all_read(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    connection, browser = pair
    data = "A" * 300_000  # a PDF's base64: many pipe reads
    sent = [asyncio.create_task(connection.browser.send("IO.read")) for _ in range(3)]
    ids = [(await browser.command())["id"] for _ in range(3)]
    whole = b"".join(json.dumps({"id": i, "result": {"data": data}}).encode() + b"\0" for i in ids)
    for start in range(0, len(whole), 70_000):
        await browser.write(raw=whole[start : start + 70_000])
    assert [len((await task)["data"]) for task in sent] == [300_000] * 3


async def test_a_browser_that_goes_away_fails_what_waits_and_what_comes(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    connection, browser = pair
    waiting = asyncio.create_task(connection.browser.send("Page.printToPDF"))
    loaded = connection.session("T").expect("Page.loadEventFired")
    await browser.command()
    browser.messages.close()  # Chromium exited
    with pytest.raises(ConnectionLost):
        await waiting
    with pytest.raises(ConnectionLost):
        await loaded
    await asyncio.wait_for(asyncio.shield(connection.closed), 5)
    with pytest.raises(ConnectionLost):
        await connection.browser.send("Browser.close")


async def test_a_typed_answer_decodes_the_stream_s_base64_and_a_wrong_one_is_an_error(
    pair: tuple[Connection, FakeBrowser],
) -> None:
    connection, browser = pair
    session = connection.session("T")
    read = asyncio.create_task(session.send_as(_STREAM_CHUNK, "IO.read", {"handle": "h"}))
    wrong = asyncio.create_task(session.send_as(_STREAM_CHUNK, "IO.read", {"handle": "h"}))
    first, second = await browser.command(), await browser.command()
    pdf = b"%PDF-1.4 \x00\xff binary"
    await browser.write(
        {"id": first["id"], "result": {"data": base64.b64encode(pdf).decode(),
                                       "base64Encoded": True, "eof": True}},
        {"id": second["id"], "result": {"data": 42}},
    )  # fmt: skip
    chunk = await read
    assert (chunk.data, chunk.eof) == (pdf, True)
    with pytest.raises(CommandError, match=r"IO\.read: unexpected answer"):
        await wrong
