"""`GET /openapi.json`: the OpenAPI 3.1 document of every public route, and `GET /docs`,
a page that renders it.

The document is built from the application's router, so a route cannot be served without
being described (`UndocumentedRoute`); each route's entry in `contract.ROUTES` gives its
summary, parameters, statuses and the Structs of its body and answers, whose schemas
msgspec derives (`msgspec.json.schema_components`) from the classes the handlers use.
It is built once, on the first request, when the router is complete.

The page is one static HTML file with its script and style sheet (`apidocs/`): no CDN, no
network but this gateway, a strict Content-Security-Policy, every value of the document
set as text, never as markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import msgspec
from aiohttp import web

from services.core.model.errortypes import ErrorType
from services.gateway import answers, jobanswers, schemadocs, streamdocs
from services.gateway.auth import ADMIN_KEY, API_KEY, Guard, Handler, guard_of
from services.gateway.contract import ROUTES, TAGS
from services.gateway.keys import SETTINGS
from services.gateway.routedocs import Body, Media, Param, Route, public_path
from services.gateway.streamdocs import REF


@dataclass
class Built:
    """The document as JSON, once built (set at start, filled by the first request)."""

    json: bytes | None = None


DOCUMENT = web.AppKey("openapi_document", Built)
FOLDER = "apidocs"
"""The page's static files, inside this package."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
FILE_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "apidocs.js": "text/javascript; charset=utf-8",
    "apidocs.css": "text/css; charset=utf-8",
}

STATUS_TEXT = {
    400: "Invalid input: `error.field` names the body field, parameter or header",
    401: "No API key, or an unknown or revoked one",
    403: "The key lacks the route's scope (or is not an admin key)",
    404: "No such resource, or another tenant's",
    408: "The body did not arrive within `PRESSROOM_BODY_TIMEOUT`",
    409: "Not possible in the resource's current state",
    413: "The body is over its limit (or too large for one message on the log)",
    416: "The `Range` starts past the end of the file (`Content-Range: bytes */<size>`)",
    422: "The `Idempotency-Key` was used for another request",
    429: "Over the tenant's rate, quota, stream or template-compile limit; retry after "
    "`Retry-After` seconds",
    503: "NATS or PostgreSQL is unreachable, or the log is full; retry shortly",
}
SCHEMES = {
    API_KEY: {
        "type": "http",
        "scheme": "bearer",
        "description": "A tenant's API key: `Authorization: Bearer <key>`. The answer acts "
        "for the key's tenant only; each route needs one scope.",
    },
    ADMIN_KEY: {
        "type": "http",
        "scheme": "bearer",
        "description": "An admin key (`PRESSROOM_ADMIN_KEY`): `Authorization: Bearer <key>`.",
    },
}
_NAME = re.compile(r"[^a-z0-9]+")
INFO_TEXT = (
    "HTML to PDF (and PNG) rendering, asynchronous: submit a job, get `202` once it is "
    "durable, then poll it, follow its event stream or take its signed webhook. Every error "
    'answer is `{"error": {"type", "message", "field"?}}` with a stable `type` (`ErrorType`) '
    "and, for bad input, the `field` to fix; a method a route does not take is a `405` whose "
    "`Allow` header names the ones it does."
)


class UndocumentedRoute(Exception):
    """A route of the router has no entry in `contract.ROUTES`."""


Operation = tuple[str, str, Route, Handler]


def operations(app: web.Application) -> list[Operation]:
    """(method, public path, entry, handler) of every route the router serves (HEAD aside:
    aiohttp adds one per GET); `UndocumentedRoute` naming any route without an entry."""
    found: list[Operation] = []
    missing: list[str] = []
    for route in app.router.routes():
        if route.method == "HEAD" or route.resource is None:
            continue
        key = (route.method, public_path(route.resource.canonical))
        if key in ROUTES:
            found.append((*key, ROUTES[key], route.handler))
        else:
            missing.append(" ".join(key))
    if missing:
        raise UndocumentedRoute(f"no entry in contract.ROUTES for {', '.join(missing)}")
    return found


def _structs(routes: list[Route]) -> list[type]:
    """Every Struct a body or an answer uses, the error body first."""
    found: dict[type, None] = {answers.ErrorBody: None}
    for route in routes:
        if route.body is not None and route.body.struct is not None:
            found[route.body.struct] = None
        for answer in route.answers.values():
            if isinstance(answer, type):
                found[answer] = None
    return list(found)


def _parameter(param: Param) -> dict[str, Any]:
    return {
        "name": param.name,
        "in": param.where,
        "required": param.required,
        "description": param.description,
        "schema": param.schema,
    }


