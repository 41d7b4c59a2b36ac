"""The one address policy for everything Pressroom fetches: webhooks, `url` sources and
every request a page makes.

A URL is allowed when it is http(s) and every address its host resolves to is public:
no private, loopback, link-local (169.254.169.254 included), CGNAT, multicast, reserved,
site-local or unspecified address, and no IPv6 address that embeds a forbidden IPv4 one
(IPv4-mapped, IPv4-compatible, NAT64 `64:ff9b::/96`, 6to4, Teredo); the local-use NAT64
prefix `64:ff9b:1::/48` is refused whole. Hosts are read the way a browser reads them
(`http://2130706433/` and `http://0x7f.1/` are 127.0.0.1; `localhost` and `*.localhost`
are loopback without asking DNS). Look-ups have a time limit. A refusal names the host,
never the address it resolved to (that would make the service a DNS oracle for the
inside of its network). `PolicyResolver` checks again at connect time, so DNS rebinding
between the check and the use does not get through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import urllib.parse

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from services.core.model.errors import RequestError, Unavailable

LOOKUP_TIMEOUT = 5.0
"""Seconds a DNS look-up may take before the host counts as not resolving (for now)."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# A host "ends in a number" (WHATWG URL): a browser then reads it as an IPv4 address.
_NUMBER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
PRIVATE_HINT = "set PRESSROOM_ALLOW_PRIVATE_NETWORKS=1 to allow it"


class ForbiddenAddress(OSError):
    """The host resolves to an address the policy refuses."""


def _forbidden_v4(ip: ipaddress.IPv4Address) -> bool:
    return not ip.is_global or ip.is_multicast


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches or carries."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # the Teredo server and the (de-obfuscated) client
    if ip in _NAT64 or ip in _IPV4_COMPATIBLE:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def is_forbidden(address: str) -> bool:
    """Whether the policy refuses `address` (an IPv4 or IPv6 literal, zone allowed)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv4Address):
        return _forbidden_v4(ip)
    embedded = _embedded_ipv4(ip)
    if embedded:
        return any(_forbidden_v4(v4) for v4 in embedded)
    if ip in _NAT64_LOCAL or ip.is_site_local or ip.is_reserved or ip.is_multicast:
        return True
    return not ip.is_global


def literal_address(host: str) -> str | None:
    """The address `host` spells, as a browser reads it, or None when `host` is a name.

    IPv6 hosts come without brackets (as `urlsplit().hostname` gives them); a host ending
    in a number is IPv4 in any inet_aton form (`2130706433`, `0x7f.1`, `0177.0.0.1`).
    Raises `ValueError` when `host` looks like an address but is not a valid one.
    """
    if ":" in host:
        return str(ipaddress.IPv6Address(host.split("%", 1)[0]))
    dotted = host.removesuffix(".")
    if not _NUMBER.fullmatch(dotted.rsplit(".", 1)[-1]):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(dotted))
    except OSError:
        raise ValueError(f"{host!r} is not a valid IPv4 address") from None


def is_localhost(host: str) -> bool:
    """`localhost` and its subdomains: loopback by definition, whatever DNS says."""
    name = host.removesuffix(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def parse_http_url(url: str, field: str) -> urllib.parse.SplitResult:
    """Split `url`, insisting on http(s) and a host; `RequestError` names `field` otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise RequestError(f"{field} must be an absolute http(s) URL", field=field)
    try:
        _ = parts.port
    except ValueError:
        raise RequestError(f"{field} has an invalid port", field=field) from None
    return parts


async def lookup(host: str, port: int | None = None) -> list[str]:
    """Every address of `host`, within `LOOKUP_TIMEOUT`; `socket.gaierror` if none,
    `TimeoutError` if DNS took too long."""
    loop = asyncio.get_running_loop()
    query = loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    infos = await asyncio.wait_for(query, LOOKUP_TIMEOUT)
    return [str(info[4][0]) for info in infos]


def _refused(field: str, host: str) -> RequestError:
    return RequestError(
        f"{field} host {host!r} is a private, loopback, link-local or reserved address; "
        + PRIVATE_HINT,
        field=field,
    )


async def _addresses(field: str, host: str, port: int | None) -> list[str]:
    """What `host` stands for: its literal address, loopback, or what DNS answers."""
    try:
        literal = literal_address(host)
    except ValueError as exc:
        raise RequestError(f"{field}: {exc}", field=field) from None
    if literal is not None:
        return [literal]
    if is_localhost(host):
        return ["127.0.0.1"]
    try:
        return await lookup(host, port)
    except TimeoutError:
        raise Unavailable(
            f"{field} host {host!r} did not resolve within {LOOKUP_TIMEOUT:g}s; retry"
        ) from None
    except (socket.gaierror, UnicodeError) as exc:
        raise RequestError(f"{field} host {host!r} does not resolve: {exc}", field=field) from exc


async def check_url(url: str, *, allow_private: bool, field: str) -> None:
    """Raise `RequestError` naming `field` if `url` is not allowed by the policy
    (`Unavailable` if its host did not resolve in time)."""
    parts = parse_http_url(url, field)
    if allow_private:
        return
    host = parts.hostname or ""
    if any(is_forbidden(a) for a in await _addresses(field, host, parts.port or 443)):
        raise _refused(field, host)


def literal_address_forbidden(url: str) -> str | None:
    """The host of `url` if it is an IP literal (in any spelling) the policy refuses,
    else None.

    aiohttp connects to IP literals without asking the resolver, so `PolicyResolver`
    never sees them: callers check them with this first.
    """
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        literal = literal_address(host)
    except ValueError:
        return host
    return host if literal is not None and is_forbidden(literal) else None


class PolicyResolver(AbstractResolver):
    """An aiohttp resolver that drops forbidden addresses and fails if none are left."""

    def __init__(self, *, allow_private: bool) -> None:
        self.allow_private = allow_private
        self.inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            query = self.inner.resolve(host, port, family)
            results = await asyncio.wait_for(query, LOOKUP_TIMEOUT)
        except TimeoutError:
            raise OSError(f"{host} did not resolve within {LOOKUP_TIMEOUT:g}s") from None
        if self.allow_private:
            return results
        if is_localhost(host) or any(is_forbidden(r["host"]) for r in results):
            # Any forbidden answer refuses the host (a rebinding pattern mixes them).
            raise ForbiddenAddress(f"{host} resolves to a forbidden address")
        return results

    async def close(self) -> None:
        await self.inner.close()
