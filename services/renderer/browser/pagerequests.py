"""What a job asks its page's requests to carry: its user agent, its cookies and its extra
headers (`core/log/pagesecrets`), set on the job's own tab before anything loads.

The tab lives alone in a browser context that is thrown away after its one job
(`Tab`), so cookies set there (`Network.setCookies` on the tab's session: its context's
cookie store) reach no other job. Headers are added by the request filter
(`RequestFilter.answer`, `pagesecrets.with_headers`) to each request it lets through
whose URL a header's scope matches: never to a request the egress policy refuses, never
to the job's own files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from services.core.log.pagesecrets import Cookie, PageSecrets
from services.core.model.errors import SourceError
from services.core.model.options import host_is_ignored, status_matches
from services.core.model.pageoptions import PageOptions
from services.core.objectstore.diagnosis import PageError, RequestLine
from services.renderer.browser.tab import Tab


async def apply(tab: Tab, options: PageOptions, secrets: PageSecrets | None) -> None:
    """Set `options.user_agent` and `secrets` on `tab`, a tab of this job alone."""
    if options.user_agent is not None:
        await tab.send("Network.setUserAgentOverride", {"userAgent": options.user_agent})
    if secrets is None:
        return
    if secrets.cookies:
        await tab.send("Network.setCookies", {"cookies": [_cdp_cookie(c) for c in secrets.cookies]})
    tab.gate.headers = tuple(secrets.headers)


def _cdp_cookie(cookie: Cookie) -> dict[str, Any]:
    made: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value,
        "domain": cookie.domain,
        "path": cookie.path or "/",
        "secure": cookie.secure,
        "httpOnly": cookie.http_only,
    }
    if cookie.same_site is not None:
        made["sameSite"] = cookie.same_site
    return made


def check_page_errors(errors: Sequence[PageError]) -> None:
    """`SourceError` with the first uncaught exception of the page, if it threw any (the
    job asked to fail then: `options.fail_on_page_errors`)."""
    if not errors:
        return
    first = errors[0]
    where = f" at {first.url}:{first.line}" if first.url else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise SourceError(
        f"the page threw an uncaught exception{where}: {first.text.splitlines()[0]}{more}"
        " (fail_on_page_errors)"
    )


def check_resource_status(
    resources: Sequence[RequestLine], listed: Sequence[int], ignored: Sequence[str] = ()
) -> None:
    """`SourceError` naming the first of the page's `resources` (its requests but its
    document) answered with a status in `listed` (`options.fail_on_resource_status`,
    `X99` a whole class), if any was; the hosts `ignored` and their subdomains aside."""
    hits = [
        r
        for r in resources
        if r.status is not None
        and status_matches(r.status, listed)
        and not host_is_ignored((urlsplit(r.url).hostname or "").lower(), ignored)
    ]
    if not hits:
        return
    first = hits[0]
    more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
    raise SourceError(
        f"a resource of the page answered HTTP {first.status}: {first.url}{more}"
        " (fail_on_resource_status)"
    )
