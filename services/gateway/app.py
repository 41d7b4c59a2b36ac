"""The gateway's aiohttp application: resources, error handling, routes.

`init_app(settings)` is what `pressroom gateway` runs and what tests start on a real port.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from services.core.database import db, sealed
from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.model.errors import PayloadTooLarge, PressroomError, RequestTimeout
from services.core.model.errortypes import ErrorType
from services.core.objectstore.storage import open_storage
from services.core.runtime import metrics
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.gateway import (
    accesslog,
    account,
    admin,
    answers,
    assets,
    batches,
    diagnostics,
    downloads,
    gotenberg,
    idempotency,
    joblist,
    jobs,
    keymirror,
    keynews,
    logroom,
    openapi,
    pdfreports,
    streams,
    templates,
    uploads,
    validation,
)
from services.gateway.auth import AUTH_SETTINGS, CALLER_KEY, DIRECTORY, Directory
from services.gateway.compiles import Compiler, FairJail, Share
from services.gateway.console import add_routes as add_console_routes
from services.gateway.gotenberg.door import door as gotenberg_door
from services.gateway.keys import (
    COMPILER,
    IDEMPOTENCY,
    JS,
    KEY_MIRROR,
    LOG_ROOM,
    NATS,
    PG_WATCH,
    POOL,
    SETTINGS,
    SINGLES,
    STORAGE,
    VALIDATOR,
)
from services.gateway.limits import LIMITS, Limits
from services.pdftools import worker as pdfworker

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


POOL_SIZE = 8
"""PostgreSQL connections of a gateway unless `PRESSROOM_DATABASE_POOL_MAX` says."""


def error_response(
    status: int,
    kind: ErrorType,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    error = answers.ErrorDetail(type=kind, message=message)
    if field is not None:
        error.field = field
    if status >= 400:
        metrics.REQUESTS_REJECTED.labels(str(status)).inc()
    return answers.respond(answers.ErrorBody(error=error), status, headers)


async def _read_body(request: web.Request) -> None:
    """Read the body now, within `PRESSROOM_BODY_TIMEOUT` (aiohttp keeps it for the
    handler's own `read()`); `RequestTimeout` for a client that sends it too slowly."""
    seconds = request.app[SETTINGS].body_timeout
    try:
        async with asyncio.timeout(seconds):
            await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g} s", field="body"
        ) from None


def _body_limit(request: web.Request) -> tuple[int, str]:
    """The largest body the request's route takes, and the variable that sets it: a
    batch's item list may be far larger than any other request."""
    settings = request.app[SETTINGS]
    if request.match_info.route.name == batches.SUBMIT_ROUTE:
        return settings.max_batch_bytes, "PRESSROOM_MAX_BATCH_BYTES"
    if request.match_info.route.name == validation.ROUTE:
        return settings.validate_max_bytes, "PRESSROOM_VALIDATE_MAX_BYTES"
    return settings.max_body_bytes, "PRESSROOM_MAX_BODY_BYTES"


@web.middleware
async def route_body_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Let a route with its own body limit (`_body_limit`) read up to it; the app's
    `client_max_size` is every other route's."""
    limit, _ = _body_limit(request)
    if limit == request.client_max_size:
        return await handler(request)
    inner = request.clone(client_max_size=limit)
    try:
        return await handler(inner)
    finally:  # the answer is prepared with `request`: it needs the caller for its headers
        if CALLER_KEY in inner:
            request[CALLER_KEY] = inner[CALLER_KEY]


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as JSON naming its cause; no stack trace reaches a client."""
    try:
        if request.body_exists and not uploads.is_multipart(request):
            await _read_body(request)  # a multipart body is read as it comes (`uploads`)
        return await handler(request)
    except PressroomError as exc:
        return error_response(exc.http_status, exc.kind, exc.message, exc.field, exc.headers())
    except web.HTTPRequestEntityTooLarge:
        limit, variable = _body_limit(request)
        message = f"body is larger than the limit of {limit} bytes ({variable})"
        exc2 = PayloadTooLarge(message, field="body")
        return error_response(413, exc2.kind, exc2.message, exc2.field)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = _router_message(request, exc)
        return error_response(exc.status, ErrorType.HTTP, message, headers=_kept(exc))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, ErrorType.INTERNAL, "internal error; see the gateway log")


KEPT_HEADERS = ("Allow",)
"""Headers of aiohttp's own error answers that a client needs: a 405 names the methods
the route takes (RFC 9110)."""


def _kept(exc: web.HTTPException) -> dict[str, str]:
    return {name: exc.headers[name] for name in KEPT_HEADERS if name in exc.headers}


def _router_message(request: web.Request, exc: web.HTTPException) -> str:
    """What the router's own 404 and 405 say: the route, and the methods it takes."""
    if exc.status == 404:
        return f"no route {request.path!r}"
    if exc.status == 405 and "Allow" in exc.headers:
        allowed = ", ".join(m.strip() for m in exc.headers["Allow"].split(","))
        return f"{request.method} is not allowed here: use {allowed}"
    return exc.reason


