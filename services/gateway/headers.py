"""Request headers as text: the one place a route reads a header's value.

aiohttp hands header values over as `str`, decoding their bytes as UTF-8 with
`surrogateescape`: a byte that is not UTF-8 arrives as a lone surrogate (`'\\udcff'`),
which every later `.encode()` (a key's hash, an id derived from an `Idempotency-Key`, a
JSON answer quoting the value) refuses with `UnicodeEncodeError`. `header` refuses such a
value at once: a `400` naming the header. (Controls other than the tab never get this far:
aiohttp's parser answers them with its own `400`, as HTTP forbids them in a field value.)
"""

from __future__ import annotations

from aiohttp import web

from services.core.errors import RequestError


def header(request: web.Request, name: str) -> str | None:
    """The value of the header `name` (None without one); `RequestError` naming it if its
    bytes are not UTF-8."""
    value = request.headers.get(name)
    if value is None:
        return None
    try:
        value.encode()
    except UnicodeEncodeError:
        raise RequestError(f"the {name} header is not valid UTF-8", field=name) from None
    return value
