"""Header values as text: bytes that are not UTF-8 (which aiohttp hands over as lone
surrogates) are a 400 naming the header, or left out where headers are only read for
the trace context."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict
from opentelemetry import propagate

from services.core.model.errors import RequestError
from services.gateway.headers import header_of, text_headers

NOT_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")  # as aiohttp decodes them
TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


def test_a_header_is_its_text_and_absent_is_none():
    headers = CIMultiDict(Authorization="Bearer caf\u00e9")
    assert header_of(headers, "authorization") == "Bearer caf\u00e9"
    assert header_of(headers, "Idempotency-Key") is None


def test_a_header_that_is_not_utf8_is_a_400_naming_it():
    with pytest.raises(RequestError) as raised:
        header_of(CIMultiDict({"Idempotency-Key": "k" + NOT_UTF8}), "Idempotency-Key")
    assert raised.value.field == "Idempotency-Key"
    assert raised.value.message.encode()  # the message itself never quotes the bytes


def test_the_trace_context_is_read_without_headers_that_are_not_utf8():
    """OpenTelemetry's baggage reader raises on them: with tracing on, every request
    carrying one was a 500 from the tracing middleware, outside the JSON errors."""
    headers = CIMultiDict(baggage="k=" + NOT_UTF8, traceparent=TRACEPARENT)
    with pytest.raises(UnicodeEncodeError):
        propagate.extract(headers)
    carrier = text_headers(headers)
    assert "baggage" not in carrier and carrier["traceparent"] == TRACEPARENT
    propagate.extract(carrier)
