"""`pressroom pdf …` and the client's PDF methods against the real stack: the command
run as the real entry point in a subprocess, what it saves read back by qpdf and pikepdf,
and the exit statuses scripts rely on (0 done, 1 a check failed, 2 usage, 3 refused,
4 unreachable)."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path

import pikepdf

from pressroom.client import Client
from tests.conftest import Stack
from tests.integration import hostile_pdfs
from tests.integration.pdf_inputs import TOOLS, chapters, pdftotext, qpdf_check
from tests.integration.test_cli import flags, pressroom

pytestmark = TOOLS


async def test_pdf_commands_save_checked_files_and_exit_as_scripts_expect(
    stack: Stack, tmp_path: Path
) -> None:
    book = await stack.finished((await stack.submit({"html": chapters(4)}))["id"])
    assert book["status"] == "done", book
    source = f"job:{book['id']}"

    status, out, err = await pressroom(
        tmp_path, "pdf", "split", source, "--every", "2", "-o", "parts.zip", *flags(stack)
    )
    assert status == 0, err
    with zipfile.ZipFile(tmp_path / "parts.zip") as archive:
        parts = [archive.read(name) for name in archive.namelist()]
    assert len(parts) == 2 and "parts.zip" in out
    for part in parts:
        qpdf_check(part, tmp_path)

    status, out, err = await pressroom(
        tmp_path, "pdf", "rotate", source, "--angle", "90", "--pages", "2", "--json",
        *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    answer = json.loads(out)
    saved = Path(answer["file"])
    assert saved.name == f"{book['id']}-rotate.pdf", saved
    assert answer["report"]["pages_processed"] == 4
    with pikepdf.open(saved) as pdf:
        assert [int(page.obj.get("/Rotate", 0)) for page in pdf.pages] == [0, 90, 0, 0]

    (tmp_path / "a.pdf").write_bytes(hostile_pdfs.plain(2, text="Alpha"))
    (tmp_path / "b.pdf").write_bytes(hostile_pdfs.plain(3, text="Beta"))
    (tmp_path / "data.csv").write_text("number,total\n1,2\n")
    status, out, err = await pressroom(
        tmp_path, "pdf", "merge", "a.pdf", "b.pdf", "-o", "out.pdf", *flags(stack)
    )
    assert status == 0, err
    merged = (tmp_path / "out.pdf").read_bytes()
    qpdf_check(merged, tmp_path)
    with pikepdf.open(tmp_path / "out.pdf") as pdf, pdf.open_outline() as outline:
        assert len(pdf.pages) == 5 and [i.title for i in outline.root] == ["a.pdf", "b.pdf"]
    status, _, err = await pressroom(
        tmp_path, "pdf", "stamp", "out.pdf", "--text", "PAID", "-o", "paid.pdf", *flags(stack)
    )
    assert status == 0, err
    assert "PAID" in pdftotext((tmp_path / "paid.pdf").read_bytes(), tmp_path)
    status, _, err = await pressroom(
        tmp_path, "pdf", "attach", "out.pdf", "--file", "data.csv", "-o", "with.pdf",
        *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    with pikepdf.open(tmp_path / "with.pdf") as pdf:
        assert pdf.attachments["data.csv"].get_file().read_bytes() == b"number,total\n1,2\n"

    status, out, err = await pressroom(tmp_path, "pdf", "validate", str(saved), *flags(stack))
    assert status == 0 and "4 pages" in out, (out, err)
    (tmp_path / "page.html").write_bytes(b"<html>not a pdf</html>")
    status, _, err = await pressroom(tmp_path, "pdf", "validate", "page.html", *flags(stack))
    assert status == 3 and "not a PDF" in err, err
    status, _, err = await pressroom(
        tmp_path, "pdf", "rotate", "job:0123456789abcdef0123456789abcdef", "--angle", "90",
        *flags(stack),
    )  # fmt: skip
    assert status == 3 and "no job" in err, err
    status, _, err = await pressroom(tmp_path, "pdf", "rotate", "missing.pdf", "--angle", "90",
                                     *flags(stack))  # fmt: skip
    assert status == 2 and "missing.pdf" in err, err
    status, _, err = await pressroom(
        tmp_path, "pdf", "optimise", source, "--url", "http://127.0.0.1:9", "--key", "k"
    )
    assert status == 4, err


async def test_the_client_validates_paths_and_files_and_runs_steps(
    stack: Stack, tmp_path: Path
) -> None:
    book = await stack.finished((await stack.submit({"html": chapters(3)}))["id"])
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(hostile_pdfs.encrypted("open-sesame-1"))

    def use() -> tuple[dict[str, object], dict[str, object], dict[str, object], bytes]:
        with Client(stack.url, stack.tenant.key) as client:
            by_path = client.validate(locked, password="open-sesame-1")
            with (tmp_path / "locked.pdf").open("rb") as file:
                by_file = client.validate(file, password="open-sesame-1")
            job = client.wait(client.split({"job": book["id"]}, ranges=["1", "2-"]).id)
            out = io.BytesIO()
            client.download(job, out)
            return by_path, by_file, client.report(job), out.getvalue()

    by_path, by_file, report, data = await asyncio.to_thread(use)
    assert by_path["validation"] == by_file["validation"]
    assert by_path["validation"]["encryption"]["needs_user_password"] is True  # type: ignore[index]
    assert [o["pages"] for o in report["outputs"]] == [1, 2]  # type: ignore[union-attr]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert len(archive.namelist()) == 2
