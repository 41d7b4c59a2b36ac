"""`page_secrets` as `POST /jobs` takes it: the strict forms of `core/log/pagesecrets`'
structs (unknown fields are an error naming them), as `requests.py` has for `options`."""

from __future__ import annotations

import msgspec

from services.core.log import pagesecrets


class CookieRequest(pagesecrets.Cookie, forbid_unknown_fields=True):
    """A cookie set in the job's own browser context before the page loads: `domain`
    needed; it goes where cookies go (its domain and path)."""


class HeaderRequest(pagesecrets.Header, forbid_unknown_fields=True):
    """A header added to the page's requests whose URL `scope` (an RE2 regular expression,
    searched in the URL) matches; to every request without one."""


class PageSecretsRequest(pagesecrets.PageSecrets, forbid_unknown_fields=True):
    """Cookies and extra headers for the page: sealed with the server key on the log,
    never shown."""

    cookies: list[CookieRequest] = msgspec.field(default_factory=list)  # type: ignore[assignment]
    """Set in the job's browser context before the page loads (at most 50)."""
    headers: list[HeaderRequest] = msgspec.field(default_factory=list)  # type: ignore[assignment]
    """Added to the page's requests within their scope (at most 50)."""
