"""One job's evidence: what its page did, bound to that job from the moment it happens.

Everything recorded about a page — its requests and how they ended, its console lines
and uncaught errors, the requests the egress policy refused (in the CDP filter or the
proxy, or that Chromium blocked before asking), why a checked address did not answer —
goes into one `Evidence`, and a job's result facts and diagnosis are read from it alone.
What keeps one job's evidence out of another's:

- A job renders on a tab made for it alone: a browser context, a page target and a proxy
  door of its own (`browser/process.py`), never used for another job. The tab's
  `Evidence` is made first, and each source of events is bound to it once, as the source
  is made: the door (a connection through it is evidence of this job), the request filter
  of the tab and of every target the tab attaches (out-of-process frames, workers), the
  handlers of the tab's session. An event is never matched to a job later by asking which
  job a tab serves now: each source has one record, fixed before it can say anything.
- When the render ends (its result and diagnosis taken), its evidence is sealed. What
  arrives afterwards — a timer's late request, a connection still in flight through the
  door, a refusal decided after a DNS lookup that outlived the job — is dropped and
  counted (`pressroom_late_evidence_total`), never added to a record that was read.
- Only then is the context closed with every target in it, and the door with every
  connection, before the slot's next context is made (`BrowserPool`).

Recording is a small object per request and per console line, capped
(`services.core.objectstore.diagnosis`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from services.core.model.pageoptions import WaitFor
from services.core.objectstore.diagnosis import (
    MAX_CONSOLE,
    MAX_ERRORS,
    MAX_REQUESTS,
    ConsoleLine,
    PageError,
    RequestLine,
    clipped,
)
from services.core.runtime import metrics

REFUSALS_KEPT = 50
"""Refusals a `RefusedLog` keeps per render; the rest are only counted."""

URL_CHARS = 300
"""Characters of a URL kept in a refusal or a log line (a `data:` URL can be megabytes)."""


def clip(url: str) -> str:
    """`url` cut to `URL_CHARS` characters, for refusals and log lines."""
    return url if len(url) <= URL_CHARS else url[:URL_CHARS] + "…"


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """A request the policy refused: its URL (clipped), why, and whether it was the
    document of the tab's main frame (a navigation) and only transiently refused."""

    url: str
    reason: str
    navigation: bool = False
    transient: bool = False

    def to_dict(self) -> dict[str, str]:
        """The refusal as result facts show it."""
        return {"url": self.url, "reason": self.reason}


class RefusedLog:
    """The refusals of one render, in order; keeps the first `cap`, counts the rest."""

    def __init__(self, cap: int = REFUSALS_KEPT) -> None:
        self.cap = cap
        self.dropped = 0
        self._refusals: list[Refusal] = []
        self._navigation: Refusal | None = None

    def add(self, refusal: Refusal) -> None:
        """Record `refusal` (the first main-frame navigation refused is always kept)."""
        if refusal.navigation and self._navigation is None:
            self._navigation = refusal
        if len(self._refusals) < self.cap:
            self._refusals.append(refusal)
        else:
            self.dropped += 1

    @property
    def refusals(self) -> tuple[Refusal, ...]:
        return tuple(self._refusals)

    @property
    def navigation(self) -> Refusal | None:
        """The first refused document request of the main frame, if any: for a `url` job
        whose navigation failed, the reason the job fails (`egress` module docstring)."""
        return self._navigation

    def facts(self) -> list[dict[str, str]]:
        """The kept refusals as result facts: `[{"url", "reason"}, ...]`."""
        return [refusal.to_dict() for refusal in self._refusals]

    def __len__(self) -> int:
        """Every refusal recorded, dropped ones included."""
        return len(self._refusals) + self.dropped


@dataclasses.dataclass(slots=True)
class _Request:
    line: RequestLine
    started: float  # CDP's monotonic timestamp, seconds


