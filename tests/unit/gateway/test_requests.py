"""Parsing a submission: unknown fields refused, aliases, JSON limits, job ids from keys."""

from __future__ import annotations

import pytest

from services.core.model.errors import RequestError
from services.gateway.ids import job_id_for
from services.gateway.requests import parse_job


def test_requests_still_refuse_option_fields_nobody_knows():
    for body, field in (
        (b'{"template": "x", "options": {"watermark": "DRAFT"}}', "options.watermark"),
        (b'{"template": "x", "options": {"margin": {"gutter": "1mm"}}}', "options.margin.gutter"),
        (b'{"template": "x", "options": {"metadata": {"language": "en"}}}',
         "options.metadata.language"),
        (b'{"template": "x", "options": {"wait_for": {"poll": 1}}}', "options.wait_for.poll"),
    ):  # fmt: skip
        with pytest.raises(RequestError) as raised:
            parse_job(body)
        assert raised.value.field == field


def test_idempotency_key_gives_a_stable_id_per_tenant_that_needs_the_server_key():
    key, other_key = b"k" * 32, b"o" * 32
    assert job_id_for(key, "a", "k") == job_id_for(key, "a", "k") != job_id_for(key, "a", "x")
    assert job_id_for(key, "a", "k") != job_id_for(key, "b", "k")  # tenants apart
    assert job_id_for(key, "a", "k") != job_id_for(other_key, "a", "k")  # not computable
    assert job_id_for(key, "a", None) != job_id_for(key, "a", None)


def test_webhook_url_alias_and_defaults():
    job = parse_job(b'{"template": "x", "webhookUrl": "https://example.com/h"}')
    assert job.webhook_url == "https://example.com/h"
    assert job.data == {}
    assert job.options.format == "A4"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b'{"template": "x", "data": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "body",
         "deeper"),
        (b'{"template": "x", "data": {"n": ' + b"9" * 5000 + b"}}", "data.n", "out of range"),
        (b'{"template": "x", "data": {"n": -' + b"9" * 20 + b"}}", "data.n", "out of range"),
        (b'{"template": "x", "data": {"n": 1e999}}', "data.n", "out of range"),
        (b'{"template": "x", "options": {"scale": 1' + b"0" * 4400 + b"}}", "options.scale",
         "out of range"),
        (b'{"template": "x", "data": {"rows": [1, {"n": 2e400}]}}', "data.rows[1].n",
         "out of range"),
        (b'{"template": "x", "data": {"n": 1' + b"0" * 5000 + b"}, ", "body", "out of range"),
    ],
)  # fmt: skip
def test_too_deep_or_too_large_json_is_a_400_naming_the_field(body, field, words):
    with pytest.raises(RequestError) as raised:
        parse_job(body)
    assert raised.value.field == field and words in raised.value.message


def test_numbers_at_the_edge_of_64_bits_are_accepted():
    job = parse_job(
        b'{"template": "x", "data": {"a": 18446744073709551615, '
        b'"b": -9223372036854775808, "c": 1.7976931348623157e308, "d": -0}}'
    )
    assert job.data == {"a": 2**64 - 1, "b": -(2**63), "c": 1.7976931348623157e308, "d": 0}


def test_json_within_the_depth_limit_is_accepted():
    nested = b"[" * 30 + b"]" * 30
    assert parse_job(b'{"template": "x", "data": {"a": ' + nested + b"}}").data["a"]


def test_wide_json_with_many_brackets_is_accepted():
    """More brackets than the depth limit, all shallow (an invoice's 100 lines): the
    depth walk runs and lets it through."""
    lines = ",".join('{"sku": [1, 2]}' for _ in range(100)).encode()
    job = parse_job(b'{"template": "x", "data": {"lines": [' + lines + b"]}}")
    assert len(job.data["lines"]) == 100


def _nest(levels: int) -> bytes:
    """`levels` containers inside each other, objects and arrays in turn."""
    text = "1"
    for n in range(levels):
        text = f'{{"k": {text}}}' if n % 2 else f"[{text}, 2]"
    return text.encode()


def _walked(levels: int) -> bytes:
    """A body with `levels` nested containers in `data`, and brackets enough beside them
    to make the depth walk run."""
    shallow = b", ".join(b"[[]]" for _ in range(10))
    return (
        b'{"template": "x", "data": {"deep": ' + _nest(levels) + b', "wide": [' + shallow + b"]}}"
    )


def test_the_depth_walk_counts_objects_and_arrays_to_the_limit():
    """The body, `data` and 30 more levels are the limit of 32; one more is refused."""
    assert parse_job(_walked(30)).data["wide"]
    with pytest.raises(RequestError, match="nests deeper than 32"):
        parse_job(_walked(31))
