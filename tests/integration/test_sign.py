"""`sign`: PAdES signatures made on the real stack with a throwaway CA (a root, an
intermediate given as PRESSROOM_SIGNING_CHAIN, a signer whose key is encrypted), then
checked by tools that did not write them: poppler's `pdfsig` says the signature is valid
and names the signer, pyHanko's validator finds it intact, valid and trusted up to the
root, a local RFC 3161 server's timestamp valid, and `pdftoppm` draws a visible one."""

from __future__ import annotations

import asyncio
import datetime
import io
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pikepdf
import pytest
from aiohttp import web
from asn1crypto import keys as asn1_keys
from asn1crypto import tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper
from pyhanko.sign.validation import async_validate_pdf_signature
from pyhanko_certvalidator import ValidationContext

from services.core.runtime.settings import Settings, SettingsError
from services.renderer import main as renderer_main
from tests.conftest import Stack, serving

SIGNER = "Pressroom Test Signer"
KEY_PASSWORD = "key-password-1"
BREAK = "<div style='break-after: page'></div>"
DOCUMENT = f"<h1>Invoice 7</h1><p>page one</p>{BREAK}<p>page two</p>"
BOX = [40, 40, 300, 110]  # points from the lower left corner of an A4 page (595 x 842)
DER = serialization.Encoding.DER
PEM = serialization.Encoding.PEM


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool, usage: x509.ExtensionType
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
    )
    return builder.sign(issuer_key, hashes.SHA256())


def _usage(ca: bool) -> x509.KeyUsage:
    flags = dict.fromkeys(("key_encipherment", "data_encipherment", "key_agreement"), False)
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=not ca,  # non-repudiation: what document signing asks for
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
        **flags,
    )


