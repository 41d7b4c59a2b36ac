"""Multipart requests read part by part within limits: each bad body a JSON problem
naming the part or the cause, answered as soon as the limit is crossed.

A real aiohttp server on loopback with the gateway's own error middleware, a handler
that reads the form; requests from aiohttp's client or written byte for byte."""

from __future__ import annotations

import asyncio
import json
import socket
import unicodedata
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from services.gateway.app import errors_as_json
from services.gateway.keys import SETTINGS
from services.gateway.uploads import UploadLimits, read_form
from tests.conftest import serving

LIMITS = UploadLimits(
    max_file_bytes=1000, max_files=3, max_bytes=2500, max_field_bytes=500, timeout=2.0
)
BOUNDARY = "XyZzY"


async def _echo(request: web.Request) -> web.Response:
    upload = await read_form(request, LIMITS, fields={"job"})
    body = {
        "job": upload.json("job"),
        "files": [[name, len(data), data[:8].decode("latin-1")] for name, data in upload.files],
    }
    return web.json_response(body)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    app = web.Application(middlewares=[errors_as_json])
    app[SETTINGS] = Settings()
    app.router.add_post("/up", _echo)
    async with serving(app) as base:
        yield f"{base}/up"


def form(job: Any = None, files: list[tuple[str, bytes]] = ()) -> aiohttp.FormData:  # type: ignore[assignment]
    data = aiohttp.FormData()
    if job is not None:
        data.add_field("job", json.dumps(job), content_type="application/json")
    for name, content in files:
        data.add_field("file", content, filename=name, content_type="application/octet-stream")
    return data


