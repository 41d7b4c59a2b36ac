"""The web console: static files served at `/console`, no key needed to fetch them.

The page itself asks for an API key and calls the JSON API with it, so the console can
show and do only what that key's tenant may. The files (services/gateway/console/) are
plain HTML, CSS and JavaScript modules, read once at start: no build step, nothing
fetched from elsewhere at run time. Every answer here carries a strict
Content-Security-Policy: scripts and styles from this origin only, no inline code, no
framing, no form posts, so a value that slipped into the page as markup could not run.
Images and fetches may also come from the storage's origin: a template preview is shown
through the signed URL the API gives, which with S3 points at the bucket, not at the
gateway (the template editor fetches a preview PDF's bytes there and draws its pages with
the vendored pdf.js, whose worker is served from here too: `worker-src 'self'`).

The template editor's CodeMirror 6 and pdf.js are vendored (built from pinned npm
packages in console/editor-src/, their licences in `vendor-licenses.txt`): the running
service needs no npm and fetches nothing from elsewhere.
"""

from __future__ import annotations

import re
from importlib import resources
from urllib.parse import urlsplit

from aiohttp import web

from services.core.model.errortypes import ErrorType
from services.gateway.keys import SETTINGS, STORAGE

FOLDER = "console"
"""The static files' folder, inside this package (package data in pyproject.toml)."""


def policy(storage_origins: tuple[str, ...] = ()) -> str:
    """The console's Content-Security-Policy; images and fetches also from
    `storage_origins` (where the storage's signed URLs point)."""
    images = " ".join(("'self'", "data:", "blob:", *storage_origins))
    connects = " ".join(("'self'", *storage_origins))
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        f"connect-src {connects}; worker-src 'self'; img-src {images}; "
        "form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
    )


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an absolute http(s) URL; None for a relative one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


def headers(csp: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",  # revalidate: a new gateway may bring new files
    }


CSP = policy()
HEADERS = headers(CSP)
"""On every console answer, a missing file's included."""

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}

_NAME = re.compile(r"[a-z][a-z0-9-]*\.(?:html|js|css|txt)")

Files = dict[str, tuple[bytes, str]]
FILES = web.AppKey("console_files", Files)
ANSWER_HEADERS = web.AppKey("console_headers", dict[str, str])


def load_files() -> Files:
    """Every servable file of the console folder: name → (bytes, content type)."""
    folder = resources.files(__package__ or "services.gateway").joinpath(FOLDER)
    files: Files = {}
    for entry in folder.iterdir():
        if _NAME.fullmatch(entry.name) and entry.is_file():
            suffix = entry.name[entry.name.rindex(".") :]
            files[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return files


def _serve(app: web.Application, name: str) -> web.Response:
    found = app[FILES].get(name)
    answer_headers = app.get(ANSWER_HEADERS, HEADERS)
    if found is None:
        error = {"type": ErrorType.NOT_FOUND, "message": f"no console file {name!r}"}
        return web.json_response({"error": error}, status=404, headers=answer_headers)
    body, kind = found
    return web.Response(body=body, headers={**answer_headers, "Content-Type": kind})


async def _allow_storage_images(app: web.Application) -> None:
    """Let the page show images from where the storage's signed URLs point: the S3
    endpoint or bucket host (local storage's are the gateway's own, 'self'). Presigning is
    local work, no request to the storage."""
    origin = origin_of(await app[STORAGE].url("console/origin", 60))
    own = origin in (None, origin_of(app[SETTINGS].base_url))
    app[ANSWER_HEADERS] = headers(policy(() if own else (str(origin),)))


async def page(request: web.Request) -> web.Response:
    """`GET /console`: the single page; its views are routed by the URL's fragment."""
    return _serve(request.app, "index.html")


async def asset(request: web.Request) -> web.Response:
    """`GET /console/{file}`: a script, style sheet or the page itself."""
    name = request.match_info["file"] or "index.html"
    return _serve(request.app, name)


def add_routes(app: web.Application) -> None:
    app[FILES] = load_files()
    app.on_startup.append(_allow_storage_images)  # after the storage is open (cleanup_ctx)
    app.router.add_get("/console", page)
    app.router.add_get("/console/{file:[^/]*}", asset)
