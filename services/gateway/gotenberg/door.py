"""Which port serves the Gotenberg-compatible routes (`PRESSROOM_GOTENBERG_PORT`).

By default they are served on the API's port, beside it. With a port of their own the
gateway listens on both (`main.serve`), and this middleware keeps each port to its own
routes: the compatible ones (named `gotenberg.*`) only on their port, the API only on
its, so a firewall or an ingress can expose one without the other. A request for a
route of the other port is a `404`, as a route that does not exist.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from services.gateway.keys import SETTINGS

ROUTE_PREFIX = "gotenberg."
"""How the compatible routes are named (`routes.add_routes`)."""


def is_compatible(request: web.Request) -> bool:
    """Whether the request matched one of the compatible routes."""
    resource = request.match_info.route.resource
    name = resource.name if resource is not None else None
    return name is not None and name.startswith(ROUTE_PREFIX)


def arrived_on(request: web.Request) -> int | None:
    """The local port the request came in on (None once its connection is gone)."""
    transport = request.transport
    local = transport.get_extra_info("sockname") if transport is not None else None
    return int(local[1]) if isinstance(local, tuple) and len(local) >= 2 else None


@web.middleware
async def door(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    if settings.gotenberg_apart(settings.port):
        on_door = arrived_on(request) == settings.gotenberg_port
        if on_door != is_compatible(request):
            raise web.HTTPNotFound()
    return await handler(request)
