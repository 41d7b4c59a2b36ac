"""Chromium's DevTools protocol over a pipe: one `Connection` per browser, one `Session`
per target, attached in flat mode.

Why not pyppeteer's: its sessions are not flat, so every message to or from a tab went
inside a second JSON layer (`Target.sendMessageToTarget`, `receivedMessageFromTarget`),
the PDF's base64 included, over a websocket; the renderer spent several times more
Python per invoice there than with flat sessions (docs/benchmarks.md). Here:

- Chromium runs with `--remote-debugging-pipe`: it reads commands on its fd 3 and writes
  answers and events on its fd 4, each a JSON text ended by a NUL byte. No port listens
  on loopback for a page to find, and there is no websocket framing to pay for.
- A flat session is a `sessionId` on each message of one connection.
- A command whose caller gives up (cancelled, timed out) is forgotten: its answer is
  dropped when it comes. Awaits here can be cancelled like any other.
- Event handlers run synchronously, in the order messages arrive, before any coroutine
  awaiting an answer resumes: whoever waits for an event that a command causes
  (`Session.expect`) asks before sending the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from services.core.model.errors import BrowserError

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], object]
"""Called with an event's `params`; must not block (spawn a task for any I/O)."""

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode


class _Message(msgspec.Struct):
    """What arrives: an answer (`id`, `result` or `error`) or an event (`method`,
    `params`); `result` and `params` stay raw until someone knows their type."""

    id: int | None = None
    method: str = ""
    sessionId: str | None = None
    result: msgspec.Raw = msgspec.Raw()
    error: dict[str, Any] | None = None
    params: msgspec.Raw = msgspec.Raw()


_decode_message = msgspec.json.Decoder(_Message).decode
_AS_DICT: msgspec.json.Decoder[Any] = msgspec.json.Decoder(dict[str, Any])
_decode_dict = _AS_DICT.decode


