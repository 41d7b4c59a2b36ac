"""Request headers as text: the one place a route reads a header's value.

aiohttp hands header values over as `str`, decoding their bytes as UTF-8 with
`surrogateescape`: a byte that is not UTF-8 arrives as a lone surrogate (`'\\udcff'`),
which every later `.encode()` (a key's hash, an id derived from an `Idempotency-Key`, a
JSON answer quoting the value) refuses with `UnicodeEncodeError`. `header` refuses such a
value at once: a `400` naming the header. (Controls other than the tab never get this far:
aiohttp's parser answers them with its own `400`, as HTTP forbids them in a field value.)
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from services.core.model.errors import RequestError


def _is_text(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def text_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Every header whose bytes are UTF-8, for readers that take them all and must not
    refuse the request: the trace context (OpenTelemetry's `baggage` reader raises on a
    value that is not, and a trace that cannot be read is only not continued)."""
    return {name: value for name, value in headers.items() if _is_text(value)}


def header(request: web.Request, name: str) -> str | None:
    """The value of the request's header `name` (None without one); `RequestError`
    naming it if its bytes are not UTF-8."""
    return header_of(request.headers, name)


def header_of(headers: Mapping[str, str], name: str) -> str | None:
    """`header` of headers as aiohttp decodes them."""
    value = headers.get(name)
    if value is not None and not _is_text(value):
        raise RequestError(f"the {name} header is not valid UTF-8", field=name)
    return value
