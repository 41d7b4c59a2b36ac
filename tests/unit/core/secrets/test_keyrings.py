"""Keys that rotate: the server keyring, download-link keys, and what a wrong key does.

Verifies: a value sealed with the primary key names it and opens with any keyring that
holds that key, first or not; a keyring without it refuses, naming the missing key's id;
a value sealed before key ids still opens; `PRESSROOM_SERVER_KEY` takes several keys and
names the malformed one (never showing it), and a missing key stops start-up naming the
variable; a download link signed with a retired `PRESSROOM_URL_SECRET` key still verifies
while that key is listed, and is refused once it is dropped.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import pytest

from services.core.model.errors import NotFound
from services.core.objectstore.storage import LocalStorage
from services.core.runtime.settings import Settings, SettingsError
from services.core.secrets import crypto

OLD, NEW = os.urandom(32), os.urandom(32)


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_a_sealed_value_opens_with_every_keyring_that_holds_its_key():
    sealed = crypto.ServerKeys((OLD,)).seal("whsec_abc", "ten_1")
    assert crypto.sealed_with(sealed) == crypto.key_id(OLD)
    assert crypto.ServerKeys((NEW, OLD)).unseal(sealed, "ten_1") == "whsec_abc"
    resealed = crypto.ServerKeys((NEW, OLD)).seal("whsec_abc", "ten_1")
    assert crypto.sealed_with(resealed) == crypto.key_id(NEW)
    with pytest.raises(ValueError, match=crypto.key_id(OLD)):
        crypto.ServerKeys((NEW,)).unseal(sealed, "ten_1")
    with pytest.raises(ValueError, match="wrong key or owner"):
        crypto.ServerKeys((OLD,)).unseal(sealed, "ten_2")


def test_a_value_sealed_before_key_ids_opens_with_any_key_of_the_ring():
    """`sealed1:` values: AES-GCM with the one key of the time, no key id."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    body = AESGCM(OLD).encrypt(nonce, b"whsec_old", b"job_1")
    legacy = "sealed1:" + base64.urlsafe_b64encode(nonce + body).decode()
    assert crypto.sealed_with(legacy) is None
    assert crypto.ServerKeys((NEW, OLD)).unseal(legacy, "job_1") == "whsec_old"
    with pytest.raises(ValueError):
        crypto.ServerKeys((NEW,)).unseal(legacy, "job_1")


def test_the_server_key_setting_takes_a_keyring_and_names_a_bad_key_without_showing_it():
    settings = Settings.from_env({"PRESSROOM_SERVER_KEY": f"{b64(NEW)} {b64(OLD)}"})
    assert settings.server_keys().keys == (NEW, OLD)
    assert settings.server_key_bytes() == NEW
    bad = b64(os.urandom(16))
    with pytest.raises(SettingsError, match="key 2 of 2 must be 32 bytes") as raised:
        Settings.from_env({"PRESSROOM_SERVER_KEY": f"{b64(NEW)},{bad}"})
    assert "PRESSROOM_SERVER_KEY" in str(raised.value)
    with pytest.raises(SettingsError, match="PRESSROOM_SERVER_KEY must be set"):
        Settings().server_keys()


async def test_a_link_signed_with_a_retired_url_key_verifies_until_the_key_is_dropped(
    tmp_path: Path,
):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "a.pdf").write_bytes(b"%PDF")
    before = LocalStorage(str(tmp_path), "http://p.test", "old-secret")
    url = await before.url("jobs/a.pdf", 60)
    expires, sig = url.split("expires=")[1].split("&sig=")
    during = LocalStorage(str(tmp_path), "http://p.test", "new-secret old-secret")
    assert during.verify("jobs/a.pdf", expires, sig).name == "a.pdf"
    fresh = await during.url("jobs/a.pdf", 60)
    after = LocalStorage(str(tmp_path), "http://p.test", "new-secret")
    new_expires, new_sig = fresh.split("expires=")[1].split("&sig=")
    assert after.verify("jobs/a.pdf", new_expires, new_sig).name == "a.pdf"
    with pytest.raises(NotFound):
        after.verify("jobs/a.pdf", expires, sig)
    assert int(expires) > time.time()
