"""A certificate authority of a test's own, as cert-manager would issue certificates from
one: PEM files of a CA and of the certificates it signs; and a throwaway self-signed
signing key for the PDF tools (`signing_key`)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services.pdftools.signer import SigningKey

SERVER = ExtendedKeyUsageOID.SERVER_AUTH
CLIENT = ExtendedKeyUsageOID.CLIENT_AUTH


@dataclass
class Pki:
    """A CA and the certificates it signed, as PEM files."""

    folder: Path
    ca_key: ec.EllipticCurvePrivateKey
    ca: x509.Certificate

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    def issue(self, name: str, *usages: x509.ObjectIdentifier) -> tuple[Path, Path]:
        """A certificate for `name` (and 127.0.0.1) and its key: (cert file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        alt = x509.SubjectAlternativeName(
            [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        )
        cert = (
            _builder(name, key, self.ca.subject)
            .add_extension(alt, critical=False)
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        return _write(self.folder, name, cert, key)


def _builder(
    name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _write(
    folder: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def new_pki(folder: Path) -> Pki:
    """A fresh CA in `folder` (made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pressroom test CA")])
    ca = (
        _builder("pressroom test CA", key, name)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write(folder, "ca", ca, key)
    return Pki(folder, key, ca)


def signing_key(kind: str = "rsa") -> SigningKey:
    """A self-signed certificate and its key (RSA, or `ec` P-256), valid for a day either
    side of now."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if kind == "rsa"
        else ec.generate_private_key(ec.SECP256R1())
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Pressroom PDF Tools Test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    der = serialization.Encoding.DER
    return SigningKey(
        certificate=certificate.public_bytes(der),
        key=key.private_bytes(der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
