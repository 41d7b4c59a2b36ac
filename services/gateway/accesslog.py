"""One log line per request, for operators: `observed`, the gateway's outermost middleware.

    POST /jobs 202 3.2 ms
      method, route (the pattern, never the raw path), status, duration_ms, tenant,
      job_id / batch_id (the one the request addressed or created), trace_id, span_id

The request runs within its trace: a server span continuing the client's `traceparent`
when traces are exported, else just the ids of its log lines (`tracing.span`), so every
line a request causes carries the same `trace_id` as its access line. Probes and scrapes
(`QUIET_ROUTES`) are logged at DEBUG: a kubelet asks every few seconds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from services.core.runtime import logs, tracing
from services.gateway.auth import CALLER_KEY
from services.gateway.headers import text_headers

log = logging.getLogger("services.gateway.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})
"""Routes whose lines are DEBUG: probes and scrapes, not clients."""

UNMATCHED = "(unmatched)"
"""The route of a request no route took (its raw path is the client's, and unbounded)."""

CLIENT_GONE = 499
"""The status logged when the client went away before the answer (nginx's convention)."""

CREATED = re.compile(r"^/(jobs|batches)/([^/?#]+)$")
"""A `Location` naming the job or batch a request created."""


def route_of(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else UNMATCHED


def addressed(request: web.Request, response: web.StreamResponse | None) -> dict[str, str]:
    """The job or batch the request named in its path, or created (its `Location`)."""
    found = {
        key: request.match_info[key] for key in ("job_id", "batch_id") if key in request.match_info
    }
    location = CREATED.match(response.headers.get("Location", "")) if response else None
    if location is not None:
        found.setdefault("job_id" if location[1] == "jobs" else "batch_id", location[2])
    return found


@web.middleware
async def observed(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Run the request within its trace, then log its line (whatever became of it)."""
    route = route_of(request)
    carrier = text_headers(request.headers)  # outside `errors_as_json`: nothing here may raise
    started = time.perf_counter()
    name = f"{request.method} {route}"
    with tracing.span(name, carrier, tracing.SERVER, **{"http.method": request.method}):
        response: web.StreamResponse | None = None
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:  # a redirect: `errors_as_json` answers the rest
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = CLIENT_GONE
            raise
        finally:
            _log(request, route, status, time.perf_counter() - started, response)


def _log(
    request: web.Request,
    route: str,
    status: int,
    seconds: float,
    response: web.StreamResponse | None,
) -> None:
    caller = request.get(CALLER_KEY)
    level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
    duration_ms = round(seconds * 1000, 1)
    log.log(
        level,
        "%s %s %d %.1f ms",
        request.method, route, status, duration_ms,
        extra=logs.fields(
            method=request.method,
            route=route,
            status=status,
            duration_ms=duration_ms,
            tenant=caller.tenant if caller is not None else None,
            **addressed(request, response),
        ),
    )  # fmt: skip
