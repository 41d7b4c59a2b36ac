"""TLS between the services and NATS, with a CA of the test's own (as cert-manager issues
one in deploy/k8s): nats-server configured as deploy/k8s configures it (`tls` with
`handshake_first`, the services' identities), the services' settings as there.

Verifies: a service that trusts the CA connects, makes its streams and publishes; one
that does not trust it stops at start with an error naming the settings; a client that
does not speak TLS gets nowhere; a service configured for TLS never talks in plain text
to a server that offers none (a network that strips TLS gets nothing); and where NATS
verifies clients, the service's certificate (`PRESSROOM_NATS_TLS_CERT`/`_KEY`) gets it in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.model import events
from services.core.runtime.settings import Settings, SettingsError
from tests.conftest import NATS_SEEDS, NatsServer
from tests.deploy.k8s import K8S
from tests.pki import CLIENT, SERVER, Pki, new_pki

SHIPPED = K8S / "components" / "nats-tls" / "nats-tls.conf"
"""The `tls` block deploy/k8s gives NATS, whose files live under `/etc/nats-tls/`."""


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return new_pki(tmp_path / "pki")


def tls_block(pki: Pki, *, verify: bool = False) -> str:
    """deploy/k8s' `tls` block with this test's files (`verify`: and asking clients for a
    certificate of the same CA)."""
    cert, key = pki.issue("nats", SERVER)
    block = SHIPPED.read_text()
    block = block.replace("/etc/nats-tls/tls.crt", str(cert))
    block = block.replace("/etc/nats-tls/tls.key", str(key))
    assert str(cert) in block and str(key) in block and "handshake_first: true" in block
    if verify:
        block = (
            block.rstrip().removesuffix("}") + f'  ca_file: "{pki.ca_file}"\n  verify: true\n}}\n'
        )
    return block


@pytest.fixture
def tls_nats(tmp_path: Path, pki: Pki) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats", config=tls_block(pki))
    server.start()
    yield server
    server.stop()


def renderer(server: NatsServer, **tls: str) -> Settings:
    return Settings(
        nats_url=f"nats://127.0.0.1:{server.port}", nats_nkey_seed=NATS_SEEDS[Role.RENDERER], **tls
    )


async def test_a_service_that_trusts_the_ca_works_over_tls(tls_nats: NatsServer, pki: Pki):
    settings = renderer(tls_nats, nats_tls_ca=str(pki.ca_file))
    async with bus.open_bus(settings, name="renderer", role=Role.RENDERER) as (_, js):
        started = events.JobStarted(job_id="j1", attempt=1, worker="w")
        assert await bus.publish(js, started)
    assert not tls_nats.refusals()


async def test_a_service_that_does_not_trust_the_server_stops_at_start(tls_nats: NatsServer):
    # The URL's scheme asks for TLS, with the system's CAs, which never signed it.
    url = f"tls://127.0.0.1:{tls_nats.port}"
    settings = Settings(nats_url=url, nats_nkey_seed=NATS_SEEDS[Role.RENDERER])
    with pytest.raises(SettingsError, match="PRESSROOM_NATS_TLS"):
        await bus.connect(settings, name="renderer", role=Role.RENDERER)


async def test_a_client_that_does_not_speak_tls_gets_nowhere(tls_nats: NatsServer):
    with pytest.raises(Exception):  # noqa: B017 (whatever nats-py makes of the silence)
        await nats.connect(
            f"nats://127.0.0.1:{tls_nats.port}",
            nkeys_seed_str=NATS_SEEDS[Role.RENDERER],
            allow_reconnect=False,
            connect_timeout=2,
        )


async def test_a_service_configured_for_tls_never_talks_plain(tmp_path: Path, pki: Pki):
    """A server (or a network in between) that offers no TLS gets no plain-text CONNECT:
    the service stops at start instead."""
    plain = NatsServer(tmp_path / "plain")
    plain.start()
    try:
        with pytest.raises(SettingsError, match="PRESSROOM_NATS_TLS"):
            await bus.connect(renderer(plain, nats_tls_ca=str(pki.ca_file)), name="renderer")
        assert not [line for line in plain.refusals() if "nkey" in line]
    finally:
        plain.stop()


async def test_where_nats_verifies_clients_the_service_s_certificate_gets_it_in(
    tmp_path: Path, pki: Pki
):
    server = NatsServer(tmp_path / "mtls", config=tls_block(pki, verify=True))
    server.start()
    try:
        cert, key = pki.issue("renderer", CLIENT)
        ca = str(pki.ca_file)
        with pytest.raises(SettingsError):
            await bus.connect(renderer(server, nats_tls_ca=ca), name="renderer")
        settings = renderer(server, nats_tls_ca=ca, nats_tls_cert=str(cert), nats_tls_key=str(key))
        nc = await bus.connect(settings, name="renderer", role=Role.RENDERER)
        assert nc.is_connected
        await nc.close()
    finally:
        server.stop()
