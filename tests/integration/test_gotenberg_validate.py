"""Gotenberg 9's `/forms/pdf/validate` on the whole stack: `curl --form` lines, answers
in Gotenberg's JSON shape from Pressroom's own checks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pikepdf

from tests.conftest import Stack
from tests.integration.gotenberg_forms import settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl
from tests.integration.test_gotenberg_pdfengines import blank_pdf


async def test_pdfs_are_judged_against_the_profile_asked(stack: Stack, tmp_path: Path) -> None:
    plain = blank_pdf(tmp_path / "plain.pdf", 1)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/convert", "--form", f"files=@{plain}", "--form", "pdfa=PDF/A-2b"
    )
    assert status == 200, body
    (tmp_path / "archive.pdf").write_bytes(body)

    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/validate", "--form", f"files=@{tmp_path / 'archive.pdf'}",
        "--form", f"files=@{plain}", "--form", "profile=PDF/A-2b",
    )  # fmt: skip
    assert status == 200 and headers["content-type"].startswith("application/json"), body
    answer = json.loads(body)
    assert answer["archive.pdf"] == {"profile": "PDF/A-2b", "compliant": True, "violations": []}
    assert answer["plain.pdf"]["compliant"] is False
    assert answer["plain.pdf"]["violations"][0] == {
        "check": "pdfaid", "message": "the document claims no PDF/A level"
    }  # fmt: skip

    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/validate", "--form", f"files=@{tmp_path / 'archive.pdf'}",
        "--form", 'profile=["PDF/A-3b"]',
    )  # fmt: skip
    verdict = json.loads(body)["archive.pdf"]
    assert status == 200 and verdict["compliant"] is False, body
    assert verdict["violations"] == [
        {"check": "pdfaid", "message": "the document claims PDF/A-2b"}
    ]  # fmt: skip

    for profile, field in (("PDF/A-4", b"profile"), ("PDF/X-4", b"profile")):
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/pdf/validate", "--form", f"files=@{plain}",
            "--form", f"profile={profile}",
        )  # fmt: skip
        assert status == 400 and field in body, body
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/validate", "--form", f"files=@{plain}"
    )
    assert status == 400 and b"profile" in body, body

    locked = tmp_path / "locked.pdf"
    with pikepdf.open(plain) as pdf:
        pdf.save(locked, encryption=pikepdf.Encryption(user="open-sesame", owner="owner-pass"))
    for extra in ((), ("--form", "password=wrong-one")):
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/pdf/validate", "--form", f"files=@{locked}",
            "--form", "profile=PDF/UA-1", *extra,
        )  # fmt: skip
        assert status == 400 and b"'password'" in body, body
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/validate", "--form", f"files=@{locked}",
        "--form", "profile=PDF/UA-1", "--form", "password=open-sesame",
    )  # fmt: skip
    verdict = json.loads(body)["locked.pdf"]
    assert status == 200 and verdict["compliant"] is False, body
    assert {"check": "pdfuaid", "message": "the document claims no PDF/UA part"} in verdict[
        "violations"
    ]
