"""Pure logic: the address policy, dedup ids, retry delays, request parsing."""

from __future__ import annotations

import pytest

from services.core import events, netpolicy
from services.core.errors import RequestError
from services.gateway.requests import job_id_for, parse_job


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "::1",
     "fe80::1", "0.0.0.0", "224.0.0.1", "::ffff:127.0.0.1", "100.64.0.1",
     "64:ff9b::a9fe:a9fe",  # the metadata address through NAT64
     "64:ff9b::7f00:1", "64:ff9b:1::808:808",  # local-use NAT64, whatever it embeds
     "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
     "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
     "::127.0.0.1", "::ffff:0:0", "fec0::1", "ff02::1"],
)  # fmt: skip
def test_private_and_special_addresses_are_forbidden(address):
    assert netpolicy.is_forbidden(address)


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8", "64:ff9b::808:808"]
)
def test_public_addresses_are_allowed(address):
    assert not netpolicy.is_forbidden(address)


@pytest.mark.parametrize(
    "url",
    ["http://[64:ff9b::a9fe:a9fe]/", "http://2130706433/", "http://0x7f.1/", "http://[::1]/",
     "http://app.localhost/", "http://169.254.169.254/"],
)  # fmt: skip
async def test_every_spelling_of_a_forbidden_host_is_refused_naming_the_host(url):
    with pytest.raises(RequestError) as raised:
        await netpolicy.check_url(url, allow_private=False, field="webhook_url")
    host = url.split("//", 1)[1].split("/", 1)[0].strip("[]")
    assert f"webhook_url host {host!r} is a private" in raised.value.message
    assert netpolicy.literal_address_forbidden(url) == (None if "localhost" in url else host)


async def test_loopback_webhook_refused_unless_allowed():
    with pytest.raises(RequestError) as raised:
        await netpolicy.check_url("http://localhost:9/", allow_private=False, field="webhook_url")
    assert raised.value.field == "webhook_url"
    await netpolicy.check_url("http://localhost:9/", allow_private=True, field="webhook_url")


def test_terminal_events_share_one_dedup_id():
    error = events.ErrorInfo(type="template", message="x")
    done = events.JobDone(job_id="j", attempt=1, object_key="k", bytes=1, pages=1, render_ms=1)
    failed = events.JobFailed(job_id="j", attempt=2, error=error)
    assert events.msg_id(done) == events.msg_id(failed) == "j.terminal"
    assert events.subject_of(done) == "jobs.j.done"


def test_events_round_trip_and_tolerate_unknown_fields():
    event = events.JobSubmitted(job_id="j", template="t", data={"a": 1})
    assert events.decode(events.encode(event)) == event
    newer = events.encode(event)[:-1] + b',"added_later":true}'
    assert events.decode(newer).job_id == "j"


def test_a_job_with_options_this_version_does_not_know_still_decodes():
    """A gateway newer than the renderer: the job renders, without the unknown option."""
    newer = (
        b'{"type":"submitted","job_id":"j","template":"t","options":{"format":"A5",'
        b'"watermark":"DRAFT","margin":{"top":"1cm","gutter":"2mm"},'
        b'"metadata":{"title":"T","language":"en"},"wait_for":{"selector":"#x","poll":1}}}'
    )
    job = events.decode(newer)
    assert isinstance(job, events.JobSubmitted)
    assert job.options.format == "A5"
    assert job.options.margin == events.Margin(top="1cm")
    assert job.options.metadata == events.Metadata(title="T")
    assert job.options.wait_for == events.WaitFor(selector="#x")


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


def test_retry_delay_is_exponential_and_capped():
    from services.renderer.decisions import retry_delay

    assert [retry_delay(n, 2, 60) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]


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


def test_ip_literals_are_caught_before_any_resolver():
    assert netpolicy.literal_address_forbidden("http://127.0.0.1:8080/x") == "127.0.0.1"
    assert netpolicy.literal_address_forbidden("http://[::1]/x") == "::1"
    assert netpolicy.literal_address_forbidden("http://8.8.8.8/x") is None
    assert netpolicy.literal_address_forbidden("http://example.com/x") is None


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"template": "x", "data": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}", "deeper"),
        (b'{"template": "x", "data": {"n": ' + b"9" * 5000 + b"}}", "out of range"),
        (b'{"template": "x", "data": {"n": 1e999}}', "out of range"),
    ],
)
def test_too_deep_or_too_large_json_is_a_400_not_a_crash(body, words):
    with pytest.raises(RequestError) as raised:
        parse_job(body)
    assert raised.value.field == "body" and words in raised.value.message


def test_json_within_the_depth_limit_is_accepted():
    nested = b"[" * 30 + b"]" * 30
    assert parse_job(b'{"template": "x", "data": {"a": ' + nested + b"}}").data["a"]