async def _nats_ctx(app: web.Application) -> AsyncIterator[None]:
    async with bus.open_bus(app[SETTINGS], name="gateway", role=Role.GATEWAY) as (nc, js):
        app[NATS], app[JS] = nc, js
        app[IDEMPOTENCY] = await idempotency.open_bucket(js, app[SETTINGS])
        async with logroom.watching(app[LOG_ROOM], js):
            yield


async def _db_ctx(app: web.Application) -> AsyncIterator[None]:
    """The pool, and the watch that makes it refuse at once while PostgreSQL is down. A
    gateway starts without PostgreSQL too: what needs it is `503` until it answers, and
    the keyring is checked then (`sealed.check_keyring_later`)."""
    settings = app[SETTINGS]
    keyring = sealed.check_keyring_later(settings.server_keys())
    async with (
        db.open_pool(settings, size=POOL_SIZE, lazy=True) as pool,
        db.watched(pool, settings, keyring) as watch,
    ):
        if pool.migrated:
            await sealed.check_keyring(pool, settings.server_keys())
        else:
            log.error("PostgreSQL cannot be reached: starting without it (%s)", watch.error)
        app[POOL], app[PG_WATCH] = pool, watch
        yield


async def _compiler_ctx(app: web.Application) -> AsyncIterator[None]:
    """The worker processes that compile stored templates, off the event loop, shared by
    every tenant within its share (`compiles.py`)."""
    settings = app[SETTINGS]
    limits = TemplateLimits.of(settings)
    async with Jail(settings.template_workers, limits, what="compiling the template") as jail:
        app[COMPILER] = Compiler(jail, settings)
        yield


async def _validator_ctx(app: web.Application) -> AsyncIterator[None]:
    """The worker processes that read PDFs for `POST /validate`, shared fairly
    (`compiles.FairJail`), with the finishing workers' memory and time limits."""
    settings = app[SETTINGS]
    share = Share.of_validations(settings)
    async with pdfworker.jail_of(settings, share.workers) as jail:
        app[VALIDATOR] = FairJail(jail, share)
        yield


async def _storage_ctx(app: web.Application) -> AsyncIterator[None]:
    async with open_storage(app[SETTINGS]) as storage:
        app[STORAGE] = storage
        yield


async def _auth_ctx(app: web.Application) -> AsyncIterator[None]:
    """Load every key and tenant before the first request (from the bus copy while
    PostgreSQL is down); keep them current after (`keynews`)."""
    settings = app[SETTINGS]
    if not settings.auth_enabled:
        log.warning(
            "PRESSROOM_AUTH=disabled: no API keys are checked and every request acts for "
            "the one tenant 'default'; run this only on a trusted network"
        )
    app[KEY_MIRROR] = keymirror.Mirror(await keymirror.open_bucket(app[JS], settings))
    await keynews.first_load(app)
    async with keynews.kept_current(app):
        yield


async def _rate_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`RateLimit-*` headers on every answer to a known tenant."""
    caller = request.get(CALLER_KEY)
    if caller is not None:
        response.headers.update(request.app[LIMITS].bucket(caller.tenant).headers())


def init_app(settings: Settings) -> web.Application:
    app = web.Application(
        middlewares=[accesslog.observed, route_body_limit, errors_as_json, gotenberg_door],
        client_max_size=settings.max_body_bytes,
    )
    settings.server_keys()  # fail at start, naming the variable, if it is not set
    app[SETTINGS] = app[AUTH_SETTINGS] = settings
    app[DIRECTORY] = Directory()
    app[LOG_ROOM] = logroom.LogRoom()
    app[SINGLES] = bus.SinglesLanes(settings)
    app[LIMITS] = Limits(settings, app[DIRECTORY])
    app.cleanup_ctx.extend([_nats_ctx, _db_ctx, _auth_ctx, _storage_ctx, _compiler_ctx])
    app.cleanup_ctx.append(_validator_ctx)
    app.on_response_prepare.append(_rate_headers)
    jobs.add_routes(app)
    pdfreports.add_routes(app)
    validation.add_routes(app)
    downloads.add_routes(app)
    diagnostics.add_routes(app)
    joblist.add_routes(app)
    streams.add_routes(app)
    batches.add_routes(app)
    templates.add_routes(app)
    assets.add_routes(app)
    account.add_routes(app)
    admin.add_routes(app)
    openapi.add_routes(app)
    gotenberg.add_routes(app)
    add_console_routes(app)
    return app
