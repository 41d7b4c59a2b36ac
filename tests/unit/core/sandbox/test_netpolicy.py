"""The address policy of webhooks and `url` sources: every spelling of a forbidden host."""

from __future__ import annotations

import pytest

from services.core.model.errors import RequestError
from services.core.sandbox import netpolicy


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


def test_ip_literals_are_caught_before_any_resolver():
    assert netpolicy.literal_address_forbidden("http://127.0.0.1:8080/x") == "127.0.0.1"
    assert netpolicy.literal_address_forbidden("http://[::1]/x") == "::1"
    assert netpolicy.literal_address_forbidden("http://8.8.8.8/x") is None
    assert netpolicy.literal_address_forbidden("http://example.com/x") is None
