"""The renderer's signing identity (`PRESSROOM_SIGNING_*`): read and checked once, when
the renderer starts, so a missing file, a wrong password or a key of another certificate
stops it with a line naming the variable; then carried to the finishing workers in
`Context` (a worker never reads the environment), where `pyhanko_signer` makes pyHanko's
signer of it once per worker."""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field
from typing import Any

from asn1crypto import keys as asn1_keys
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import ECDSA, EllipticCurvePrivateKey
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from pyhanko.sign import signers
from pyhanko_certvalidator.registry import SimpleCertificateStore
from pyhanko_certvalidator.util import get_pyca_cryptography_hash

from services.core.runtime.settings import Settings, SettingsError

_DER = serialization.Encoding.DER


@dataclass(frozen=True)
class SigningKey:
    """The certificate (DER), its private key (PKCS#8 DER, already decrypted: it crosses
    to the finishing worker over a pipe, never to a log), the intermediates embedded in
    each signature, and the timestamp server's URL (empty: none)."""

    certificate: bytes
    key: bytes = field(repr=False)
    chain: tuple[bytes, ...] = ()
    tsa_url: str = ""


def signing_key_of(settings: Settings) -> SigningKey | None:
    """The identity `settings` configure (None when neither file is set); `SettingsError`
    naming the variable whose file is missing, unreadable or wrong."""
    if not settings.signing_cert and not settings.signing_key:
        return None
    certificate = _certificate(settings.signing_cert)
    key = _private_key(settings.signing_key, settings.signing_key_password)
    if _public(key) != _public(certificate):
        raise SettingsError(
            f"PRESSROOM_SIGNING_KEY={settings.signing_key!r} is invalid: it is not the key "
            f"of the certificate in PRESSROOM_SIGNING_CERT ({settings.signing_cert!r})"
        )
    return SigningKey(
        certificate=certificate.public_bytes(_DER),
        key=key.private_bytes(_DER, serialization.PrivateFormat.PKCS8, _NO_PASSWORD),
        chain=tuple(c.public_bytes(_DER) for c in _chain(settings.signing_chain)),
        tsa_url=settings.signing_tsa_url,
    )


_NO_PASSWORD = serialization.NoEncryption()


def _read(variable: str, path: str) -> bytes:
    if not path:
        raise SettingsError(
            f"{variable} must be set too: signing needs PRESSROOM_SIGNING_CERT and "
            "PRESSROOM_SIGNING_KEY (PEM files)"
        )
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise SettingsError(f"{variable}={path!r} cannot be read: {exc.strerror}") from None


def _certificate(path: str) -> x509.Certificate:
    data = _read("PRESSROOM_SIGNING_CERT", path)  # outside: SettingsError is a ValueError
    try:
        certificate = x509.load_pem_x509_certificate(data)
    except ValueError:
        raise SettingsError(
            f"PRESSROOM_SIGNING_CERT={path!r} is invalid: not a PEM certificate"
        ) from None
    now = datetime.datetime.now(datetime.UTC)
    if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
        raise SettingsError(
            f"PRESSROOM_SIGNING_CERT={path!r} is invalid: valid only from "
            f"{certificate.not_valid_before_utc:%Y-%m-%d} "
            f"to {certificate.not_valid_after_utc:%Y-%m-%d}"
        )
    return certificate


def _private_key(path: str, password: str) -> PrivateKeyTypes:
    data = _read("PRESSROOM_SIGNING_KEY", path)
    try:
        return serialization.load_pem_private_key(data, password.encode() or None)
    except (TypeError, ValueError) as exc:
        raise SettingsError(
            f"PRESSROOM_SIGNING_KEY={path!r} is invalid: {exc} (a PEM private key; "
            "PRESSROOM_SIGNING_KEY_PASSWORD is its password when it is encrypted)"
        ) from None


def _chain(path: str) -> list[x509.Certificate]:
    if not path:
        return []
    data = _read("PRESSROOM_SIGNING_CHAIN", path)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise SettingsError(
            f"PRESSROOM_SIGNING_CHAIN={path!r} is invalid: not PEM certificates"
        ) from None


def _public(owner: PrivateKeyTypes | x509.Certificate) -> bytes:
    return owner.public_key().public_bytes(_DER, serialization.PublicFormat.SubjectPublicKeyInfo)


class _KeptKeySigner(signers.SimpleSigner):
    """pyHanko's `SimpleSigner` with the key loaded once: its own loads the key again for
    every signature, and loading checks an RSA key, a cost paid again per job for nothing
    (`bench/sign_cost.py` measures a signature's cost, docs/benchmarks.md)."""

    def __init__(self, identity: SigningKey) -> None:
        self.loaded = serialization.load_der_private_key(identity.key, None)
        super().__init__(
            signing_cert=asn1_x509.Certificate.load(identity.certificate),
            signing_key=asn1_keys.PrivateKeyInfo.load(identity.key),
            cert_registry=SimpleCertificateStore.from_certs(  # type: ignore[no-untyped-call]
                [asn1_x509.Certificate.load(der) for der in identity.chain]
            ),
        )

    def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
        mechanism = self.get_signature_mechanism_for_digest(digest_algorithm).signature_algo
        digest: Any = get_pyca_cryptography_hash(digest_algorithm)
        if mechanism == "rsassa_pkcs1v15" and isinstance(self.loaded, RSAPrivateKey):
            return self.loaded.sign(data, PKCS1v15(), digest)
        if mechanism == "ecdsa" and isinstance(self.loaded, EllipticCurvePrivateKey):
            return self.loaded.sign(data, ECDSA(digest))
        return super().sign_raw(data, digest_algorithm)  # PSS, EdDSA…: pyHanko's way


@functools.lru_cache(maxsize=2)
def pyhanko_signer(identity: SigningKey) -> signers.SimpleSigner:
    """pyHanko's signer for `identity`, made once per finishing worker."""
    return _KeptKeySigner(identity)
