"""What `options.sign` costs per job on the shared invoice (`bench/workload/`), through a
real finishing worker (the renderer's path), with a throwaway RSA-2048 or P-256 signer
made here. A timestamp adds one round trip to the operator's TSA, not measured here.

    .venv/bin/python bench/sign_cost.py [--count 20]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.finishing_cost import printed
from services.core.model.errors import FinishingError
from services.core.model.pageoptions import PageOptions, Sign
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.renderer import finishing
from services.renderer.finishing.worker import Finisher

OPTIONS = {
    "sign (invisible)": PageOptions(sign=Sign()),
    "sign (visible)": PageOptions(sign=Sign(visible=True, box=[40, 40, 300, 110])),
}


def identity(folder: Path, key: Any) -> Settings:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Bench Signer")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Settings(signing_cert=str(folder / "cert.pem"), signing_key=str(folder / "key.pem"))


async def main(count: int) -> None:
    pdf = await printed()
    limits = TemplateLimits(1024 * 2**20, 60.0, 50_000_000)
    keys = {
        "RSA-2048": rsa.generate_private_key(65537, 2048),
        "P-256": ec.generate_private_key(ec.SECP256R1()),
    }
    print(f"shared invoice: {pdf.pages} pages, {len(pdf.data)} bytes; {count} jobs each")
    async with Jail(1, limits, what="finishing the PDF", error=FinishingError) as jail:
        for key_name, key in keys.items():
            with tempfile.TemporaryDirectory() as folder:
                finisher = Finisher(jail, finishing.Context.of(identity(Path(folder), key)))
            for name, options in OPTIONS.items():
                first = time.perf_counter()
                signed = await finisher.finished(pdf, options)
                first_ms = (time.perf_counter() - first) * 1000
                started = time.perf_counter()
                for _ in range(count):
                    await finisher.finished(pdf, options)
                each = (time.perf_counter() - started) * 1000 / count
                grown = len(signed.data) - len(pdf.data)
                timing = f"{each:7.1f} ms/job (first {first_ms:.0f} ms)"
                print(f"{key_name:9} {name:17} {timing}, +{grown} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    asyncio.run(main(parser.parse_args().count))
