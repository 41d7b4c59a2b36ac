"""Each class of malformed request the hunt of `test_hostile_input.py` found, or the
issue named, answered with a 400 (404, 416) problem naming its field: header bytes that
are not UTF-8, digits outside ASCII, numbers with thousands of digits, file names the
safe-name rule would change, ids that no tenant or key can have, download ranges.

Requests go over a raw socket (`rawhttp.exchange`), byte for byte, to the
gateway and projector (no renderer, no Chromium).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.integration.rawhttp import (
    Answer,
    Operation,
    Target,
    body_with,
    is_problem,
    operations,
    target,
)

__all__ = ["target"]  # the fixture every test here uses


def problem_of(answer: Answer) -> dict[str, Any]:
    assert is_problem(answer), (answer.status, answer.body[:300])
    error: dict[str, Any] = json.loads(answer.body)["error"]
    return error


def operation(target: Target, method: str, path: str) -> Operation:
    found = [o for o in operations(target.document) if (o.method, o.path) == (method, path)]
    return found[0]


def refusals(target: Target, cases: list[tuple[str, str, dict[str, Any], str]]) -> list[Any]:
    """Each case (method, path, change, field) sent, sound but for `change`; the cases
    not answered with a 400 whose problem names `field`, with their answers. A change
    is a `query` or `header` (name, bytes), a `body` (path, text) or a `token` (path,
    raw JSON)."""
    wrong = []
    for method, path, change, field in cases:
        sent = operation(target, method, path)
        if "body" in change:
            where, text = change["body"]
            change = {"token": (where, json.dumps(text).encode())}
        if "token" in change:
            change = {"body": body_with(sent.body, *change["token"])}
        answer = target.send(sent, **change)
        error = json.loads(answer.body).get("error", {}) if is_problem(answer) else {}
        if answer.status != 400 or error.get("field") != field:
            wrong.append((method, path, field, answer.status, answer.body[:200]))
    return wrong


async def test_a_header_that_is_not_utf8_is_a_400_naming_it(target: Target):
    """aiohttp decodes such bytes to lone surrogates, which any later `.encode()` (a
    key's hash, an id derived from the key, an error quoting the value) turned into a
    500."""
    cases = [
        ("GET", "/jobs", {"header": ("Authorization", b"Bearer \xff\xfe")}, "Authorization"),
        ("GET", "/admin/tenants", {"header": ("Authorization", b"Bearer \xc3(")},
         "Authorization"),
        ("POST", "/jobs", {"header": ("Idempotency-Key", b"order-\xff")}, "Idempotency-Key"),
        ("POST", "/batches", {"header": ("Idempotency-Key", b"\xed\xa0\x80")},
         "Idempotency-Key"),
        ("POST", "/jobs", {"header": ("Content-Type", b"application/\xffjson")},
         "Content-Type"),
        ("POST", "/batches", {"header": ("Content-Type", b"\xff")}, "Content-Type"),
        ("POST", "/templates", {"header": ("Content-Type", b"\xff")}, "Content-Type"),
        ("GET", "/jobs/{id}/stream", {"header": ("Last-Event-ID", b"\xff")}, "Last-Event-ID"),
        ("GET", "/files/{key}", {"header": ("Range", b"bytes=\xff-")}, "Range"),
    ]  # fmt: skip
    assert await asyncio.to_thread(refusals, target, cases) == []


async def test_digits_outside_ascii_are_not_numbers(target: Target):
    """Python's `int()`, `float()` and `\\d` read them as numbers; a client meaning ASCII
    digits gets a 400 naming the field instead of a number it did not write."""
    arabic_month, wide_month = (
        "\u0662\u0660\u0662\u0666-\u0661\u0661",
        "\uff12\uff10\uff12\uff16-\uff11\uff11",
    )
    cases = [
        ("GET", "/usage", {"query": ("month", arabic_month.encode())}, "month"),
        ("GET", "/admin/usage", {"query": ("month", wide_month.encode())}, "month"),
        ("GET", "/jobs", {"query": ("limit", "\u0661\u0662".encode())}, "limit"),
        ("GET", "/templates/{id}", {"query": ("version", "\uff15".encode())}, "version"),
        ("GET", "/jobs/{id}/stream", {"header": ("Last-Event-ID", "\u0661".encode())},
         "Last-Event-ID"),
        ("POST", "/jobs", {"body": (("options", "page_ranges"), "\u0661-\u0662")},
         "options.page_ranges"),
        ("POST", "/jobs", {"body": (("options", "margin", "top"), "\u0661\u0660mm")},
         "options.margin.top"),
        ("POST", "/batches", {"body": (("options", "page_ranges"), "\uff11")},
         "options.page_ranges"),
    ]  # fmt: skip
    assert await asyncio.to_thread(refusals, target, cases) == []


async def test_numbers_with_thousands_of_digits_are_a_400_naming_the_field(target: Target):
    """`int()` raises past 4,300 digits (a 500 from `page_ranges`), msgspec keeps up to
    that many in a body (carried on into events and PostgreSQL) and names no field for
    more: each is a 400 naming the field."""
    mark = json.dumps({"text": "x", "pages": "2-" + "9" * 4400}).encode()
    cases = [
        ("POST", "/jobs", {"body": (("options", "page_ranges"), "1" + "0" * 5000)},
         "options.page_ranges"),
        ("POST", "/batches", {"token": (("options", "watermark"), mark)},
         "options.watermark.pages"),
        ("POST", "/jobs", {"token": (("data", "n"), b"9" * 5000)}, "data.n"),
        ("POST", "/jobs", {"token": (("data", "n"), b"-" + b"9" * 4000)}, "data.n"),
        ("POST", "/jobs", {"token": (("data", "n"), b"18446744073709551616")}, "data.n"),
        ("POST", "/jobs", {"token": (("options", "scale"), b"1" + b"0" * 30)}, "options.scale"),
        ("POST", "/jobs", {"token": (("options", "scale"), b"1e400")}, "options.scale"),
        ("POST", "/templates", {"token": (("name",), b"9" * 4301)}, "name"),
        ("PATCH", "/admin/tenants/{id}", {"token": (("monthly_quota",), b"1" + b"0" * 4000)},
         "monthly_quota"),
        ("GET", "/jobs", {"query": ("offset", b"1" + b"0" * 5000)}, "offset"),
        ("GET", "/jobs/{id}/stream", {"query": ("last_event_id", b"9" * 5000)},
         "last_event_id"),
    ]  # fmt: skip
    assert await asyncio.to_thread(refusals, target, cases) == []


async def test_a_file_name_the_safe_name_rule_would_change_is_a_400_naming_it(target: Target):
    """A batch item's file name and an attachment's name are what the client gets back,
    or a 400 saying why not (`core/model/filenames.problem`)."""
    names = ["CON.pdf", "a\u202efdp.pdf", "C:x.pdf", "a\uff0fb.pdf", "a.pdf.", "\u200b.pdf"]
    files = [[{"name": name, "content": "data:text/csv;base64,YSxi"}] for name in names]
    cases = [
        *[("POST", "/batches", {"body": (("items", 0, "filename"), name)}, "items[0].filename")
          for name in names],
        *[("POST", "/jobs", {"token": (("options", "attachments"), json.dumps(f).encode())},
           "options.attachments[0].name")
          for f in files],
    ]  # fmt: skip
    assert await asyncio.to_thread(refusals, target, cases) == []


async def test_an_id_no_tenant_or_key_can_have_is_a_404_not_a_503(target: Target):
    """PostgreSQL refuses a NUL in text: looked up as it was, `%00` made every admin
    route on a tenant or key a 503, as if the database were down."""
    answers = [
        await asyncio.to_thread(target.send, operation(target, method, path), path=(name, value))
        for method, path, name in [
            ("GET", "/admin/tenants/{id}", "id"),
            ("PATCH", "/admin/tenants/{id}", "id"),
            ("GET", "/admin/tenants/{id}/keys", "id"),
            ("POST", "/admin/tenants/{id}/keys", "id"),
            ("DELETE", "/admin/keys/{key_id}", "key_id"),
        ]
        for value in (b"ten_\x00", b"\x00")
    ]
    assert [(a.status, problem_of(a)["type"]) for a in answers] == [(404, "not_found")] * 10


def download_with_range(target: Target, value: bytes) -> Answer:
    """The stored 15-byte file (`%PDF-1.7\n%%EOF\n`), asked for with `Range: value`."""
    return target.send(operation(target, "GET", "/files/{key}"), header=("Range", value))


async def test_a_download_range_within_the_file_is_served(target: Target):
    served = [
        await asyncio.to_thread(download_with_range, target, value)
        for value in (b"bytes=0-3", b"bytes=-4", b"bytes=9-")
    ]
    assert [(a.status, a.body) for a in served] == [
        (206, b"%PDF"),
        (206, b"EOF\n"),
        (206, b"%%EOF\n"),
    ]


async def test_a_download_range_that_cannot_be_read_is_a_400_naming_it(target: Target):
    """aiohttp's file answer is an empty 416 for these; the route's is a problem."""
    values = [
        b"bytes=0-1,4-5",
        b"items=0-3",
        b"bytes=0-" + b"9" * 5000,
        b"bytes=\xd9\xa0-\xd9\xa3",  # Arabic-Indic digits
        b"bytes=3-1",
    ]
    answers = [await asyncio.to_thread(download_with_range, target, v) for v in values]
    assert [(a.status, problem_of(a)["field"]) for a in answers] == [(400, "Range")] * 5


async def test_a_download_range_past_the_end_is_a_416_problem_with_the_length(target: Target):
    answers = [
        await asyncio.to_thread(download_with_range, target, value)
        for value in (b"bytes=15-", b"bytes=99999999999999999999-")
    ]
    assert [(a.status, a.headers["content-range"], problem_of(a)["type"]) for a in answers] == [
        (416, "bytes */15", "range_not_satisfiable")
    ] * 2
