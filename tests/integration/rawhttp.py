"""Requests to a live gateway written byte for byte on a raw socket (no client library
cleans them up first), and built from the gateway's own OpenAPI document: its routes,
their parameters and example bodies, and every field those bodies may hold. Shared by
`test_hostile_input.py` (the hunt for 5xx) and `test_malformed_requests.py`."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.core.objectstore.storage import LocalStorage
from services.core.runtime.settings import Settings
from tests.conftest import ADMIN_KEY, Stack


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def exchange(port: int, request: bytes, timeout: float = 30) -> Answer:
    """Write `request` as it is and read the whole answer (the request says
    `Connection: close`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        # An answer (and a close) before the body was all sent: read that answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunked(body)
    return Answer(int(status_line.split()[1]), headers, body)


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        length = int(size.split(b";")[0], 16)
        if length == 0:
            break
        out, body = out + rest[:length], rest[length + 2 :]
    return out


def raw_request(
    method: str, target: bytes, headers: dict[str, bytes], body: bytes | None = None
) -> bytes:
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [name.encode() + b": " + value for name, value in headers.items()]
    if body is not None:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def is_problem(answer: Answer) -> bool:
    """A JSON problem body: `{"error": {"type": …, "message": …}}`."""
    if not answer.headers.get("content-type", "").startswith("application/json"):
        return False
    try:
        error = json.loads(answer.body)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error.get("type"), str) and isinstance(error.get("message"), str)


@dataclass(frozen=True)
class Operation:
    """One route of the document, with what a request to it needs to be otherwise sound."""

    method: str
    path: str
    params: tuple[dict[str, Any], ...]
    body: Any  # the example body (None: no JSON body)
    schema: dict[str, Any] | None
    admin: bool
    lines: bool  # the body may also be JSON Lines

    def target(self, ids: dict[str, str], path_values: dict[str, bytes] | None = None) -> bytes:
        """The request target: path parameters filled in, percent-encoded."""
        values = path_values or {}
        target = self.path.encode()
        for param in self.params:
            if param["in"] == "path":
                name = param["name"]
                value = values.get(name, ids.get(name, uuid.uuid4().hex).encode())
                quoted = urllib.parse.quote_from_bytes(value, safe="").encode()
                target = target.replace(b"{" + name.encode() + b"}", quoted)
        return target


def example_of(media: dict[str, Any]) -> Any:
    """A body's `example`, or its `default` one where the document names several."""
    if "example" in media:
        return media["example"]
    return media["examples"]["default"]["value"]


def operations(document: dict[str, Any]) -> list[Operation]:
    found = []
    for path, methods in document["paths"].items():
        for method, described in methods.items():
            content = described.get("requestBody", {}).get("content", {})
            json_body = content.get("application/json")
            found.append(
                Operation(
                    method.upper(),
                    path,
                    tuple(described.get("parameters", [])),
                    example_of(json_body) if json_body else None,
                    json_body["schema"] if json_body else None,
                    path.startswith("/admin/"),
                    "application/x-ndjson" in content,
                )
            )
    return found


def field_paths(schema: dict[str, Any], components: dict[str, Any], depth: int = 3) -> list[tuple]:
    """Every field a body of `schema` may hold, as paths (`("options", "margin", "top")`,
    `("items", 0, "filename")`), down to `depth` levels."""
    schema = _resolved(schema, components)
    if depth == 0:
        return []
    paths: list[tuple] = []
    for name, below in schema.get("properties", {}).items():
        paths.append((name,))
        paths += [(name, *rest) for rest in field_paths(below, components, depth - 1)]
    if schema.get("type") == "array" and "items" in schema:
        paths += [(0, *rest) for rest in field_paths(schema["items"], components, depth)]
    return paths


