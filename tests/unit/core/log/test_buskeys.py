"""A service's credentials and TLS settings: bad ones stop it at start, naming the
variable; URLs are logged without their passwords."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.log import buskeys
from services.core.runtime.settings import Settings, SettingsError


def test_a_new_seed_is_a_user_seed_with_its_public_key():
    seed = buskeys.new_seed()
    assert seed.startswith("SU") and len(seed) == 58
    assert buskeys.public_key(seed).startswith("U")
    assert Settings.from_env({"PRESSROOM_NATS_NKEY_SEED": seed}).nats_nkey_seed == seed


def test_a_seed_that_is_not_one_is_refused_naming_its_variable():
    with pytest.raises(SettingsError, match="PRESSROOM_NATS_NKEY_SEED"):
        Settings.from_env({"PRESSROOM_NATS_NKEY_SEED": "not-a-seed"})
    seed = buskeys.new_seed()
    flipped = "A" if seed[20] != "A" else "B"
    broken = seed[:20] + flipped + seed[21:]  # its checksum no longer holds
    with pytest.raises(SettingsError, match="PRESSROOM_NATS_NKEY_SEED is invalid"):
        buskeys.connect_options(Settings(nats_nkey_seed=broken))


def test_tls_is_used_when_asked_for_and_its_files_must_be_readable(tmp_path: Path):
    assert buskeys.connect_options(Settings()) == {}
    assert buskeys.connect_options(Settings(nats_url="tls://nats:4222"))["tls_handshake_first"]
    with pytest.raises(SettingsError, match="PRESSROOM_NATS_TLS_CA"):
        buskeys.connect_options(Settings(nats_tls_ca=str(tmp_path / "missing.crt")))
    with pytest.raises(SettingsError, match="PRESSROOM_NATS_TLS_CERT and PRESSROOM_NATS_TLS_KEY"):
        Settings(nats_tls_cert=str(tmp_path / "c.crt"))


def test_urls_are_logged_without_their_passwords():
    urls = "nats://svc:s3cret@nats-0:4222,nats://nats-1:4222"
    assert buskeys.redacted(urls) == "nats://svc:***@nats-0:4222,nats://nats-1:4222"
