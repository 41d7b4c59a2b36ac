"""What a page may fetch: the renderer's egress policy, one verdict per request.

Templates and `url` sources are hostile until proven otherwise, so every request Chromium
pauses (CDP `Fetch.requestPaused`, Request stage) is judged by `Egress.decide`:

- `data:`, `blob:` and `about:` are allowed: they need no network.
- `http`, `https`, `ws` and `wss` are allowed only when every address the host stands for
  is public per the one address policy, `services.core.sandbox.netpolicy.is_forbidden` (the
  gateway and the notifier use it too: private, loopback, link-local, CGNAT, multicast,
  reserved, unspecified, and IPv6 forms that embed such an IPv4 address). Literal hosts
  are read the way a browser reads them (`netpolicy.literal_address`), so
  `http://2130706433/`, `http://0x7f.1/` and `http://017700000001/` are 127.0.0.1.
  `localhost` and `*.localhost` are loopback without asking DNS, as in Chromium. Other
  names are resolved (`netpolicy.lookup`) within `timeout` seconds and
  the answer is kept `ttl` seconds; a name whose answers mix public and forbidden
  addresses is refused (a DNS rebinding pattern), and so is one that does not resolve.
- Every other scheme (`file`, `ftp`, `chrome`, `chrome-extension`, `view-source`,
  `javascript`, ...) is refused.
- A job that carries files is loaded at a made-up origin (`jobfiles.ORIGIN`) whose
  requests are answered from the job's files and never reach this policy or a network.
- `allow_private` (PRESSROOM_ALLOW_PRIVATE_NETWORKS) lets network schemes reach any
  address, without a DNS lookup; it never allows `file:` or any other local scheme.

Redirects need nothing extra: at the Request stage each hop of a redirect chain is paused
again as a new request (its `redirectedRequestId` names the previous hop), so each hop is
judged like a first request.

Outcome of a refusal (the rule the renderer follows):

- The request is failed with `BlockedByClient` and the render goes on without the
  resource, as with an ad blocker. The refusal is kept in the render's `RefusedLog`
  (capped), logged at INFO, and reported with the job's result facts.
- Except for the document of a `url` job: when the navigation to the job's URL (the URL
  itself or any redirect hop) is refused, the job fails instead of printing an error page.
  `RefusedLog.navigation` is that refusal; `Refusal.transient` says which error to raise:
  a DNS timeout or temporary resolver failure is a transient error (retry), anything else
  a deterministic error carrying `Refusal.reason` (fail at once).

Coverage: `Fetch.enable` on a tab's session pauses the requests of its main frame, its
same-process iframes and its dedicated workers. Out-of-process (cross-site) iframes and
service workers are targets of their own: the tab must auto-attach to them
(`Target.setAutoAttach`, `waitForDebuggerOnStart`) and enable `Fetch` on each, with the
same `RequestFilter` (tests/integration/test_egress.py proves both, with that wiring).

Behind the filter stands the egress proxy (`proxy.py`): the filter sits in front of
Chromium's network stack, not inside it, so it never sees WebSockets (`Fetch` does not
pause them), popups and other windows, the targets of other workers, speculative
prefetch or preconnect, and after its verdict Chromium would resolve the name again (DNS
rebinding). Every connection Chromium makes goes through the proxy, which asks this same
policy (and DNS cache) and connects only to the addresses it judged. Left outside both:

- WebRTC's UDP (STUN, TURN, peers) would pass no proxy: the profile's WebRTC policy is
  `disable_non_proxied_udp` (`browser/launch.py`), so WebRTC sends no UDP at all and its
  TCP goes through the proxy (test_hostile_pages has a UDP canary). A network
  policy around the renderer (docs/sandbox.md) is the wall for anything else.
- Lookups run in the loop's default executor: a page asking for many names that time
  out can keep its threads busy for the other renders of the renderer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.core.log.pagesecrets import Header, with_headers
from services.core.sandbox.netpolicy import (
    PRIVATE_HINT,
    is_forbidden,
    is_localhost,
    literal_address,
    lookup,
)
from services.renderer.evidence import Evidence, Refusal, clip
from services.renderer.jobfiles import DOCUMENT, JobFiles

log = logging.getLogger(__name__)

Resolve = Callable[[str], Awaitable[Sequence[str]]]
"""Host name → its addresses; raises `OSError` (`socket.gaierror`) when it does not resolve."""

LOCAL_SCHEMES = frozenset({"data", "blob", "about"})
"""Schemes served by the browser itself, without the network."""

NETWORK_SCHEMES = frozenset({"http", "https", "ws", "wss"})
"""Schemes that reach a host, allowed only to public addresses."""

DNS_TIMEOUT = 3.0
"""Seconds a lookup may take; the whole render has `PRESSROOM_RENDER_TIMEOUT` (30 s)."""

DNS_TTL = 5.0
"""Seconds an answer is reused: long enough for a page's burst of requests to one host,
short enough to leave a rebinding attacker little time to prepare a second answer."""

DNS_CACHE_SIZE = 1024
"""Hosts remembered at most; a page asking for more evicts the oldest."""

_EAI_AGAIN = getattr(socket, "EAI_AGAIN", -3)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a page may fetch a URL, and why (`reason` is meant for people).

    `transient` marks a refusal that a later attempt might not get (DNS timed out or
    failed temporarily); it is always False for an allowed URL.
    """

    allowed: bool
    reason: str
    transient: bool = False