def _resolved(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a `$ref`, or the one object or array of an `anyOf`, followed."""
    if "$ref" in schema:
        return _resolved(components[schema["$ref"].rsplit("/", 1)[1]], components)
    for option in schema.get("anyOf", []):
        option = _resolved(option, components)
        if option.get("type") in ("object", "array") or "properties" in option:
            return option
    return schema


PLACEHOLDER = "\x01hostile\x01"


def body_with(example: Any, path: tuple, token: bytes) -> bytes:
    """The example body as JSON with `token` (raw JSON bytes) at `path`."""
    body = json.loads(json.dumps(example if isinstance(example, dict) else {}))
    place: Any = body
    for step, after in itertools.pairwise(path):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(step, int):
            while len(place) <= step:
                place.append(empty)
            if not isinstance(place[step], type(empty)):
                place[step] = empty
        elif not isinstance(place.get(step), type(empty)):
            place[step] = empty
        place = place[step]
    last = path[-1]
    if isinstance(last, int):
        while len(place) <= last:
            place.append(None)
    place[last] = PLACEHOLDER
    encoded = json.dumps(body).encode()
    return encoded.replace(json.dumps(PLACEHOLDER).encode(), token)


def as_json(value: bytes, form: str) -> bytes:
    """`value` as a JSON token: as it is (`raw`), inside quotes with only `"` and `\\`
    escaped (`quoted`: control bytes and invalid UTF-8 stay), or as text JSON escapes
    (`escaped`: lone surrogates become `\\ud800`)."""
    if form == "raw":
        return value
    if form == "quoted":
        return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    return json.dumps(value.decode("utf-8", "surrogateescape")).encode()


@dataclass
class Target:
    """The live gateway and what requests to it need: keys, existing ids."""

    port: int
    document: dict[str, Any]
    key: str
    ids: dict[str, str]
    download: bytes  # the target of a signed link to a stored file

    def auth(self, operation: Operation) -> bytes:
        return b"Bearer " + (ADMIN_KEY if operation.admin else self.key).encode()

    def send(
        self,
        operation: Operation,
        header: tuple[str, bytes] | None = None,
        query: tuple[str, bytes] | None = None,
        path: tuple[str, bytes] | None = None,
        body: bytes | None = None,
        content_type: bytes = b"application/json",
    ) -> Answer:
        """`operation`'s request, sound but for what is given: one header, one query or
        path parameter (its value percent-encoded) or the body."""
        headers = {"Authorization": self.auth(operation)}
        if operation.body is not None:
            headers["Content-Type"] = content_type
        headers.update([header] if header else [])
        target = operation.target(self.ids, dict([path]) if path else None)
        if operation.path == "/files/{key}" and path is None:
            target = self.download
        if query is not None:
            name, value = query
            quoted = urllib.parse.quote_from_bytes(value, safe="").encode()
            target += (b"&" if b"?" in target else b"?") + name.encode() + b"=" + quoted
        if body is None and operation.body is not None:
            body = json.dumps(operation.body).encode()
        return exchange(self.port, raw_request(operation.method, target, headers, body))


def lines_with(example: dict[str, Any], path: tuple, token: bytes) -> bytes:
    """The example batch as JSON Lines (its fields, then one item a line) with `token` at
    `path`: in the first line, or in the first item's."""
    fields = {key: value for key, value in example.items() if key != "items"}
    items = [json.dumps(item).encode() for item in example["items"]]
    if path[:2] == ("items", 0):
        items[0] = body_with(example["items"][0], path[2:], token)
    else:
        fields_line = body_with(fields, path, token)
        return b"\n".join([fields_line, *items])
    return b"\n".join([json.dumps(fields).encode(), *items])


@pytest.fixture
async def target(settings: Settings) -> AsyncIterator[Target]:
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    async with stack.client.get(f"{stack.url}/openapi.json") as response:
        document = await response.json()
    victim = await stack.new_tenant()
    storage = LocalStorage(settings.storage_dir, settings.base_url, settings.url_secret)
    await storage.put(f"{stack.tenant.id}/file.pdf", b"%PDF-1.7\n%%EOF\n", "application/pdf")
    link = urllib.parse.urlsplit(await storage.url(f"{stack.tenant.id}/file.pdf", 3600))
    ids = {"id": victim.id}  # a tenant the admin routes may change; no job, batch or template
    yield Target(
        settings.port, document, stack.tenant.key, ids, f"{link.path}?{link.query}".encode()
    )
    await stack.close()
