"""The address policy for outbound requests (webhooks now, page loads later).

A URL is allowed when it is http(s) and every address its host resolves to is public:
no private, loopback, link-local (169.254.169.254 included), multicast, reserved or
unspecified address, unless private networks are explicitly allowed. The check is made
again at connect time by `PolicyResolver`, so DNS rebinding between check and use does
not get through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from services.core.errors import RequestError


class ForbiddenAddress(OSError):
    """The host resolves to an address the policy refuses."""


def is_forbidden(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


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


async def check_url(url: str, *, allow_private: bool, field: str) -> None:
    """Raise `RequestError` naming `field` if `url` is not allowed by the policy."""
    parts = parse_http_url(url, field)
    if allow_private:
        return
    host = parts.hostname or ""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RequestError(f"{field} host {host!r} does not resolve: {exc}", field=field) from exc
    bad = sorted({str(info[4][0]) for info in infos if is_forbidden(str(info[4][0]))})
    if bad:
        raise RequestError(
            f"{field} resolves to a private, loopback or link-local address ({', '.join(bad)}); "
            "set PRESSROOM_ALLOW_PRIVATE_NETWORKS=1 to allow it",
            field=field,
        )


def literal_address_forbidden(url: str) -> str | None:
    """The host of `url` if it is an IP literal the policy refuses, else None.

    aiohttp connects to IP literals without asking the resolver, so `PolicyResolver`
    never sees them: callers check them with this first.
    """
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return host if is_forbidden(host) else None


class PolicyResolver(AbstractResolver):
    """An aiohttp resolver that drops forbidden addresses and fails if none are left."""

    def __init__(self, *, allow_private: bool) -> None:
        self.allow_private = allow_private
        self.inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        if self.allow_private:
            return results
        allowed = [r for r in results if not is_forbidden(r["host"])]
        if not allowed:
            raise ForbiddenAddress(f"{host} resolves only to forbidden addresses")
        return allowed

    async def close(self) -> None:
        await self.inner.close()


def resolver_kwargs(allow_private: bool) -> dict[str, Any]:
    return {"resolver": PolicyResolver(allow_private=allow_private)}
