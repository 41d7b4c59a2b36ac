"""The web console: static files served at `/console`, no key needed to fetch them.

The page itself asks for an API key and calls the JSON API with it, so the console can
show and do only what that key's tenant may. The files (services/gateway/console/) are
plain HTML, CSS and JavaScript modules, read once at start: no build step, nothing
fetched from elsewhere at run time. Every answer here carries a strict
Content-Security-Policy: scripts and styles from this origin only, no inline code, no
framing, no form posts, so a value that slipped into the page as markup could not run.
"""

from __future__ import annotations

import re
from importlib import resources

from aiohttp import web

FOLDER = "console"
"""The static files' folder, inside this package (package data in pyproject.toml)."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data: blob:; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidate: a new gateway may bring new files
}
"""On every console answer, a missing file's included."""

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}

_NAME = re.compile(r"[a-z][a-z0-9-]*\.(?:html|js|css)")

Files = dict[str, tuple[bytes, str]]
FILES = web.AppKey("console_files", Files)


def load_files() -> Files:
    """Every servable file of the console folder: name → (bytes, content type)."""
    folder = resources.files(__package__ or "services.gateway").joinpath(FOLDER)
    files: Files = {}
    for entry in folder.iterdir():
        if _NAME.fullmatch(entry.name) and entry.is_file():
            suffix = entry.name[entry.name.rindex(".") :]
            files[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return files


def _missing(name: str) -> web.Response:
    error = {"type": "not_found", "message": f"no console file {name!r}"}
    return web.json_response({"error": error}, status=404, headers=HEADERS)


def _serve(files: Files, name: str) -> web.Response:
    found = files.get(name)
    if found is None:
        return _missing(name)
    body, kind = found
    return web.Response(body=body, headers={**HEADERS, "Content-Type": kind})


async def page(request: web.Request) -> web.Response:
    """`GET /console`: the single page; its views are routed by the URL's fragment."""
    return _serve(request.app[FILES], "index.html")


async def asset(request: web.Request) -> web.Response:
    """`GET /console/{file}`: a script, style sheet or the page itself."""
    name = request.match_info["file"] or "index.html"
    return _serve(request.app[FILES], name)


def add_routes(app: web.Application) -> None:
    app[FILES] = load_files()
    app.router.add_get("/console", page)
    app.router.add_get("/console/{file:[^/]*}", asset)
