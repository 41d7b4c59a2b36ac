"""Inputs for the PDF-tool tests, made in the test run: documents Chromium prints
(tagged, with an outline), a form made with pikepdf, and the command-line readers that
did not write any of it (qpdf, poppler). The throwaway signing key is `tests.pki`'s
`signing_key`."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pikepdf
import pytest

TOOLS = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("qpdf", "pdfinfo", "pdftotext", "pdfdetach")),
    reason="needs qpdf and poppler-utils (apt-get install qpdf poppler-utils)",
)
BREAK = "<div style='break-after: page'></div>"


def chapters(count: int, paragraphs: int = 3) -> str:
    """A tagged-friendly document: a title, then `count` chapters (h1), each on its own
    page with a section (h2) and paragraphs; Chromium's outline follows the headings."""
    body = "".join(
        f"<h1>Chapter {n}</h1><h2>Section {n}.1</h2>"
        + "".join(
            f"<p>Paragraph {p} of chapter {n}, with words enough.</p>" for p in range(paragraphs)
        )
        + (BREAK if n < count else "")
        for n in range(1, count + 1)
    )
    return f"<!doctype html><html lang='en'><title>Chapters</title>{body}"


def form() -> bytes:
    """One page with a filled text field whose value has no appearance yet."""
    pdf = pikepdf.new()
    page = pdf.add_blank_page(page_size=(300, 200))
    font = pdf.make_indirect(
        pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica
        )
    )
    field = pdf.make_indirect(
        pikepdf.Dictionary(
            Type=pikepdf.Name.Annot,
            Subtype=pikepdf.Name.Widget,
            FT=pikepdf.Name.Tx,
            T=pikepdf.String("name"),
            V=pikepdf.String("Filled in"),
            DA=pikepdf.String("/Helv 12 Tf 0 g"),
            Rect=[20, 80, 280, 110],
            F=4,
            P=page.obj,
        )
    )
    page.obj.Annots = pikepdf.Array([field])
    pdf.Root.AcroForm = pikepdf.Dictionary(
        Fields=[field],
        NeedAppearances=True,
        DR=pikepdf.Dictionary(Font=pikepdf.Dictionary(Helv=font)),
    )
    out = io.BytesIO()
    pdf.save(out)
    return out.getvalue()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def saved(data: bytes, folder: Path, name: str = "checked.pdf") -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def qpdf_check(data: bytes, folder: Path, *args: str) -> str:
    """`qpdf --check`'s report; the test fails on any error or warning."""
    checked = run("qpdf", *args, "--check", str(saved(data, folder)))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No syntax or stream encoding errors found" in checked.stdout, checked.stdout
    return checked.stdout


def pdfinfo(data: bytes, folder: Path, *args: str) -> dict[str, str]:
    shown = run("pdfinfo", *args, str(saved(data, folder, "info.pdf")))
    assert shown.returncode == 0, shown.stderr
    pairs = (line.split(":", 1) for line in shown.stdout.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def pdftotext(data: bytes, folder: Path, *args: str) -> str:
    shown = run("pdftotext", *args, str(saved(data, folder, "text.pdf")), "-")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout
