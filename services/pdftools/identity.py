"""A signing identity a job brings (Gotenberg's `/forms/pdf/sign`): its certificate and
private key read from the uploaded files (a PKCS#12 with its password, or PEM
certificate and key), checked at the gateway so a wrong password or a key of another
certificate is a 400 naming the form field, then carried in the `sign` step as one
text (`identity`) that `core/log/jobsecrets` seals with the server key like the job's
passwords: neither the log nor PostgreSQL holds the key in plain text, and the uploaded
files themselves are never stored (they are not job files).
"""

from __future__ import annotations

import base64
import datetime
import enum

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from services.core.model.errors import RequestError
from services.pdftools.signer import SigningKey

_DER = serialization.Encoding.DER


class Part(enum.StrEnum):
    """What each problem names: the form fields Gotenberg's sign route takes."""

    CERTIFICATE = "certificate"
    KEY = "key"
    PASSWORD = "certificatePassword"


class _Carried(msgspec.Struct):
    certificate: bytes
    key: bytes
    chain: list[bytes]


def uploaded(certificate: bytes, key: bytes | None, password: str) -> SigningKey:
    """The identity of an uploaded PKCS#12 (`certificate`, opened with `password`) or
    PEM certificate with its PEM key (in `key`, or in the certificate's own file)."""
    if certificate.lstrip().startswith(b"-----BEGIN"):
        cert, chain = _pem_certificates(certificate)
        private = _pem_key(key if key is not None else certificate, password)
    else:
        cert, private, chain = _pkcs12(certificate, password)
    if _public(private) != _public(cert):
        where = Part.KEY if key is not None else Part.CERTIFICATE
        raise RequestError("the private key is not the key of the certificate", field=where)
    now = datetime.datetime.now(datetime.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise RequestError(
            f"the certificate is valid only from {cert.not_valid_before_utc:%Y-%m-%d} to "
            f"{cert.not_valid_after_utc:%Y-%m-%d}",
            field=Part.CERTIFICATE,
        )
    return SigningKey(
        certificate=cert.public_bytes(_DER),
        key=private.private_bytes(_DER, serialization.PrivateFormat.PKCS8, _NONE),
        chain=tuple(c.public_bytes(_DER) for c in chain),
    )


def carried(identity: SigningKey) -> str:
    """`identity` as the `sign` step's `identity` text (sealed on its way to the log)."""
    struct = _Carried(identity.certificate, identity.key, list(identity.chain))
    return base64.b64encode(msgspec.msgpack.encode(struct)).decode("ascii")


def opened(text: str) -> SigningKey:
    """The identity a `sign` step carries (opened by `jobsecrets` before the work runs);
    `RequestError` naming `identity` when it is not one."""
    try:
        struct = msgspec.msgpack.decode(base64.b64decode(text, validate=True), type=_Carried)
    except (ValueError, msgspec.DecodeError):
        raise RequestError("the signing identity cannot be read", field="identity") from None
    return SigningKey(struct.certificate, struct.key, tuple(struct.chain))


def checked(text: str) -> None:
    """Refuse (`RequestError` naming `identity`) a `sign` step's identity that is not a
    certificate with its own private key: a `POST /jobs` caller may send one, which only
    the Gotenberg sign route makes otherwise."""
    own = opened(text)
    try:
        cert = x509.load_der_x509_certificate(own.certificate)
        private = serialization.load_der_private_key(own.key, None)
    except (TypeError, ValueError):
        raise RequestError(
            "the signing identity is not a certificate and key", field="identity"
        ) from None
    if _public(private) != _public(cert):
        raise RequestError("the private key is not the key of the certificate", field="identity")


_NONE = serialization.NoEncryption()


def _pkcs12(
    data: bytes, password: str
) -> tuple[x509.Certificate, PrivateKeyTypes, list[x509.Certificate]]:
    try:
        private, cert, chain = pkcs12.load_key_and_certificates(data, password.encode() or None)
    except ValueError:
        # cryptography cannot tell a wrong password from a file that is no PKCS#12
        raise RequestError(
            "the PKCS#12 certificate cannot be opened: wrong password, or not a PKCS#12 "
            "file (or a PEM certificate)",
            field=Part.PASSWORD if password else Part.CERTIFICATE,
        ) from None
    if private is None or cert is None:
        raise RequestError(
            "the PKCS#12 file must hold a certificate and its private key",
            field=Part.CERTIFICATE,
        )
    return cert, private, list(chain)


def _pem_certificates(data: bytes) -> tuple[x509.Certificate, list[x509.Certificate]]:
    try:
        first, *rest = x509.load_pem_x509_certificates(data)
    except ValueError:
        message = "the certificate is not a PEM certificate"
        raise RequestError(message, field=Part.CERTIFICATE) from None
    return first, rest


def _pem_key(data: bytes, password: str) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(data, password.encode() or None)
    except TypeError:  # encrypted without a password, or a password for a plain key
        raise RequestError(
            "the private key is encrypted: send its password"
            if not password
            else "the private key is not encrypted: send no password",
            field=Part.PASSWORD,
        ) from None
    except ValueError:
        raise RequestError(
            "the private key cannot be read: a wrong password, or not a PEM private key",
            field=Part.PASSWORD if password else Part.KEY,
        ) from None


def _public(owner: PrivateKeyTypes | x509.Certificate) -> bytes:
    return owner.public_key().public_bytes(_DER, serialization.PublicFormat.SubjectPublicKeyInfo)