def _allow(reason: str) -> Verdict:
    return Verdict(allowed=True, reason=reason)


def _deny(reason: str, *, transient: bool = False) -> Verdict:
    return Verdict(allowed=False, reason=reason, transient=transient)


@dataclass(frozen=True, slots=True)
class _Answer:
    """One lookup's outcome: the addresses, or why there are none."""

    addresses: tuple[str, ...] = ()
    error: str = ""
    transient: bool = False


class Egress:
    """The egress policy of one renderer (share it between tabs: it caches DNS answers).

    `resolve` replaces the system resolver (tests inject fakes); `clock` is monotonic time.
    Call `aclose()` when done: it cancels lookups still under way.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: Resolve = lookup,
        timeout: float = DNS_TIMEOUT,
        ttl: float = DNS_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allow_private = allow_private
        self._resolve = resolve
        self._timeout = timeout
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, _Answer]] = {}
        self._lookups: dict[str, asyncio.Task[_Answer]] = {}

    async def decide(self, url: str) -> Verdict:
        """Whether a page may fetch `url` (see the module docstring); never raises."""
        try:
            parts = urllib.parse.urlsplit(url)
            _ = parts.port  # ValueError when out of range or not a number
        except ValueError:
            return _deny("malformed URL")
        scheme = parts.scheme.lower()
        if scheme in LOCAL_SCHEMES:
            return _allow(f"{scheme}: needs no network")
        if scheme not in NETWORK_SCHEMES:
            return _deny(_scheme_reason(scheme))
        if not parts.hostname:
            return _deny("URL has no host")
        verdict, _ = await self.destination(parts.hostname)
        return verdict

    async def destination(self, host: str) -> tuple[Verdict, tuple[str, ...]]:
        """Whether a page may reach `host`, and the addresses to connect to when it may.

        The addresses are the very ones judged (the egress proxy connects to them and to
        nothing else, so a second DNS answer cannot slip past the policy); an empty tuple
        with an allowed verdict means "resolve it yourself": only with `allow_private`,
        where any address is allowed. Never raises.
        """
        try:
            literal = literal_address(host)
        except ValueError as exc:
            return _deny(str(exc)), ()
        if literal is not None:
            addresses: tuple[str, ...] = (literal,)
        elif self.allow_private:
            return _allow("private networks are allowed"), ()
        elif is_localhost(host):
            addresses = ("127.0.0.1", "::1")
        else:
            answer = await self._lookup(host)
            if answer.error:
                return _deny(f"host {host!r} {answer.error}", transient=answer.transient), ()
            addresses = answer.addresses
        if self.allow_private:
            return _allow("private networks are allowed"), addresses
        verdict = _judge_addresses(host, addresses)
        return verdict, addresses if verdict.allowed else ()

    async def aclose(self) -> None:
        """Cancel DNS lookups still under way and forget every cached answer."""
        lookups = list(self._lookups.values())
        for pending in lookups:
            pending.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)
        self._cache.clear()

    async def _lookup(self, host: str) -> _Answer:
        """The cached answer for `host`, or a new one; concurrent askers share a lookup."""
        cached = self._cache.get(host)
        if cached is not None and cached[0] > self._clock():
            return cached[1]
        pending = self._lookups.get(host)
        if pending is None:
            pending = asyncio.ensure_future(self._resolve_now(host))
            self._lookups[host] = pending
            pending.add_done_callback(lambda _: self._lookups.pop(host, None))
        # Shielded: a request given up on (tab closed) must not cancel its neighbours' lookup.
        return await asyncio.shield(pending)

    async def _resolve_now(self, host: str) -> _Answer:
        answer = await self._ask(host)
        if not answer.transient:  # a timeout may pass; don't repeat it for `ttl` seconds
            self._remember(host, answer)
        return answer

    async def _ask(self, host: str) -> _Answer:
        try:
            addresses = await asyncio.wait_for(self._resolve(host), self._timeout)
        except TimeoutError:
            return _Answer(error=f"did not resolve within {self._timeout:g} s", transient=True)
        except (OSError, UnicodeError, ValueError) as exc:
            transient = isinstance(exc, socket.gaierror) and exc.errno == _EAI_AGAIN
            return _Answer(error=f"does not resolve: {exc}", transient=transient)
        if not addresses:
            return _Answer(error="resolves to no address")
        return _Answer(addresses=tuple(addresses))

    def _remember(self, host: str, answer: _Answer) -> None:
        if len(self._cache) >= DNS_CACHE_SIZE:
            del self._cache[next(iter(self._cache))]  # the oldest: dicts keep insertion order
        self._cache.pop(host, None)
        self._cache[host] = (self._clock() + self._ttl, answer)


def _judge_addresses(host: str, addresses: Sequence[str]) -> Verdict:
    """Allowed when every one of `addresses` is public; names the refused ones otherwise."""
    try:
        refused = sorted({a for a in addresses if is_forbidden(a)})
    except ValueError:
        return _deny(f"host {host!r} resolves to something that is not an IP address")
    # Refusals name the host, never its addresses: the tenant sees them, and the
    # addresses of internal names are not its business.
    if not refused:
        return _allow("public address")
    if len(refused) < len(set(addresses)):
        return _deny(
            f"host {host!r} resolves to both public and forbidden addresses, as DNS rebinding does"
        )
    return _deny(
        f"host {host!r} is a private, loopback, link-local or reserved address; {PRIVATE_HINT}"
    )


def refused_scheme(url: str) -> str | None:
    """Why the policy refuses `url` for its scheme alone (None: it may not): the part of
    `Egress.decide` that needs no lookup, for requests Chromium blocked before asking."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in LOCAL_SCHEMES or scheme in NETWORK_SCHEMES:
        return None
    return _scheme_reason(scheme)