def _request_body(body: Body, refs: dict[type, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {}
    binary = {"schema": {"type": "string", "format": "binary"}, "example": body.example}
    content.update(dict.fromkeys(body.raw_types, binary))  # a file as it is
    if body.struct is not None:
        media: dict[str, Any] = {"schema": refs[body.struct], "example": body.example}
        if body.more_examples:  # `example` and `examples` exclude each other
            named = [("default", "", media.pop("example")), *body.more_examples]
            media["examples"] = {
                name: {"summary": summary, "value": value} if summary else {"value": value}
                for name, summary, value in named
            }
        content["application/json"] = media
    if body.multipart is not None:
        example = body.example if body.multipart_example is None else body.multipart_example
        content["multipart/form-data"] = {"schema": body.multipart, "example": example}
    if body.lines_example is not None:
        content["application/x-ndjson"] = {
            "schema": {"type": "string"},
            "example": body.lines_example,
        }
    return {"required": body.required, "content": content}


def _media(answer: Media) -> dict[str, Any]:
    described: dict[str, Any] = {"schema": answer.schema}
    if answer.example is not None:
        described["example"] = answer.example
    return described


def _answer(status: int, answer: type | Media | None, refs: dict[type, Any]) -> dict[str, Any]:
    if answer is None:
        return {"description": "No content"}
    if isinstance(answer, Media):
        content = {kind: _media(answer) for kind in answer.types}
        return {"description": answer.description, "content": content}
    doc = (answer.__doc__ or answer.__name__).split("\n\n")[0]
    described: dict[str, Any] = {
        "description": " ".join(doc.split()),
        "content": {"application/json": {"schema": refs[answer]}},
    }
    if status in (201, 202) and answer is not jobanswers.Redelivery:
        described["headers"] = {"Location": {"schema": {"type": "string"}}}
    return described


def _error(status: int, refs: dict[type, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "description": STATUS_TEXT[status],
        "content": {"application/json": {"schema": refs[answers.ErrorBody]}},
    }
    if status == 429:
        described["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
    if status == 401:
        described["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    if status == 416:
        described["headers"] = {"Content-Range": {"schema": {"type": "string"}}}
    return described


RATE_HEADERS = {
    "RateLimit-Limit": "The tenant's burst: submissions it may make at once",
    "RateLimit-Remaining": "Submissions it may make now, before a 429",
    "RateLimit-Reset": "Seconds until its bucket is full again",
}
"""Headers on every answer to a tenant's key once it is known (`app._rate_headers`)."""


def _with_rate_headers(responses: dict[str, dict[str, Any]]) -> None:
    """Name `RATE_HEADERS` on every answer but 401 (the key was not known)."""
    for status, response in responses.items():
        if status != "401":
            headers = response.setdefault("headers", {})
            headers.update(
                {name: {"$ref": f"#/components/headers/{name}"} for name in RATE_HEADERS}
            )


def _who(guard: Guard | None) -> str:
    """Who may call the route, from its own guard: what its description opens with."""
    if guard is None:
        return "Open: no key needed."
    if guard.scheme == ADMIN_KEY:
        return "Needs the admin key."
    return f"Needs the scope `{guard.scope}`." if guard.scope is not None else ""


def _operation(operation: Operation, refs: dict[type, Any]) -> dict[str, Any]:
    method, path, route, handler = operation
    responses = {str(s): _answer(s, a, refs) for s, a in route.answers.items()}
    for status in route.errors:
        responses.setdefault(str(status), _error(status, refs))
    guard = guard_of(handler)
    if guard is not None and guard.scheme == API_KEY:
        _with_rate_headers(responses)
    described: dict[str, Any] = {
        "operationId": _NAME.sub("_", f"{method} {path}".lower()).strip("_"),
        "summary": route.summary,
        "description": f"{_who(guard)} {route.description}".strip(),
        "tags": [route.tag],
        "security": [{guard.scheme: []}] if guard is not None else [],
        "parameters": [_parameter(p) for p in route.params],
        "responses": dict(sorted(responses.items())),
    }
    if route.body is not None:
        described["requestBody"] = _request_body(route.body, refs)
    return described


def document(app: web.Application, server: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `app`'s routes, served from `server`."""
    found = operations(app)
    structs = _structs([route for _, _, route, _ in found])
    schemas, components = msgspec.json.schema_components(structs, ref_template=REF)
    refs = dict(zip(structs, schemas, strict=True))
    schemadocs.describe(components, structs, REF)
    components.update(streamdocs.components())
    paths: dict[str, dict[str, Any]] = {}
    for operation in found:
        method, path = operation[0], operation[1]
        paths.setdefault(path, {})[method.lower()] = _operation(operation, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Pressroom",
            "version": "1",
            "description": INFO_TEXT,
            "contact": {"name": "This gateway's API reference", "url": f"{server}/docs"},
        },
        "servers": [{"url": server, "description": "This gateway (`PRESSROOM_PUBLIC_URL`)"}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": components,
            "securitySchemes": SCHEMES,
            "headers": {
                name: {"description": text, "schema": {"type": "integer", "minimum": 0}}
                for name, text in RATE_HEADERS.items()
            },
        },
    }


def _encoded(app: web.Application) -> bytes:
    """The document as JSON, built on first use (the router is complete by then)."""
    built = app[DOCUMENT]
    if built.json is None:
        built.json = msgspec.json.encode(document(app, app[SETTINGS].base_url))
    return built.json


async def get_document(request: web.Request) -> web.Response:
    """`GET /openapi.json`."""
    return web.Response(body=_encoded(request.app), content_type="application/json")


def _file(name: str) -> web.Response:
    kind = FILE_TYPES.get(name)
    if kind is None:
        body = answers.ErrorBody(
            error=answers.ErrorDetail(type=ErrorType.NOT_FOUND, message=f"no {name!r}")
        )
        return answers.respond(body, 404, PAGE_HEADERS)
    data = resources.files(__package__ or "services.gateway").joinpath(FOLDER, name).read_bytes()
    return web.Response(body=data, headers={**PAGE_HEADERS, "Content-Type": kind})


async def get_page(request: web.Request) -> web.Response:
    """`GET /docs`: the page that renders the document."""
    return _file("index.html")


async def get_page_file(request: web.Request) -> web.Response:
    """`GET /docs/{file}`: the page's script and style sheet."""
    return _file(request.match_info["file"])


def add_routes(app: web.Application) -> None:
    app[DOCUMENT] = Built()
    app.router.add_get("/openapi.json", get_document)
    app.router.add_get("/docs", get_page)
    app.router.add_get("/docs/{file}", get_page_file)
