"""Gotenberg 9's `/forms/pdf/sign` on the whole stack: `curl --form` lines with a
certificate made here, the signed PDFs checked by pyHanko's validation against that
certificate as the only trust root; the key never in plain text in PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import zipfile
from pathlib import Path

import asyncpg
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import async_validate_pdf_signature
from pyhanko_certvalidator import ValidationContext

from tests.conftest import Stack
from tests.integration.gotenberg_forms import settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl
from tests.integration.test_gotenberg_pdfengines import blank_pdf


def identity(folder: Path) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    """A self-signed certificate and its key, written as cert.pem, key.pem and
    signer.p12 (password `s3cret-pass`)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Ana Tester")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.KeyUsage(True, True, False, False, False, False, False, False,
                                     False), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    (folder / "signer.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"signer", key, cert, None,
        serialization.BestAvailableEncryption(b"s3cret-pass")))  # fmt: skip
    return cert, key


async def signatures(data: bytes, cert: x509.Certificate) -> list[tuple[bool, str, str, str]]:
    """Each signature's pyHanko verdict with `cert` as the only trust root (valid, intact
    and trusted), and its signer, reason and location."""
    trusted = ValidationContext(
        trust_roots=[asn1_x509.Certificate.load(cert.public_bytes(serialization.Encoding.DER))],
        allow_fetching=False,
    )
    found = []
    for signature in PdfFileReader(io.BytesIO(data)).embedded_signatures:
        status = await async_validate_pdf_signature(signature, trusted)
        found.append((
            status.bottom_line,
            signature.signer_cert.subject.human_friendly,
            str(signature.sig_object.get("/Reason", "")),
            str(signature.sig_object.get("/Location", "")),
        ))  # fmt: skip
    return found


async def recorded_input(stack: Stack, job_id: str) -> str:
    """The job's input as PostgreSQL keeps it (`jobs.input`), once the projection has it."""
    assert (await stack.finished(job_id))["status"] == "done"
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        raw = await conn.fetchval("SELECT input FROM jobs WHERE id = $1", job_id)
    finally:
        await conn.close()
    assert raw is not None
    return str(raw)


async def test_pdfs_signed_with_an_uploaded_pkcs12_answer_a_zip_of_valid_signatures(
    stack: Stack, tmp_path: Path
) -> None:
    cert, _ = identity(tmp_path)
    first, second = blank_pdf(tmp_path / "a.pdf", 2), blank_pdf(tmp_path / "b.pdf", 1)
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/sign", "--form", f"files=@{first}", "--form", f"files=@{second}",
        "--form", f"files=@{tmp_path / 'signer.p12'}", "--form", "certificate=signer.p12",
        "--form", "certificatePassword=s3cret-pass", "--form", "reason=Approved",
        "--form", "location=Paris", "--form", "contactInfo=ana@example.com",
        "--form", "name=Ana", "--form", "pades=true",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert sorted(archive.namelist()) == ["a.pdf", "b.pdf"]  # not the certificate
        for name in ("a.pdf", "b.pdf"):
            found = await signatures(archive.read(name), cert)
            assert found == [(True, "Common Name: Ana Tester", "Approved", "Paris")], name

    # the key crossed the log and PostgreSQL sealed (the same submission): neither it nor
    # the password in clear, and the PKCS#12 is no job file
    job_id = headers["pressroom-job-id"]
    recorded = await recorded_input(stack, job_id)
    sealed = json.loads(recorded)["pdf"]["steps"][0]["identity"]
    assert sealed.startswith("sealed2:"), recorded
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
        timeline = (await response.json())["events"]
    assert timeline[0]["pdf"]["steps"][0]["identity"] == "(hidden)"
    assert sealed not in str(timeline)
    assert "s3cret-pass" not in recorded and "signer.p12" not in recorded


async def test_a_pem_certificate_and_key_sign_one_pdf_and_bad_fields_are_named(
    stack: Stack, tmp_path: Path
) -> None:
    cert, _ = identity(tmp_path)
    pdf = blank_pdf(tmp_path / "report.pdf", 1)
    pem = ("--form", f"files=@{tmp_path / 'cert.pem'}", "--form", f"files=@{tmp_path / 'key.pem'}",
           "--form", "certificate=cert.pem", "--form", "key=key.pem")  # fmt: skip
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/sign", "--form", f"files=@{pdf}", *pem,
        "--form", "reason=Reviewed",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    assert await signatures(body, cert) == [(True, "Common Name: Ana Tester", "Reviewed", "")]

    p12 = ("--form", f"files=@{tmp_path / 'signer.p12'}", "--form", "certificate=signer.p12")
    refused = {  # each field, what the form sends, and why it is refused
        "certificatePassword": ((*p12, "--form", "certificatePassword=wrong"), b""),
        "certificate": (("--form", "certificate=missing.p12"), b""),
        # Gotenberg 9's name for the timestamp authority, refused for what it asks
        "timestampUrl": (
            (*pem, "--form", "timestampUrl=http://127.0.0.1:9/tsa"),
            b"not timestamped",
        ),
        "tsaUrl": ((*pem, "--form", "tsaUrl=http://127.0.0.1:9/tsa"), b"does not know"),
        "contactInfo": ((*pem, "--form", f"contactInfo={'x' * 201}"), b""),
    }
    for field, (args, why) in refused.items():
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/pdf/sign", "--form", f"files=@{pdf}", *args
        )
        assert status == 400 and field.encode() in body and why in body, (field, body)
