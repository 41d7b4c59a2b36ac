"""The gateway's aiohttp application: resources, error handling, routes.

`init_app(settings)` is what `pressroom gateway` runs and what tests start on a real port.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from services.core import bus, db, metrics
from services.core.errors import PayloadTooLarge, PressroomError
from services.core.settings import Settings
from services.core.storage import open_storage
from services.gateway import jobs, templates
from services.gateway.keys import JS, NATS, POOL, SETTINGS, STORAGE

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, kind: str, message: str, field: str | None = None) -> web.Response:
    error = {"type": kind, "message": message}
    if field is not None:
        error["field"] = field
    if status >= 400:
        metrics.REQUESTS_REJECTED.labels(str(status)).inc()
    return web.json_response({"error": error}, status=status)


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as JSON naming its cause; no stack trace reaches a client."""
    try:
        return await handler(request)
    except PressroomError as exc:
        return error_response(exc.http_status, exc.kind, exc.message, exc.field)
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[SETTINGS].max_body_bytes
        exc2 = PayloadTooLarge(f"body is larger than the limit of {limit} bytes", field="body")
        return error_response(413, exc2.kind, exc2.message, exc2.field)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, "http", exc.reason)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal error; see the gateway log")


async def _nats_ctx(app: web.Application) -> AsyncIterator[None]:
    async with bus.open_bus(app[SETTINGS], name="gateway") as (nc, js):
        app[NATS], app[JS] = nc, js
        yield


async def _db_ctx(app: web.Application) -> AsyncIterator[None]:
    async with db.open_pool(app[SETTINGS], size=8) as pool:
        app[POOL] = pool
        yield


async def _storage_ctx(app: web.Application) -> AsyncIterator[None]:
    async with open_storage(app[SETTINGS]) as storage:
        app[STORAGE] = storage
        yield


def init_app(settings: Settings) -> web.Application:
    app = web.Application(middlewares=[errors_as_json], client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app.cleanup_ctx.extend([_nats_ctx, _db_ctx, _storage_ctx])
    jobs.add_routes(app)
    templates.add_routes(app)
    app.router.add_get("/metrics", metrics.handle_metrics)
    return app
