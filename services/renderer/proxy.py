"""The egress proxy: the one door every byte Chromium sends to the network goes through.

The CDP request filter (`egress.RequestFilter`) sees what the `Fetch` domain pauses, and
that is not everything: popups, shared and service workers of other targets, speculative
prefetch, `<link rel=preconnect>`, WebSockets and WebRTC never pass it, and after its
verdict Chromium resolves the name again (DNS rebinding). So Chromium is also told to
send all its traffic to this proxy (`--proxy-server` with `--proxy-bypass-list=<-loopback>`,
which removes Chromium's implicit direct route to loopback; each job's browser context
names its tab's own door), and the proxy

- reads a request head (at most `HEAD_LIMIT` bytes within `HEAD_TIMEOUT` seconds):
  `CONNECT host:port` for HTTPS and WebSockets (Chromium tunnels `ws:` through CONNECT
  too), or `METHOD http://host:port/path` for plain HTTP;
- asks the one address policy (`Egress.destination`, the same object, DNS cache and
  rules as the CDP filter) for a verdict and the addresses it judged;
- connects to one of exactly those addresses, never to the name, so the address used is
  the address checked; plain HTTP is sent on in origin form with `Connection: close`
  (one request per connection: a reused connection could carry a request for another
  host to the address checked for the first);
- refuses with `403` and records the refusal in the job's `Evidence`, as the CDP
  filter does, so every refusal from either layer shows on the job.

A `Door` is one listening port on 127.0.0.1, made for one job's browser context and closed
with it, so whatever passes it is that job's, and nobody else's (`renderer/evidence`).
The browser-wide
`--proxy-server` gets a door of its own that belongs to no job and refuses everything: no
page lives in the default context, only Chromium's own calls home arrive there.

The proxy itself listens on loopback, which a page cannot reach directly (the policy
refuses loopback) and which it can only reach through its own door.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence

from services.renderer.egress import Egress
from services.renderer.evidence import Evidence, Refusal, clip

log = logging.getLogger(__name__)

HEAD_LIMIT = 32 * 1024
"""Bytes a request or response head may take (Chromium's heads are well under 8 KB)."""

HEAD_TIMEOUT = 10.0
"""Seconds a client may take to send its request head, and a server its response head."""

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection to one checked address."""

CHUNK = 64 * 1024

BYPASS_NOTHING = "<-loopback>"
"""`--proxy-bypass-list` value that sends loopback through the proxy too (Chromium goes to
loopback directly otherwise, whatever `--proxy-server` says)."""

# Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: never passed on.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
    }
)

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Dial = Callable[[str, int], Awaitable[Streams]]
"""(address, port) → an open connection; tests swap in one that maps test addresses."""


async def open_tcp(address: str, port: int) -> Streams:
    """The real dial: a TCP connection to `address` (an IP address) and `port`."""
    return await asyncio.open_connection(address, port, limit=HEAD_LIMIT)


class _Refused(Exception):
    """The request cannot go on; `status` and `reason` are what the client is told."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Door:
    """One listening port of the proxy, made for one job's browser context: what passes
    it is that job's `evidence`, bound when the door is made (None: the door of no job,
    which refuses everything and only logs).

    A connection is tied to the evidence as it is accepted, before anything is read; once
    the job's render is over (its evidence sealed) a connection is refused at once and
    counted, and a refusal that a lookup decided after the seal is dropped and counted.
    """

    def __init__(self, proxy: EgressProxy, evidence: Evidence | None = None) -> None:
        self._proxy = proxy
        self.evidence = evidence
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def closed(self) -> bool:
        """Whether the door refuses every request: it is no job's."""
        return self.evidence is None

    async def open(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, limit=HEAD_LIMIT, reuse_address=True
        )

    @property
    def port(self) -> int:
        assert self._server is not None, "door is not open"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The `proxyServer` value that sends a browser context through this door."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        """Connections open through this door now."""
        return len(self._connections)

    async def close(self) -> None:
        """Stop listening and cut every connection still open."""
        self._proxy.forget(self)
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        late = self.evidence is not None and not self.evidence.admits("connection")
        task = asyncio.ensure_future(self._proxy.serve(self, reader, writer, late=late))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    def refuse(self, target: str, reason: str) -> None:
        """Record a refusal in the job's evidence (or, for a door of no job, only log it,
        at DEBUG: that is Chromium's own background traffic)."""
        if self.evidence is None:
            log.debug("egress proxy refused %s: %s", clip(target), reason)
            return
        log.info("egress proxy refused %s: %s", clip(target), reason)
        self.evidence.refuse(Refusal(clip(target), reason), "proxy")

    def unreachable(self, authority: str, reason: str) -> None:
        """Tell the job why a checked address did not answer (a `url` job's navigation then
        fails with that reason instead of the proxy's `502`)."""
        if self.evidence is not None:
            self.evidence.cannot_reach(authority, reason)


class EgressProxy:
    """The renderer's egress proxy: `open_door()` per tab slot, `aclose()` at the end."""

    def __init__(self, egress: Egress, *, dial: Dial = open_tcp) -> None:
        self.egress = egress
        self._dial = dial
        self._doors: set[Door] = set()  # the open ones: a door per job, closed after it

    async def open_door(self, evidence: Evidence | None = None) -> Door:
        """A new door for the job whose `evidence` it records; without one, a door that
        refuses everything (the default context's)."""
        door = Door(self, evidence)
        await door.open()
        self._doors.add(door)
        return door

    def forget(self, door: Door) -> None:
        """`door` is closed: nothing to close at the end."""
        self._doors.discard(door)

    async def aclose(self) -> None:
        doors, self._doors = self._doors, set()
        await asyncio.gather(*(door.close() for door in doors))

    @property
    def doors(self) -> int:
        """Doors open now."""
        return len(self._doors)

    async def serve(
        self,
        door: Door,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        late: bool = False,
    ) -> None:
        """One client connection: one request (or tunnel), then closed; `late`, one that
        came after its job's render ended, is refused unread."""
        upstream: asyncio.StreamWriter | None = None
        try:
            if late:
                raise _Refused(403, "refused by Pressroom's egress policy: the job is over")
            method, target, head = await _read_head(reader)
            if method == b"CONNECT":
                host, port = _authority(target)
                up_reader, upstream = await self._open(door, target, host, port)
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await _relay(reader, writer, up_reader, upstream)
            else:
                host, port, origin_form = _absolute(target)
                up_reader, upstream = await self._open(door, target, host, port)
                upstream.write(_forwarded(method, origin_form, head, host, port))
                await _relay(reader, writer, up_reader, upstream, response=True)
        except _Refused as refused:
            body = refused.reason.encode()
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(
                    b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (refused.status, _PHRASES[refused.status], len(body), body)
                )
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the client or the server went away, or sent nothing usable
        finally:
            for stream in (upstream, writer):
                if stream is not None:
                    stream.close()

    async def _open(self, door: Door, target: str, host: str, port: int) -> Streams:
        """Judge `host` and connect to an address the policy checked; `_Refused` if not.
        A door of no job (`closed`) lets nothing through: no page is behind it, only
        Chromium's own calls home."""
        if door.closed:
            door.refuse(target, "no page may use this door")
            raise _Refused(403, "refused by Pressroom's egress policy: not a page's request")
        verdict, addresses = await self.egress.destination(host)
        if not verdict.allowed:
            door.refuse(target, verdict.reason)
            raise _Refused(403, f"refused by Pressroom's egress policy: {verdict.reason}")
        try:
            return await self._connect(addresses or (host,), port)
        except _Refused as failed:
            door.unreachable(f"{host}:{port}", failed.reason)
            raise

    async def _connect(self, addresses: Sequence[str], port: int) -> Streams:
        reason = "no address"
        for address in addresses:
            try:
                return await asyncio.wait_for(self._dial(address, port), CONNECT_TIMEOUT)
            except TimeoutError:
                reason = f"no answer within {CONNECT_TIMEOUT:g} s"
            except OSError as exc:
                reason = _why(exc)
        raise _Refused(502, reason)


def _why(exc: OSError) -> str:
    """A connection failure in words that name no address (the message reaches the
    tenant; the addresses behind a name are not its business)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return "network unreachable"
    return exc.strerror or type(exc).__name__


_PHRASES = {400: b"Bad Request", 403: b"Forbidden", 502: b"Bad Gateway"}


async def _read_head(reader: asyncio.StreamReader) -> tuple[bytes, str, list[bytes]]:
    """The request's method, target and header lines."""
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
    except asyncio.LimitOverrunError as exc:
        raise _Refused(400, "request head too large") from exc
    lines = raw[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _Refused(400, "not an HTTP/1 proxy request")
    return parts[0].upper(), parts[1].decode("latin-1"), lines[1:]


def _authority(target: str) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) of a CONNECT."""
    try:
        parts = urllib.parse.urlsplit("//" + target)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise _Refused(400, f"bad CONNECT target {clip(target)!r}") from exc
    if not host or port is None:
        raise _Refused(400, f"bad CONNECT target {clip(target)!r}")
    return host, port


def _absolute(target: str) -> tuple[str, int, str]:
    """Host, port and origin-form (`/path?query`) of a plain HTTP proxy request."""
    try:
        parts = urllib.parse.urlsplit(target)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise _Refused(400, f"bad request target {clip(target)!r}") from exc
    if parts.scheme.lower() != "http" or not host:
        raise _Refused(400, f"not an http:// URL: {clip(target)!r}")
    path = parts.path or "/"
    return host, port or 80, path + (f"?{parts.query}" if parts.query else "")


def _forwarded(method: bytes, origin_form: str, head: list[bytes], host: str, port: int) -> bytes:
    """The request as the server gets it: origin form, no hop-by-hop headers, one request
    per connection. A WebSocket handshake over plain HTTP keeps its `Upgrade`."""
    upgrade = b""
    lines = [b"%s %s HTTP/1.1" % (method, origin_form.encode("latin-1"))]
    has_host = False
    for line in head:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"upgrade":
            upgrade = value.strip()
        if key in _HOP_BY_HOP:
            continue
        has_host = has_host or key == b"host"
        lines.append(line)
    if not has_host:
        lines.append(b"Host: " + (host if port == 80 else f"{host}:{port}").encode("idna"))
    if upgrade:
        lines += [b"Upgrade: " + upgrade, b"Connection: Upgrade"]
    else:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _closing_response(raw: bytes) -> bytes:
    """A response head with its connection headers replaced by `Connection: close`, so the
    client never sends a second request down a connection opened for the first (a `101`
    keeps its `Upgrade`)."""
    lines = raw[:-4].split(b"\r\n")
    switching = lines[0].split(b" ")[1:2] == [b"101"]
    kept = [lines[0]]
    for line in lines[1:]:
        key = line.partition(b":")[0].strip().lower()
        if key in (b"connection", b"keep-alive", b"proxy-connection"):
            continue
        kept.append(line)
    kept.append(b"Connection: Upgrade" if switching else b"Connection: close")
    return b"\r\n".join(kept) + b"\r\n\r\n"


async def _relay(
    client_reader: asyncio.StreamReader,
    client: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    upstream: asyncio.StreamWriter,
    *,
    response: bool = False,
) -> None:
    """Copy bytes both ways until either side closes; with `response`, the server's
    response head is rewritten first (see `_closing_response`)."""

    async def down() -> None:
        if response:
            raw = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            client.write(_closing_response(raw))
        await _copy(up_reader, client)

    tasks = [asyncio.ensure_future(_copy(client_reader, upstream)), asyncio.ensure_future(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(CHUNK):
        writer.write(chunk)
        await writer.drain()