class CommandError(BrowserError):
    """Chromium answered a command with an error (`code`, and its message as the text)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.code = int(error.get("code", 0))
        detail = f" ({error['data']})" if error.get("data") else ""
        super().__init__(f"{method}: {error.get('message', 'error')}{detail}")


class ConnectionLost(BrowserError):
    """The DevTools connection closed: the browser exited, crashed or was closed."""


PIPE_BYTES = 2**20
"""Bytes a DevTools pipe holds (Linux's default is 64 KiB): a PDF's answer or a large
document's command passes in one write and one read, not a wake-up per 64 KiB."""

_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named in the fcntl module from Python 3.10 on Linux


def _widen(fd: int) -> None:
    """Give pipe `fd` `PIPE_BYTES` of room where the system allows it (else keep its own)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), PIPE_BYTES)


class _Writer(asyncio.Protocol):
    """Flow control of the command pipe: `drained` waits while the pipe is full."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._resumed: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    async def drained(self) -> None:
        if self._resumed is not None:
            await asyncio.shield(self._resumed)

    def connection_lost(self, exc: Exception | None) -> None:
        self.resume_writing()
        self.connection.lost("the command pipe closed")


class Connection(asyncio.Protocol):
    """The browser's DevTools connection: commands out, answers and events in.

    Open it with `Connection.open(read_fd, write_fd)`; `browser` is the session of the
    browser itself, `session(id)` that of an attached target. `closed` is done once the
    connection is gone; every command waiting then fails with `ConnectionLost`.
    """

    def __init__(self) -> None:
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.browser = Session(self, None)
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any], msgspec.json.Decoder[Any]]] = {}
        self._handlers: dict[tuple[str | None, str], list[Handler]] = {}
        self.expected: set[asyncio.Future[dict[str, Any]]] = set()  # `Session.expect`s
        self._parts: list[bytes] = []  # a message not ended yet, as read so far
        self._transport: asyncio.WriteTransport | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._writer: _Writer | None = None

    @classmethod
    async def open(cls, read_fd: int, write_fd: int) -> Connection:
        """A connection reading Chromium's messages from `read_fd` and writing commands to
        `write_fd` (both pipe ends this process owns; closed with the connection)."""
        loop = asyncio.get_running_loop()
        for fd in (read_fd, write_fd):
            _widen(fd)
        connection = cls()
        reader, _ = await loop.connect_read_pipe(lambda: connection, os.fdopen(read_fd, "rb", 0))
        writer = _Writer(connection)
        transport, _ = await loop.connect_write_pipe(lambda: writer, os.fdopen(write_fd, "wb", 0))
        connection._reader = reader
        connection._transport = transport
        connection._writer = writer
        return connection

    def session(self, session_id: str) -> Session:
        return Session(self, session_id)

    # --- sending ------------------------------------------------------------------------

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None
    ) -> dict[str, Any]:
        """Send a command and return its `result`; `CommandError` if Chromium refused it,
        `ConnectionLost` if the connection is (or goes) away first."""
        result: dict[str, Any] = await self.send_as(_AS_DICT, method, params, session_id)
        return result

    async def send_as(
        self,
        decoder: msgspec.json.Decoder[T],
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> T:
        """`send`, with the `result` decoded by `decoder` (a struct: faster than a dict,
        and a `bytes` field decodes base64 in C)."""
        if self.closed.done() or self._transport is None or self._writer is None:
            raise ConnectionLost(f"{method}: Chromium is gone")
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method}
        if params:
            message["params"] = params
        if session_id is not None:
            message["sessionId"] = session_id
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending[ident] = (method, answer, decoder)
        try:
            self._transport.write(_encode(message) + b"\0")
            await self._writer.drained()
            return await answer
        finally:
            self._pending.pop(ident, None)  # a caller that gave up: its answer is dropped

    # --- receiving ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        start = 0
        while (end := data.find(b"\0", start)) >= 0:
            if self._parts:  # the end of a message that began in earlier reads
                self._parts.append(data[start:end])
                self._dispatch(b"".join(self._parts))
                self._parts.clear()
            else:
                self._dispatch(view[start:end])
            start = end + 1
        if start < len(data):
            self._parts.append(data[start:])

    def _dispatch(self, raw: bytes | memoryview) -> None:
        try:
            message = _decode_message(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("unreadable DevTools message (%d bytes) ignored", len(raw))
            return
        if message.id is not None:
            self._answer(message.id, message)
            return
        handlers = self._handlers.get((message.sessionId, message.method))
        if not handlers:
            return
        params = _decode_dict(message.params) if message.params else {}
        for handler in list(handlers):
            try:
                handler(params)
            except Exception:  # one handler's bug must not end the connection
                log.exception("DevTools event handler for %s failed", message.method)

    def _answer(self, ident: int, message: _Message) -> None:
        method, answer, decoder = self._pending.pop(ident, ("", None, _AS_DICT))
        if answer is None or answer.done():
            return
        if message.error is not None:
            answer.set_exception(CommandError(method, message.error))
            return
        try:
            answer.set_result(decoder.decode(message.result or b"{}"))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            answer.set_exception(CommandError(method, {"message": f"unexpected answer: {exc}"}))

    def eof_received(self) -> bool | None:
        self.lost("Chromium closed its end of the DevTools pipe")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost("the DevTools pipe closed")

    def lost(self, why: str) -> None:
        """The connection is gone: fail whatever waits for an answer."""
        if self.closed.done():
            return
        self.closed.set_result(None)
        pending, self._pending = self._pending, {}
        for method, answer, _ in pending.values():
            if not answer.done():
                answer.set_exception(ConnectionLost(f"{method}: {why}"))
        for future in list(self.expected):
            if not future.done():
                future.set_exception(ConnectionLost(f"an awaited event: {why}"))
        self._handlers.clear()

    def close(self) -> None:
        """Close both pipes (the browser sees its command pipe end)."""
        for transport in (self._transport, self._reader):
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
        self.lost("closed")

    # --- events -------------------------------------------------------------------------

    def on(self, session_id: str | None, event: str, handler: Handler) -> None:
        self._handlers.setdefault((session_id, event), []).append(handler)

    def off(self, session_id: str | None, event: str, handler: Handler) -> None:
        handlers = self._handlers.get((session_id, event), [])
        with contextlib.suppress(ValueError):
            handlers.remove(handler)
        if not handlers:
            self._handlers.pop((session_id, event), None)

    @property
    def listening(self) -> set[str | None]:
        """The sessions (None: the browser's) with a handler for some event now."""
        return {session for session, _ in self._handlers}

    def forget(self, session_id: str) -> None:
        """Drop every handler of `session_id` (its target is gone)."""
        for key in [key for key in self._handlers if key[0] == session_id]:
            del self._handlers[key]


class Session:
    """Commands to and events from one target (`id` None: the browser itself)."""

    def __init__(self, connection: Connection, session_id: str | None) -> None:
        self.connection = connection
        self.id = session_id

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.connection.send(method, params, self.id)

    async def send_as(
        self, decoder: msgspec.json.Decoder[T], method: str, params: dict[str, Any] | None = None
    ) -> T:
        return await self.connection.send_as(decoder, method, params, self.id)

    def on(self, event: str, handler: Handler) -> None:
        """Call `handler` with the `params` of every `event` of this session."""
        self.connection.on(self.id, event, handler)

    def expect(
        self, event: str, matches: Callable[[dict[str, Any]], bool] | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """A future of the `params` of the next `event` (that `matches`); ask before the
        command that causes it. Cancel the future to stop waiting."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def handler(params: dict[str, Any]) -> None:
            if not future.done() and (matches is None or matches(params)):
                future.set_result(params)

        def done(_: asyncio.Future[dict[str, Any]]) -> None:
            self.connection.off(self.id, event, handler)
            self.connection.expected.discard(future)

        if self.connection.closed.done():
            future.set_exception(ConnectionLost(f"{event}: Chromium is gone"))
            return future
        self.connection.on(self.id, event, handler)
        self.connection.expected.add(future)
        future.add_done_callback(done)
        return future

    def forget(self) -> None:
        """Drop this session's handlers (its target is gone or detached)."""
        if self.id is not None:
            self.connection.forget(self.id)