async def post(url: str, data: Any, **headers: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(url, data=data, headers=headers) as r:
        return r.status, await r.json()


async def test_the_job_part_and_files_are_read_in_order(url: str) -> None:
    status, body = await post(
        url, form({"html": "<p>"}, [("logo.png", b"\x89PNG...."), ("fonts/a.woff2", b"wOF2")])
    )
    assert status == 200, body
    assert body == {
        "job": {"html": "<p>"},
        "files": [["logo.png", 8, "\x89PNG...."], ["fonts/a.woff2", 4, "wOF2"]],
    }


async def test_a_file_over_the_limit_is_a_413_naming_it(url: str) -> None:
    status, body = await post(url, form({}, [("ok.css", b"a"), ("big.css", b"x" * 1001)]))
    assert status == 413
    assert body["error"]["field"] == "big.css"
    assert "PRESSROOM_MAX_FILE_BYTES" in body["error"]["message"]


async def test_more_files_than_allowed_is_a_413_on_files(url: str) -> None:
    files = [(f"f{n}.css", b"p{}") for n in range(4)]
    status, body = await post(url, form({}, files))
    assert (status, body["error"]["field"]) == (413, "files")
    assert "PRESSROOM_MAX_FILES" in body["error"]["message"]


async def test_files_together_over_the_request_limit_is_a_413(url: str) -> None:
    files = [(f"f{n}.css", b"x" * 900) for n in range(3)]
    status, body = await post(url, form({}, files))
    assert (status, body["error"]["field"]) == (413, "files")
    assert "PRESSROOM_MAX_UPLOAD_BYTES" in body["error"]["message"]


async def test_a_json_part_over_the_body_limit_is_a_413_naming_it(url: str) -> None:
    status, body = await post(url, form({"html": "x" * 600}))
    assert (status, body["error"]["field"]) == (413, "job")


async def test_a_missing_job_part_is_a_400_naming_it(url: str) -> None:
    status, body = await post(url, form(None, [("a.css", b"p{}")]))
    assert (status, body["error"]["field"]) == (400, "job")


async def test_invalid_json_in_the_job_part_is_a_400(url: str) -> None:
    data = aiohttp.FormData()
    data.add_field("job", "{not json", content_type="application/json")
    data.add_field("file", b"p{}", filename="a.css")
    status, body = await post(url, data)
    assert status == 400 and "JSON" in body["error"]["message"]


BAD_NAMES = [
    "../etc/passwd",
    "/abs.css",
    "a/../../b.css",
    "x\u202egnp.css",
    "nul.css",
    "..",
    " a.css",
]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_a_name_the_safe_name_rule_refuses_is_a_400_naming_it(url: str, name: str) -> None:
    status, body = await post(url, form({}, [(name, b"p{}")]))
    assert status == 400, body
    assert body["error"]["type"] == "validation"
    assert body["error"]["field"] == unicodedata.normalize("NFC", name)


async def test_names_differing_only_by_normalisation_are_one_name_given_twice(url: str) -> None:
    composed = unicodedata.normalize("NFC", "café.css")
    decomposed = unicodedata.normalize("NFD", "café.css")
    status, body = await post(url, form({}, [(composed, b"a{}"), (decomposed, b"b{}")]))
    assert status == 400
    assert "twice" in body["error"]["message"] and body["error"]["field"] == composed


async def test_a_decomposed_name_is_read_in_nfc(url: str) -> None:
    status, body = await post(url, form({}, [(unicodedata.normalize("NFD", "é.css"), b"a{}")]))
    assert status == 200 and body["files"][0][0] == unicodedata.normalize("NFC", "é.css")


async def test_a_body_that_is_not_multipart_is_a_400_on_content_type(url: str) -> None:
    status, body = await post(url, b"{}", **{"Content-Type": "application/json"})
    assert (status, body["error"]["field"]) == (400, "Content-Type")


def _part(headers: str, content: bytes) -> bytes:
    return f"--{BOUNDARY}\r\n{headers}\r\n\r\n".encode() + content + b"\r\n"


def _raw(url: str, body: bytes, length: int | None = None) -> bytes:
    path = url.split("/", 3)[3]
    head = (
        f"POST /{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {length if length is not None else len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _exchange(url: str, request: bytes) -> tuple[int, dict[str, Any]]:
    port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer:
                head, _, rest = answer.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    break
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest)


JOB = _part('Content-Disposition: form-data; name="job"', b"{}")


async def test_a_too_large_file_is_refused_before_the_rest_of_the_body_is_sent(url: str) -> None:
    # The request says 100 MB are coming but sends only the first 300 KB of a file: the
    # answer comes anyway, so the gateway read no further than the limit (and the two
    # chunks the multipart reader looks ahead for the boundary).
    start = JOB + _part('Content-Disposition: form-data; name="f"; filename="big.png"', b"")
    request = _raw(url, start[:-2] + b"x" * 300_000, length=100 * 2**20)
    status, body = await asyncio.to_thread(_exchange, url, request)
    assert (status, body["error"]["field"]) == (413, "big.png")


async def test_a_body_that_stops_arriving_is_a_408(url: str) -> None:
    request = _raw(url, JOB, length=len(JOB) + 500)
    status, body = await asyncio.to_thread(_exchange, url, request)
    assert (status, body["error"]["type"]) == (408, "request_timeout")


@pytest.mark.parametrize(
    ("part", "words"),
    [
        (_part('Content-Disposition: form-data; name="f"; filename="a.css"\r\n'
               "Content-Encoding: gzip", b"\x1f\x8b"), "encoded"),
        (_part('Content-Disposition: form-data; name="f"; filename="a.css"\r\n'
               "Content-Transfer-Encoding: base64", b"cDp7fQ=="), "binary"),
        (_part("Content-Disposition: form-data; name=\"f\"\r\n"
               "Content-Type: multipart/mixed; boundary=inner", b"--inner--"), "multipart"),
    ],
)  # fmt: skip
async def test_encoded_and_nested_parts_are_400s(url: str, part: bytes, words: str) -> None:
    body = JOB + part + f"--{BOUNDARY}--\r\n".encode()
    status, answer = await asyncio.to_thread(_exchange, url, _raw(url, body))
    assert status == 400 and words in answer["error"]["message"], answer


async def test_a_body_without_its_closing_boundary_is_a_400(url: str) -> None:
    body = JOB + b"--" + BOUNDARY.encode() + b"\r\nno headers end here"
    status, answer = await asyncio.to_thread(_exchange, url, _raw(url, body))
    assert status == 400 and answer["error"]["field"] == "body", answer


async def test_a_percent_encoded_climb_is_decoded_then_refused(url: str) -> None:
    part = _part('Content-Disposition: form-data; name="f"; filename="a%2F..%2F..%2Fb.css"', b"")
    body = JOB + part + f"--{BOUNDARY}--\r\n".encode()
    status, answer = await asyncio.to_thread(_exchange, url, _raw(url, body))
    assert (status, answer["error"]["field"]) == (400, "a/../../b.css"), answer


async def test_an_empty_file_input_is_skipped_as_browsers_send_it(url: str) -> None:
    part = _part('Content-Disposition: form-data; name="f"; filename=""', b"")
    body = JOB + part + f"--{BOUNDARY}--\r\n".encode()
    status, answer = await asyncio.to_thread(_exchange, url, _raw(url, body))
    assert (status, answer["files"]) == (200, []), answer


async def test_a_file_with_an_empty_filename_but_bytes_is_a_400(url: str) -> None:
    part = _part('Content-Disposition: form-data; name="f"; filename=""', b"p{}")
    body = JOB + part + f"--{BOUNDARY}--\r\n".encode()
    status, answer = await asyncio.to_thread(_exchange, url, _raw(url, body))
    assert (status, answer["error"]["field"]) == (400, "files"), answer
