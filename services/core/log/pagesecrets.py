"""What a job's page sends that may be a secret: cookies and extra request headers.

They travel sealed with the server key for the job (`crypto.ServerKeys.seal`, owner the
job id) in `JobSubmitted.page_secrets`, never in plain text on the log or in a job's
row; the renderer opens them for the one render (`open_secrets`) and applies them to
the job's own browser context (`renderer/browser/pagerequests.py`).

A header goes only to the URLs its `scope` (a regular expression, searched in the
URL, as Gotenberg's `;scope=` suffix) matches: RE2's syntax, as Gotenberg's Go, and its
linear-time matching, so a hostile scope cannot stall the renderer's loop; without a
scope, to every request of the page, as Gotenberg sends it. A cookie goes where
cookies go: to its own domain and path, set in the job's browser context, which is
thrown away with the tab.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import re2

from services.core.model.errors import RequestError, TransientError
from services.core.runtime.settings import Settings, SettingsError
from services.core.secrets.crypto import ServerKeys

SAME_SITE = ("Strict", "Lax", "None")
MAX_COOKIES = 50
MAX_HEADERS = 50
NETWORK_PREFIXES = ("http://", "https://")
"""Requests that may carry extra headers: the others reach no server."""
MAX_SCOPE = 500
"""Longest header scope, in characters."""

# Headers Chromium sets itself or that would change what the request is: refused by
# name, so a form cannot smuggle a Host or a body length past the egress proxy.
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
    }
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class Cookie(msgspec.Struct, omit_defaults=True):
    """A cookie set in the job's browser context before its page loads."""

    name: str
    """The cookie's name (an HTTP token)."""
    value: str
    """Its value (no `;` or line break)."""
    domain: str
    """The host (or domain) it is sent to."""
    path: str = "/"
    """The path under which it is sent."""
    secure: bool = False
    """Sent over HTTPS only."""
    http_only: bool = False
    """Hidden from the page's script."""
    same_site: str | None = None
    """`Strict`, `Lax` or `None`."""


class Header(msgspec.Struct, omit_defaults=True):
    """A header added to the page's requests whose URL `scope` matches (all without)."""

    name: str
    """The header's name (not `Host`, `Content-Length` or another that changes the
    request)."""
    value: str
    """Its value (no line break)."""
    scope: str | None = None
    """An RE2 regular expression searched in each request's URL: the header goes only
    where it matches (every request without one)."""

    def applies_to(self, url: str) -> bool:
        return self.scope is None or re2.search(self.scope, url) is not None


class PageSecrets(msgspec.Struct, omit_defaults=True):
    """The cookies and extra headers of a job's page."""

    cookies: list[Cookie] = msgspec.field(default_factory=list)
    """Set in the job's browser context before the page loads."""
    headers: list[Header] = msgspec.field(default_factory=list)
    """Added to the page's requests within their scope."""

    def __bool__(self) -> bool:
        return bool(self.cookies or self.headers)


def check_secrets(secrets: PageSecrets, field: str, *, pdf: bool = False) -> None:
    """`RequestError` naming `field` (`cookies`, `extraHttpHeaders`, `page_secrets`) when
    a cookie or a header cannot be sent as given, or there is no page (`pdf`) to send
    them."""
    if pdf:
        raise RequestError(f"{field} needs a page to print; a pdf job loads none", field=field)
    if len(secrets.cookies) > MAX_COOKIES or len(secrets.headers) > MAX_HEADERS:
        raise RequestError(f"{field}: at most {MAX_COOKIES} cookies and {MAX_HEADERS} headers",
                           field=field)  # fmt: skip
    for cookie in secrets.cookies:
        _check_cookie(cookie, field)
    for header in secrets.headers:
        _check_header(header, field)


def _check_cookie(cookie: Cookie, field: str) -> None:
    if not _TOKEN.fullmatch(cookie.name):
        raise RequestError(f"{field}: a cookie name must be a token, got {cookie.name!r}",
                           field=field)  # fmt: skip
    if not cookie.domain.strip(". ") or any(c in cookie.domain for c in "/:; \t"):
        raise RequestError(f"{field}: cookie {cookie.name!r} needs a domain (a host name)",
                           field=field)  # fmt: skip
    if any(c in cookie.value + cookie.path for c in ";\r\n\0"):
        raise RequestError(f"{field}: cookie {cookie.name!r} has a value or path with ';' or "
                           "a line break", field=field)  # fmt: skip
    if cookie.same_site is not None and cookie.same_site not in SAME_SITE:
        raise RequestError(f"{field}: cookie {cookie.name!r} sameSite must be one of "
                           f"{', '.join(SAME_SITE)}", field=field)  # fmt: skip


def _check_header(header: Header, field: str) -> None:
    if not _TOKEN.fullmatch(header.name) or header.name.lower() in FORBIDDEN_HEADERS:
        raise RequestError(f"{field}: {header.name!r} cannot be sent as a header", field=field)
    if any(c in header.value for c in "\r\n\0"):
        raise RequestError(f"{field}: header {header.name!r} has a line break", field=field)
    if header.scope is None:
        return
    if len(header.scope) > MAX_SCOPE:
        raise RequestError(f"{field}: the scope of {header.name!r} is over {MAX_SCOPE} "
                           "characters", field=field)  # fmt: skip
    try:
        re2.compile(header.scope)
    except re2.error as exc:
        raise RequestError(f"{field}: the scope of {header.name!r} is not a regular "
                           f"expression: {exc}", field=field) from None  # fmt: skip


def seal_secrets(secrets: PageSecrets, keys: ServerKeys, job_id: str) -> str:
    """`secrets` sealed for the job `job_id`, as `JobSubmitted.page_secrets` holds them."""
    return keys.seal(msgspec.json.encode(secrets).decode(), job_id)


def open_secrets(sealed: str | None, settings: Settings, job_id: str) -> PageSecrets | None:
    """What `seal_secrets` sealed for the job (None when it has none). A keyring that
    cannot open them is a `TransientError` naming `PRESSROOM_SERVER_KEY`: the job waits,
    retried, for the key to be put back rather than print without what it asked for."""
    if sealed is None:
        return None
    try:
        plain = settings.server_keys().unseal(sealed, job_id)
        return msgspec.json.decode(plain, type=PageSecrets)
    except (ValueError, SettingsError, msgspec.DecodeError) as exc:
        raise TransientError(
            f"the job's cookies and headers cannot be opened with PRESSROOM_SERVER_KEY: {exc}"
        ) from None


def with_headers(
    url: str, sent: dict[str, Any], headers: tuple[Header, ...]
) -> list[dict[str, str]] | None:
    """The request's headers (`sent`, as `Fetch.requestPaused` gives them) with those of
    `headers` whose scope matches `url` put in (a name given replaces the page's own);
    None when none applies, so the request goes on untouched."""
    if not url.startswith(NETWORK_PREFIXES):
        return None
    chosen = {h.name.lower(): h for h in headers if h.applies_to(url)}
    if not chosen:
        return None
    kept = [
        {"name": str(name), "value": str(value)}
        for name, value in sent.items()
        if str(name).lower() not in chosen
    ]
    return kept + [{"name": h.name, "value": h.value} for h in chosen.values()]