def _scheme_reason(scheme: str) -> str:
    return f"scheme {scheme or '(none)'}: is not allowed"


class RequestFilter:
    """The filter of one job's tab: judges its paused requests and records refusals in
    the job's `evidence`.

    `main_frame_id` is the tab's main frame id (its target id in Chromium): a `Document`
    request of that frame is a navigation. The same filter serves the sessions of the
    tab's out-of-process iframes and workers; their frames are never the main frame. A
    tab serves one job, so the filter and its evidence are that job's from the start: a
    verdict that comes after an await is recorded where the request was made, and once
    the render is over (the evidence sealed) a request is failed unjudged and counted.
    """

    def __init__(self, egress: Egress, main_frame_id: str, evidence: Evidence) -> None:
        self.egress = egress
        self.main_frame_id = main_frame_id
        self.evidence = evidence
        self.files: JobFiles | None = None  # the job's, set when the job takes the tab
        self.headers: tuple[Header, ...] = ()  # the job's extra headers (`pagerequests`)

    async def answer(self, event: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The CDP command (method, params) that settles a `Fetch.requestPaused` event:
        `Fetch.continueRequest` (with the job's extra headers in scope of its URL), or
        `Fetch.failRequest` with `BlockedByClient` after the
        refusal is recorded in the job's evidence and logged."""
        request_id = event["requestId"]
        url = str(event["request"]["url"])
        failed = {"requestId": request_id, "errorReason": "BlockedByClient"}
        if not self.evidence.admits("request"):  # the job is over: nothing more goes out
            return "Fetch.failRequest", failed
        if self.files is not None and url.startswith(DOCUMENT):  # never the network's
            return await self.files.answer(event, self.evidence)
        verdict = await self.egress.decide(url)
        if verdict.allowed:
            go: dict[str, Any] = {"requestId": request_id}
            headers = with_headers(url, event["request"].get("headers", {}), self.headers)
            if headers is not None:
                go["headers"] = headers
            return "Fetch.continueRequest", go
        navigation = (
            event.get("resourceType") == "Document" and event.get("frameId") == self.main_frame_id
        )
        self.evidence.refuse(
            Refusal(clip(url), verdict.reason, navigation, verdict.transient), "filter"
        )
        log.info("refused a page request to %s: %s", clip(url), verdict.reason)
        return "Fetch.failRequest", failed
