"""A Gotenberg-compatible door on Pressroom: `/forms/*`, `/health` and `/version` as
Gotenberg 8 and 9 clients call them, each form one durable Pressroom job.

`forms` reads a form and its fields in Gotenberg's units; `chromium` maps the Chromium
fields onto Pressroom's job request; `replies` answers as Gotenberg does; `routes` holds
the handlers. docs/gotenberg.md lists every route and field.
"""

from services.gateway.gotenberg.routes import FORM_ROUTE, add_routes

__all__ = ["FORM_ROUTE", "add_routes"]
