"""The renderer's egress policy without a browser: URL verdicts, DNS handling, refusals.

Public names cannot be resolved in the test sandbox (no DNS), so those tests inject a fake
resolver into `Egress`; literal addresses and `localhost` never reach a resolver.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.core.sandbox.netpolicy import is_forbidden, literal_address
from services.renderer.egress import Egress, RequestFilter, refused_scheme
from services.renderer.evidence import Evidence, Refusal, RefusedLog

PUBLIC = "93.184.216.34"


def fake_dns(
    table: dict[str, Sequence[str]], calls: list[str] | None = None
) -> Callable[[str], Awaitable[Sequence[str]]]:
    """A resolver answering from `table`; other names do not resolve (EAI_NONAME)."""

    async def resolve(host: str) -> Sequence[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


def egress(allow_private: bool = False, **table: Sequence[str]) -> Egress:
    names = {name.replace("_", "."): addresses for name, addresses in table.items()}
    return Egress(allow_private=allow_private, resolve=fake_dns(names))


# (url, allowed without private networks, allowed with them)
TABLE = [
    ("file:///etc/passwd", False, False),
    ("FILE:///etc/passwd", False, False),
    ("http://127.0.0.1/", False, True),
    ("http://localhost/", False, True),
    ("http://app.localhost:8080/", False, True),
    ("http://[::1]/", False, True),
    ("http://169.254.169.254/latest/meta-data", False, True),
    ("http://10.0.0.1/", False, True),
    ("http://192.168.1.1/", False, True),
    ("http://100.64.0.1/", False, True),
    ("http://2130706433/", False, True),
    ("http://0x7f000001/", False, True),
    ("http://017700000001/", False, True),
    ("http://0x7f.1/", False, True),
    ("http://0/", False, True),
    ("http://[::ffff:127.0.0.1]/", False, True),
    ("http://[::ffff:a9fe:a9fe]/", False, True),
    ("http://[::127.0.0.1]/", False, True),
    ("http://[64:ff9b::a9fe:a9fe]/", False, True),
    ("http://[2002:7f00:1::]/", False, True),
    ("http://[fe80::1]/", False, True),
    ("http://[ff02::1]/", False, True),
    ("ws://127.0.0.1:9/socket", False, True),
    ("https://93.184.216.34/", True, True),
    ("http://1572395042/", True, True),  # 93.184.216.34 as one number
    ("wss://93.184.216.34/", True, True),
    ("http://[2606:4700::1111]/", True, True),
    ("data:image/png;base64,iVBORw0KGgo=", True, True),
    ("data:text/html,<h1>x</h1>", True, True),
    ("blob:https://example.com/0d1c7c1e-1d0b-4b0e-9c3f-6a8b0e9e4a11", True, True),
    ("about:blank", True, True),
    ("chrome://settings", False, False),
    ("chrome-extension://abcdef/x.js", False, False),
    ("view-source:http://x", False, False),
    ("ftp://x/file", False, False),
    ("javascript:alert(1)", False, False),
    ("gopher://127.0.0.1:70/", False, False),
    ("//no-scheme.example/", False, False),
    ("http:///path-without-host", False, False),
    ("http://127.0.0.1:99999/", False, False),
    ("http://256.1.1.1/", False, False),
    ("http://1.2.3.4.5/", False, False),
]


@pytest.mark.parametrize(("url", "public_only", "with_private"), TABLE)
async def test_url_verdicts_with_and_without_private_networks(
    url: str, public_only: bool, with_private: bool
) -> None:
    assert (await egress(allow_private=False).decide(url)).allowed is public_only
    assert (await egress(allow_private=True).decide(url)).allowed is with_private


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("10.0.0.1.", "10.0.0.1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("example.com", None),
        ("1e100.net", None),
    ],
)
def test_literal_hosts_are_read_as_a_browser_reads_them(host: str, address: str | None) -> None:
    assert literal_address(host) == address


def test_a_host_ending_in_a_bad_number_is_not_an_address() -> None:
    with pytest.raises(ValueError, match="not a valid IPv4 address"):
        literal_address("1.2.3.999")


@pytest.mark.parametrize(
    "address", ["::127.0.0.1", "64:ff9b::10.0.0.1", "2002:a9fe:a9fe::1", "fec0::1", "::ffff:0:0"]
)
def test_ipv6_forms_of_forbidden_ipv4_addresses_are_refused(address: str) -> None:
    assert is_forbidden(address)


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:5db8:d822::1", PUBLIC])
def test_ipv6_forms_of_public_ipv4_addresses_are_allowed(address: str) -> None:
    assert not is_forbidden(address)


async def test_a_name_resolving_only_to_public_addresses_is_allowed() -> None:
    verdict = await egress(example_com=[PUBLIC, "2606:2800:220:1::1"]).decide(
        "https://example.com/a.png"
    )
    assert verdict.allowed
    assert verdict.reason == "public address"


async def test_a_name_resolving_to_a_private_address_is_refused_naming_only_the_host() -> None:
    verdict = await egress(intranet_example=["10.1.2.3"]).decide("http://intranet.example/")
    assert not verdict.allowed
    assert "'intranet.example' is a private" in verdict.reason
    assert "10.1.2.3" not in verdict.reason  # no DNS oracle for the inside
    assert "PRESSROOM_ALLOW_PRIVATE_NETWORKS" in verdict.reason


async def test_a_name_mixing_public_and_private_answers_is_refused_as_rebinding() -> None:
    verdict = await egress(rebind_example=[PUBLIC, "127.0.0.1"]).decide("http://rebind.example/")
    assert not verdict.allowed
    assert "both public and forbidden" in verdict.reason
    assert "127.0.0.1" not in verdict.reason


async def test_a_name_that_does_not_resolve_is_refused_and_says_so() -> None:
    verdict = await egress().decide("https://nowhere.example/x.css")
    assert not verdict.allowed
    assert not verdict.transient
    assert verdict.reason.startswith("host 'nowhere.example' does not resolve")


async def test_localhost_names_are_loopback_without_asking_the_resolver() -> None:
    """As in Chromium, `localhost` and `*.localhost` are loopback whatever DNS says: a
    resolver that calls every name public is never asked about them."""
    calls: list[str] = []

    async def all_public(host: str) -> Sequence[str]:
        calls.append(host)
        return [PUBLIC]

    policy = Egress(allow_private=False, resolve=all_public)
    for url in ("http://localhost/", "http://localhost./", "http://LOCALHOST:8080/",
                "http://app.localhost/"):  # fmt: skip
        verdict = await policy.decide(url)
        assert not verdict.allowed, url
        assert "is a private, loopback" in verdict.reason
    assert calls == []
    assert (await policy.decide("http://example.com/")).allowed  # other names are asked
    assert calls == ["example.com"]


async def test_the_default_resolver_refuses_a_name_dns_cannot_carry() -> None:
    """The default resolver's failure is a refusal; an empty label fails in Python's
    IDNA encoding, before any DNS query, so this holds on any machine."""
    verdict = await Egress(allow_private=False).decide("http://a..example/")
    assert not verdict.allowed
    assert not verdict.transient
    assert verdict.reason.startswith("host 'a..example' does not resolve")


async def test_a_slow_resolver_is_a_transient_refusal_and_is_not_cached() -> None:
    calls: list[str] = []

    async def slow(host: str) -> Sequence[str]:
        calls.append(host)
        await asyncio.sleep(10)
        return [PUBLIC]

    policy = Egress(allow_private=False, resolve=slow, timeout=0.05)
    first = await policy.decide("http://slow.example/")
    await policy.decide("http://slow.example/")
    assert not first.allowed
    assert first.transient
    assert "did not resolve within 0.05 s" in first.reason
    assert calls == ["slow.example", "slow.example"]


async def test_a_temporary_resolver_failure_is_transient() -> None:
    async def failing(host: str) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    verdict = await Egress(allow_private=False, resolve=failing).decide("http://a.example/")
    assert not verdict.allowed
    assert verdict.transient


async def test_answers_are_cached_for_ttl_seconds_and_lookups_are_shared() -> None:
    calls: list[str] = []
    now = [0.0]
    policy = Egress(
        allow_private=False,
        resolve=fake_dns({"cdn.example": [PUBLIC]}, calls),
        ttl=5.0,
        clock=lambda: now[0],
    )
    verdicts = await asyncio.gather(*(policy.decide(f"https://cdn.example/{i}") for i in range(20)))
    assert all(v.allowed for v in verdicts)
    now[0] = 4.9
    await policy.decide("https://cdn.example/again")
    assert calls == ["cdn.example"]
    now[0] = 5.1
    await policy.decide("https://cdn.example/later")
    assert calls == ["cdn.example", "cdn.example"]


async def test_private_networks_skip_dns_but_not_the_scheme_check() -> None:
    calls: list[str] = []
    policy = Egress(allow_private=True, resolve=fake_dns({}, calls))
    assert (await policy.decide("http://intranet.example/")).allowed
    assert not (await policy.decide("file:///etc/passwd")).allowed
    assert calls == []


async def test_an_address_is_judged_by_the_policy_and_is_the_one_to_connect_to() -> None:
    verdict, addresses = await Egress(allow_private=False).destination(PUBLIC)
    assert verdict.allowed and addresses == (PUBLIC,)
    verdict, addresses = await Egress(allow_private=False).destination("169.254.169.254")
    assert not verdict.allowed and addresses == ()
    verdict, addresses = await Egress(allow_private=True).destination("169.254.169.254")
    assert verdict.allowed and addresses == ("169.254.169.254",)


def test_refused_log_keeps_the_first_refusals_and_counts_the_rest() -> None:
    log = RefusedLog(cap=2)
    for i in range(5):
        log.add(Refusal(f"http://10.0.0.{i}/", "private"))
    assert [r.url for r in log.refusals] == ["http://10.0.0.0/", "http://10.0.0.1/"]
    assert log.dropped == 3
    assert len(log) == 5
    assert log.facts() == [
        {"url": "http://10.0.0.0/", "reason": "private"},
        {"url": "http://10.0.0.1/", "reason": "private"},
    ]


def test_refused_log_remembers_the_navigation_even_past_its_cap() -> None:
    log = RefusedLog(cap=1)
    log.add(Refusal("http://10.0.0.1/a.png", "private"))
    log.add(Refusal("http://10.0.0.1/", "private", navigation=True))
    assert log.navigation == Refusal("http://10.0.0.1/", "private", navigation=True)


def paused(
    url: str, *, frame: str = "MAIN", kind: str = "Image", rid: str = "r1"
) -> dict[str, Any]:
    """A `Fetch.requestPaused` event as Chromium sends it (the fields the filter reads)."""
    return {"requestId": rid, "request": {"url": url}, "frameId": frame, "resourceType": kind}


def late(source: str) -> float:
    """How many late pieces of evidence from `source` this process dropped so far."""
    value = REGISTRY.get_sample_value("pressroom_late_evidence_total", {"source": source})
    return value or 0.0


async def test_request_filter_continues_allowed_and_fails_refused_requests() -> None:
    evidence = Evidence()
    gate = RequestFilter(egress(), main_frame_id="MAIN", evidence=evidence)
    assert await gate.answer(paused("data:image/png;base64,AA==")) == (
        "Fetch.continueRequest",
        {"requestId": "r1"},
    )
    method, params = await gate.answer(paused("http://169.254.169.254/", rid="r2"))
    assert (method, params) == (
        "Fetch.failRequest",
        {"requestId": "r2", "errorReason": "BlockedByClient"},
    )
    assert [r.url for r in evidence.refused.refusals] == ["http://169.254.169.254/"]
    assert evidence.refused.navigation is None


async def test_only_a_main_frame_document_refusal_is_a_navigation() -> None:
    evidence = Evidence()
    gate = RequestFilter(egress(), main_frame_id="MAIN", evidence=evidence)
    await gate.answer(paused("http://10.0.0.1/frame", frame="CHILD", kind="Document"))
    assert evidence.refused.navigation is None
    await gate.answer(paused("http://10.0.0.1/", kind="Document"))
    assert evidence.refused.navigation is not None
    assert evidence.refused.navigation.url == "http://10.0.0.1/"


async def test_a_refusal_decided_after_the_job_ended_is_dropped_and_counted() -> None:
    """The verdict on a name comes after a lookup; if the job's render ends meanwhile (its
    evidence sealed), the refusal is recorded nowhere: not on the job that was read, and
    not on any other (a filter and its evidence are one job's for good)."""
    answer = asyncio.Event()

    async def slow(host: str) -> Sequence[str]:
        await answer.wait()
        return ["127.0.0.1"]

    evidence = Evidence()
    gate = RequestFilter(Egress(allow_private=False, resolve=slow), "MAIN", evidence)
    before = late("filter")
    pending = asyncio.ensure_future(gate.answer(paused("http://slow.example/pixel.png")))
    await asyncio.sleep(0)  # the lookup has started
    evidence.seal()
    answer.set()
    method, _ = await pending
    assert method == "Fetch.failRequest"
    assert len(evidence.refused) == 0
    assert late("filter") == before + 1 and evidence.late == 1


async def test_a_request_after_the_job_ended_is_failed_unjudged_and_counted() -> None:
    calls: list[str] = []
    evidence = Evidence()
    gate = RequestFilter(
        Egress(allow_private=False, resolve=fake_dns({"late.example": [PUBLIC]}, calls)),
        "MAIN",
        evidence,
    )
    evidence.seal()
    before = late("request")
    method, params = await gate.answer(paused("http://late.example/timer"))
    assert (method, params["errorReason"]) == ("Fetch.failRequest", "BlockedByClient")
    assert calls == []  # not even looked up
    assert late("request") == before + 1 and len(evidence.refused) == 0


def test_a_scheme_refusal_needs_no_lookup_and_says_why() -> None:
    assert refused_scheme("file:///etc/passwd") == "scheme file: is not allowed"
    assert refused_scheme("chrome://settings") == "scheme chrome: is not allowed"
    assert refused_scheme("https://example.com/") is None
    assert refused_scheme("data:text/plain,x") is None


async def test_long_urls_are_clipped_in_refusals() -> None:
    evidence = Evidence()
    gate = RequestFilter(egress(), main_frame_id="MAIN", evidence=evidence)
    await gate.answer(paused("file:///" + "a" * 5000))
    assert len(evidence.refused.refusals[0].url) <= 301