@dataclass
class Pki:
    root: x509.Certificate
    cert: Path
    key: Path
    chain: Path
    tsa_cert: x509.Certificate
    tsa_key: Any

    def trust(self) -> ValidationContext:
        roots = [asn1_x509.Certificate.load(self.root.public_bytes(DER))]
        return ValidationContext(trust_roots=roots)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A root CA, an intermediate, an RSA signer (key encrypted) and a timestamp authority."""
    folder = tmp_path_factory.mktemp("pki")
    root_key, middle_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    root = _certificate("Test Root", root_key, "Test Root", root_key, True, _usage(True))
    middle = _certificate("Test Issuer", middle_key, "Test Root", root_key, True, _usage(True))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = _certificate(SIGNER, key, "Test Issuer", middle_key, False, _usage(False))
    tsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # pyHanko: RSA only
    stamping = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING])
    tsa = _certificate("Test TSA", tsa_key, "Test Root", root_key, False, stamping)
    encrypted = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
    (folder / "signer.pem").write_bytes(cert.public_bytes(PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, encrypted)
    )
    (folder / "chain.pem").write_bytes(middle.public_bytes(PEM))
    return Pki(root, folder / "signer.pem", folder / "key.pem", folder / "chain.pem", tsa, tsa_key)


@pytest.fixture
async def tsa(pki: Pki) -> AsyncIterator[str]:
    """A local RFC 3161 timestamp server (pyHanko's test authority behind HTTP)."""
    stamper = DummyTimeStamper(
        tsa_cert=asn1_x509.Certificate.load(pki.tsa_cert.public_bytes(DER)),
        tsa_key=asn1_keys.PrivateKeyInfo.load(
            pki.tsa_key.private_bytes(
                DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        ),
    )

    async def answer(request: web.Request) -> web.Response:
        asked = tsp.TimeStampReq.load(await request.read())
        reply = await stamper.async_request_tsa_response(asked)
        return web.Response(body=reply.dump(), content_type="application/timestamp-reply")

    app = web.Application()
    app.router.add_post("/tsa", answer)
    async with serving(app) as base:
        yield f"{base}/tsa"


def signing(settings: Settings, pki: Pki, tsa_url: str = "") -> Settings:
    return replace(
        settings,
        signing_cert=str(pki.cert),
        signing_key=str(pki.key),
        signing_key_password=KEY_PASSWORD,
        signing_chain=str(pki.chain),
        signing_tsa_url=tsa_url,
    )


@pytest.fixture
async def signed(settings: Settings, pki: Pki, tsa: str) -> AsyncIterator[Stack]:
    """The stack, its renderer configured with the throwaway signer and the local TSA."""
    stack = Stack(signing(settings, pki, tsa))
    await stack.start()
    yield stack
    await stack.close()


async def render(stack: Stack, tmp_path: Path, **options: Any) -> Path:
    return await stack.rendered({"html": DOCUMENT, "options": options}, tmp_path)


def pdfsig(pdf: Path, *args: str) -> str:
    command = ["pdfsig", "-no-ocsp", *args, str(pdf)]
    return subprocess.run(command, capture_output=True, check=True, text=True).stdout


async def validated(pdf: Path, pki: Pki, password: str = "") -> Any:
    """pyHanko's verdict on the file's one signature, against the throwaway root."""
    reader = PdfFileReader(io.BytesIO(pdf.read_bytes()))
    if password:
        reader.decrypt(password)
    [signature] = reader.embedded_signatures
    return signature, await async_validate_pdf_signature(signature, pki.trust())


async def test_signed_job_is_valid_for_pdfsig_and_pyhanko_with_a_timestamp(
    signed: Stack, pki: Pki, tmp_path: Path
) -> None:
    pdf = await render(signed, tmp_path, sign={"reason": "Approved", "location": "Berlin"})
    report = pdfsig(pdf)
    assert "Signature Validation: Signature is Valid." in report, report
    assert f"Signer Certificate Common Name: {SIGNER}" in report
    assert "Signature Type: ETSI.CAdES.detached" in report and "Total document signed" in report
    signature, status = await validated(pdf, pki)
    assert status.intact and status.valid and status.trusted, status.pretty_print_details()
    assert signature.sig_object["/Reason"] == "Approved"
    assert signature.sig_object["/Location"] == "Berlin"
    stamp = status.timestamp_validity  # PAdES B-T: the TSA's token over the signature
    assert stamp is not None and stamp.intact and stamp.valid and stamp.trusted
    # The chain reached the root through the intermediate the renderer embedded.
    embedded = signature.signed_data["certificates"]
    assert "Test Issuer" in {c.chosen.subject.native["common_name"] for c in embedded}


async def test_visible_signature_draws_its_appearance_in_its_box(
    signed: Stack, pki: Pki, tmp_path: Path
) -> None:
    pdf = await render(signed, tmp_path, sign={"visible": True, "page": 2, "box": BOX})
    assert "Signature is Valid." in pdfsig(pdf)
    _, status = await validated(pdf, pki)
    assert status.valid and status.trusted
    assert dark_in_box(pdf, page=2) > 200, "page 2 shows no appearance in the box"
    assert dark_in_box(pdf, page=1) == 0, "page 1 has something in the box"
    past = await signed.submit(
        {"html": DOCUMENT, "options": {"sign": {"visible": True, "page": 3, "box": BOX}}}
    )
    failed = await signed.finished(past["id"])
    assert failed["status"] == "failed" and failed["error"]["type"] == "validation", failed
    assert "options.sign.page" in failed["error"]["message"]


def dark_in_box(pdf: Path, page: int) -> int:
    """Dark pixels inside `BOX` on `page`, rendered at 72 dpi (one pixel a point)."""
    ppm = subprocess.run(
        ["pdftoppm", "-f", str(page), "-l", str(page), "-r", "72", "-gray", str(pdf)],
        capture_output=True,
        check=True,
    ).stdout
    magic, width, height, _, pixels = ppm.split(maxsplit=4)
    assert magic == b"P5"
    x1, y1, x2, y2 = BOX
    rows = range(int(height) - y2, int(height) - y1)  # PDF's y grows up, the image's down
    return sum(1 for y in rows for x in range(x1, x2) if pixels[y * int(width) + x] < 128)


async def test_encrypted_file_is_signed_and_stays_encrypted(
    signed: Stack, pki: Pki, tmp_path: Path
) -> None:
    crypt = {"owner_password": "owner-password-1", "user_password": "user-password-1"}
    pdf = await render(signed, tmp_path, encrypt=crypt, sign={"reason": "Sealed"})
    assert "Signature is Valid." in pdfsig(pdf, "-upw", crypt["user_password"])
    _, status = await validated(pdf, pki, crypt["user_password"])
    assert status.intact and status.valid and status.trusted
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(pdf)
    with pikepdf.open(pdf, password=crypt["user_password"]) as opened:
        assert opened.is_encrypted and opened.encryption.R == 6


async def test_renderer_without_a_signing_key_fails_the_job_at_once_naming_the_variables(
    stack: Stack,
) -> None:
    accepted = await stack.submit({"html": DOCUMENT, "options": {"sign": {}}})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "failed" and job["attempts"] == 1, job
    assert job["error"]["type"] == "signing_not_configured"
    assert "PRESSROOM_SIGNING_CERT" in job["error"]["message"]
    assert "PRESSROOM_SIGNING_KEY" in job["error"]["message"]


async def test_an_unreadable_key_stops_the_renderer_at_start_naming_the_variable(
    settings: Settings, pki: Pki, tmp_path: Path
) -> None:
    broken = replace(signing(settings, pki), signing_key=str(tmp_path / "missing.pem"))
    with pytest.raises(SettingsError, match="PRESSROOM_SIGNING_KEY="):
        await asyncio.wait_for(renderer_main.serve(broken, asyncio.Event()), 10)
