"""The renderer's signing identity is read once at start: a missing, unreadable or wrong
file is a `SettingsError` naming its variable (the renderer stops with it); a good one is
carried as DER, the key decrypted and kept out of `repr`."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.core.runtime.settings import Settings, SettingsError
from services.pdftools.signer import signing_key_of
from services.renderer.finishing import Context

PEM = serialization.Encoding.PEM
PASSWORD = "key-password-1"


def write_identity(folder: Path, name: str, days: int = 30) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now + datetime.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )
    crypt = serialization.BestAvailableEncryption(PASSWORD.encode())
    (folder / f"{name}.crt").write_bytes(cert.public_bytes(PEM))
    (folder / f"{name}.key").write_bytes(
        key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, crypt)
    )
    return folder / f"{name}.crt", folder / f"{name}.key"


def settings_of(cert: Path | str, key: Path | str, **more: str) -> Settings:
    environ = {"PRESSROOM_SIGNING_CERT": str(cert), "PRESSROOM_SIGNING_KEY": str(key)}
    environ.setdefault("PRESSROOM_SIGNING_KEY_PASSWORD", PASSWORD)
    return Settings.from_env(environ | more)


def test_no_signing_files_means_no_identity_and_jobs_asking_sign_fail():
    assert signing_key_of(Settings()) is None
    assert Context.of(Settings()).signing is None


def test_a_good_identity_is_read_with_its_chain_and_the_key_is_not_shown(tmp_path):
    cert, key = write_identity(tmp_path, "signer")
    chain, _ = write_identity(tmp_path, "issuer")
    identity = signing_key_of(settings_of(cert, key, PRESSROOM_SIGNING_CHAIN=str(chain)))
    assert identity is not None and len(identity.chain) == 1
    assert identity.certificate.startswith(b"0\x82") and identity.key
    assert "key=" not in repr(identity)


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"cert": "missing.crt"}, "PRESSROOM_SIGNING_CERT="),
        ({"key": "missing.key"}, "PRESSROOM_SIGNING_KEY="),
        ({"cert": ""}, "PRESSROOM_SIGNING_CERT must be set"),
        ({"key": ""}, "PRESSROOM_SIGNING_KEY must be set"),
        ({"password": "wrong-password"}, "PRESSROOM_SIGNING_KEY="),
        ({"key": "other.key"}, "PRESSROOM_SIGNING_KEY="),
        ({"cert": "signer.key"}, "PRESSROOM_SIGNING_CERT="),
        ({"cert": "expired.crt", "key": "expired.key"}, "PRESSROOM_SIGNING_CERT="),
        ({"chain": "signer.key"}, "PRESSROOM_SIGNING_CHAIN="),
    ],
)
def test_a_bad_file_names_its_variable(tmp_path, change, variable):
    write_identity(tmp_path, "signer")
    write_identity(tmp_path, "other")
    write_identity(tmp_path, "expired", days=-1)
    files = {"cert": "signer.crt", "key": "signer.key"} | change
    paths = {k: str(tmp_path / v) if v else "" for k, v in files.items() if k != "password"}
    more = {"PRESSROOM_SIGNING_KEY_PASSWORD": change.get("password", PASSWORD)}
    if "chain" in paths:
        more["PRESSROOM_SIGNING_CHAIN"] = paths["chain"]
    with pytest.raises(SettingsError) as raised:
        signing_key_of(settings_of(paths["cert"], paths["key"], **more))
    assert variable in str(raised.value)


def test_the_timestamp_server_must_be_an_http_url():
    with pytest.raises(SettingsError, match="PRESSROOM_SIGNING_TSA_URL"):
        Settings.from_env({"PRESSROOM_SIGNING_TSA_URL": "ftp://tsa.example"})
    url = "http://tsa.example/rfc3161"
    assert Settings.from_env({"PRESSROOM_SIGNING_TSA_URL": url}).signing_tsa_url == url