class PageLog:
    """The console lines, uncaught errors and requests of one render, and its pending
    `wait_for` (the job's own: what a diagnosis names if the wait never ends)."""

    def __init__(self) -> None:
        self.since_ms = time.time() * 1000  # console entries replayed from before are not ours
        self.console: list[ConsoleLine] = []
        self.errors: list[PageError] = []
        self.requests: dict[str, _Request] = {}
        self.documents: set[str] = set()  # request ids of the main frame's documents
        self.redirects: list[RequestLine] = []
        self.pending: WaitFor | None = None
        self.dropped = 0

    def sent(self, params: dict[str, Any]) -> None:
        request_id = str(params.get("requestId"))
        earlier = self.requests.get(request_id)
        if earlier is not None and "redirectResponse" in params:
            earlier.line.status = int(params["redirectResponse"].get("status", 0))
            self._close(earlier, params)
            self.redirects.append(earlier.line)
        elif len(self.requests) >= MAX_REQUESTS:
            self.dropped += 1
            return
        request = params.get("request", {})
        line = RequestLine(
            url=clip(str(request.get("url", ""))),
            method=str(request.get("method", "GET")),
            type=params.get("type"),
        )
        self.requests[request_id] = _Request(line, float(params.get("timestamp", 0.0)))

    def answered(self, params: dict[str, Any], document: bool = False) -> None:
        """Record a response; `document`: that of the main frame's document."""
        request_id = str(params.get("requestId"))
        if document:
            self.documents.add(request_id)
        if (request := self.requests.get(request_id)) is not None:
            request.line.status = int(params.get("response", {}).get("status", 0))

    def resources(self) -> list[RequestLine]:
        """The requests recorded, but for the main frame's document: the page's resources
        (stylesheets, images, fonts, scripts' fetches, frames' documents)."""
        return [r.line for i, r in self.requests.items() if i not in self.documents]

    def ended(self, params: dict[str, Any]) -> RequestLine | None:
        """Close the request `params` ends; its line if it failed (else None)."""
        request = self.requests.get(str(params.get("requestId")))
        if request is None:
            return None
        self._close(request, params)
        if "errorText" not in params:
            return None
        # Chromium blocks some requests itself before they are made (a `file:` URL from
        # a page that is not a file), with an empty error text and only a reason.
        blocked = params.get("blockedReason")
        request.line.error = str(params["errorText"]) or (
            f"blocked by Chromium ({blocked})" if blocked else "failed"
        )
        return request.line

    @staticmethod
    def _close(request: _Request, params: dict[str, Any]) -> None:
        ended = float(params.get("timestamp", request.started))
        request.line.ms = max(0, round((ended - request.started) * 1000))

    def console_called(self, params: dict[str, Any]) -> None:
        if float(params.get("timestamp", self.since_ms)) < self.since_ms:
            return
        if len(self.console) >= MAX_CONSOLE:
            self.dropped += 1
            return
        text = " ".join(_argument_text(arg) for arg in params.get("args", []))
        url, line, column = _where(params.get("stackTrace"))
        level = str(params.get("type", "log"))
        self.console.append(
            ConsoleLine(level=level, text=clipped(text), url=url, line=line, column=column)
        )

    def exception_thrown(self, params: dict[str, Any]) -> None:
        if float(params.get("timestamp", self.since_ms)) < self.since_ms:
            return
        if len(self.errors) >= MAX_ERRORS:
            self.dropped += 1
            return
        details = params.get("exceptionDetails", {})
        exception = details.get("exception") or {}
        text = str(exception.get("description") or details.get("text") or "error")
        url, line, column = _where(details.get("stackTrace"))
        self.errors.append(
            PageError(
                text=clipped(text),
                url=details.get("url") or url,
                line=_one_based(details.get("lineNumber"), line),
                column=_one_based(details.get("columnNumber"), column),
            )
        )


def _argument_text(arg: dict[str, Any]) -> str:
    """A console argument as DevTools prints it, roughly: a primitive's value, else the
    object's description (`Error: boom\\n    at …`, `Object`, `Array(3)`)."""
    if "value" in arg:
        value = arg["value"]
        return value if isinstance(value, str) else repr(value)
    return str(arg.get("unserializableValue") or arg.get("description") or arg.get("type", ""))


def _where(stack: dict[str, Any] | None) -> tuple[str | None, int | None, int | None]:
    """The top frame of a stack trace: its URL and 1-based line and column."""
    frames = (stack or {}).get("callFrames") or []
    if not frames:
        return None, None, None
    top = frames[0]
    return (
        str(top.get("url") or "") or None,
        int(top.get("lineNumber", 0)) + 1,
        int(top.get("columnNumber", 0)) + 1,
    )


def _one_based(number: Any, fallback: int | None) -> int | None:
    return int(number) + 1 if isinstance(number, int) else fallback


class Evidence:
    """The record of one job's page: `page` (requests, console, errors), `refused`, and
    `unreachable` ("host:port" → why the egress proxy could not connect there).

    Written only through the methods below, each of which drops (and counts, by
    `source`) what comes once the record is `seal`ed. `job` names the job in logs.
    """

    def __init__(self, job: str = "") -> None:
        self.job = job
        self.page = PageLog()
        self.refused = RefusedLog()
        self.unreachable: dict[str, str] = {}
        self.sealed = False
        self.late = 0  # what came after the seal, dropped

    def seal(self) -> None:
        """The job's render is over: nothing more is recorded here."""
        self.sealed = True

    def admits(self, source: str) -> bool:
        """Whether something from `source` may still be recorded; counted when not."""
        if not self.sealed:
            return True
        self.late += 1
        metrics.LATE_EVIDENCE.labels(source).inc()
        return False

    def refuse(self, refusal: Refusal, source: str) -> None:
        """Record a refusal of the CDP filter (`filter`), the proxy (`proxy`), a window
        closed (`window`) or Chromium's own block (`request`)."""
        if self.admits(source):
            self.refused.add(refusal)

    def cannot_reach(self, authority: str, reason: str) -> None:
        if self.admits("proxy"):
            self.unreachable[authority] = reason

    def sent(self, params: dict[str, Any]) -> None:
        if self.admits("request"):
            self.page.sent(params)

    def answered(self, params: dict[str, Any], document: bool = False) -> None:
        if self.admits("request"):
            self.page.answered(params, document)

    def ended(self, params: dict[str, Any]) -> RequestLine | None:
        """Record the end of a request; its line if it failed."""
        return self.page.ended(params) if self.admits("request") else None

    def console_called(self, params: dict[str, Any]) -> None:
        if self.admits("console"):
            self.page.console_called(params)

    def exception_thrown(self, params: dict[str, Any]) -> None:
        if self.admits("console"):
            self.page.exception_thrown(params)
