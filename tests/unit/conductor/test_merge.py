"""The merged PDF of a batch: pages in order with their text, fonts and links, a file
other readers accept, and memory that does not grow with the number of documents.

Documents are made here byte by byte (to control what a page inherits and links to) or
by pypdf, and once by the real Chromium; the merge is the production `write_merged` into
local storage. Each result is checked by pypdf, by its own cross-reference table (every
offset starts its object: pypdf and pdfinfo repair a wrong one silently) and by
`qpdf --check`, or `pdfinfo` where qpdf is not installed.
"""

from __future__ import annotations

import gc
import io
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import pypdf
import pytest

from services.conductor import pack
from services.conductor.merge import Merger, NotMergeable
from services.core.events import PageOptions
from services.core.status import JobStatus
from services.core.storage import LocalStorage
from services.renderer.browser import BrowserPool, Html

KEY = "batches/t/b.pdf"


def document(*objects: bytes) -> bytes:
    """A PDF whose object n is `objects[n - 1]` and whose catalog is object 1."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        table,
    )
    return bytes(out)


def text(line: str) -> bytes:
    """A content stream that shows `line` in the font /F1."""
    data = b"BT /F1 12 Tf 10 40 Td (%s) Tj ET" % line.encode()
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(data), data)


def pages(*lines: str) -> bytes:
    """One page per line of text, 100 x 100 points, each with its own font dictionary."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for line in lines:
        page = len(objects) + 1
        kids.append(b"%d 0 R" % page)
        objects += [
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Contents %d 0 R"
            b" /Resources << /Font << /F1 %d 0 R >> >> >>" % (page + 1, page + 2),
            text(line),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(lines))
    return document(*objects)


# Two pages that inherit their size and font from the page tree and link to each other:
# page 1 by name (through the catalog's name tree), page 2 directly; page 2 also has a
# link by a name the document does not define.
LINKED = document(
    b"<< /Type /Catalog /Pages 2 0 R /Names << /Dests << /Names [(second) [4 0 R /Fit]] >> >> >>",
    b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 300 150]"
    b" /Resources << /Font << /F1 5 0 R >> >> >>",
    b"<< /Type /Page /Parent 2 0 R /Contents 6 0 R /Annots [8 0 R] >>",
    b"<< /Type /Page /Parent 2 0 R /Contents 7 0 R /Annots [9 0 R 10 0 R] >>",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    text("linked one"),
    text("linked two"),
    b"<< /Type /Annot /Subtype /Link /Rect [0 0 50 50] /P 3 0 R /A << /S /GoTo /D (second) >> >>",
    b"<< /Type /Annot /Subtype /Link /Rect [0 0 50 50] /Dest [3 0 R /Fit] >>",
    b"<< /Type /Annot /Subtype /Link /Rect [50 0 90 50] /Dest (nowhere) >>",
)


def blank(*widths: int) -> bytes:
    """A PDF made by pypdf: blank pages of these widths."""
    writer = pypdf.PdfWriter()
    for width in widths:
        writer.add_blank_page(width=width, height=100)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def merged(tmp_path: Path, *documents: bytes) -> bytes:
    """`write_merged` over items whose files are `documents`, in this order."""
    store = LocalStorage(str(tmp_path / "store"), "http://files", "secret")
    items = []
    for index, data in enumerate(documents):
        key = f"jobs/t/{index}.pdf"
        await store.put(key, data, "application/pdf")
        items.append(outcome(index, key))
    size = await pack.write_merged(store, KEY, items)
    data = store.path(KEY).read_bytes()
    assert size == len(data)
    return data


def outcome(index: int, key: str, status: JobStatus = JobStatus.DONE) -> pack.Outcome:
    return pack.Outcome(
        id=f"b.{index}", item_index=index, status=status, attempts=1, error_type=None,
        error_message=None, object_key=key, filename=f"{index}.pdf",
    )  # fmt: skip


def texts(data: bytes) -> list[str]:
    return [page.extract_text().strip() for page in pypdf.PdfReader(io.BytesIO(data)).pages]


def check(data: bytes, tmp_path: Path) -> None:
    """Every object is where the cross-reference table says, every page names the page
    tree as its parent, and qpdf (or pdfinfo) reads the file without a complaint."""
    reader = pypdf.PdfReader(io.BytesIO(data))
    tree = reader.root_object.raw_get("/Pages")
    assert all(page.raw_get("/Parent") == tree for page in reader.pages)
    table = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    head = re.match(rb"xref\s+0 (\d+)\s+", data[table:])
    assert head is not None, "no cross-reference table at startxref"
    entries = data[table + head.end() :].split(b"\n")[: int(head[1])]
    for number, entry in enumerate(entries[1:], start=1):
        offset = int(entry[:10])
        assert data[offset:].startswith(b"%d 0 obj" % number), f"object {number} misplaced"
    path = tmp_path / "check.pdf"
    path.write_bytes(data)
    if shutil.which("qpdf"):
        result = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    elif shutil.which("pdfinfo"):
        result = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True)
    else:
        pytest.skip("neither qpdf nor pdfinfo is installed")
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr


async def test_documents_pages_come_in_index_order_with_their_text(tmp_path: Path) -> None:
    data = await merged(tmp_path, pages("alpha one", "alpha two"), pages("beta"), blank(120))
    assert texts(data) == ["alpha one", "alpha two", "beta", ""]
    sizes = [float(p.mediabox.width) for p in pypdf.PdfReader(io.BytesIO(data)).pages]
    assert sizes == [100, 100, 100, 120]
    check(data, tmp_path)


async def test_what_a_page_inherits_from_its_page_tree_stays_with_it(tmp_path: Path) -> None:
    data = await merged(tmp_path, pages("first"), LINKED)
    reader = pypdf.PdfReader(io.BytesIO(data))
    assert [float(p.mediabox.width) for p in reader.pages] == [100, 300, 300]
    assert texts(data) == ["first", "linked one", "linked two"]
    check(data, tmp_path)


async def test_links_go_to_their_own_documents_pages_in_the_merged_pdf(tmp_path: Path) -> None:
    """The same document twice: each copy's links lead within that copy. A link by a
    name the document does not define is dropped."""
    data = await merged(tmp_path, pages("first"), LINKED, LINKED)
    reader = pypdf.PdfReader(io.BytesIO(data))
    targets = [
        [
            (reader.get_page_number(annot.get_object()["/Dest"][0].get_object()))
            for annot in page.get("/Annots", [])
        ]
        for page in reader.pages
    ]
    assert targets == [[], [2], [1], [4], [3]]
    check(data, tmp_path)


async def test_files_that_are_not_pdfs_are_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An image output and a truncated PDF leave no page and no stray object."""
    truncated = pages("cut")[:200]
    data = await merged(tmp_path, pages("kept"), b"\x89PNG\r\n\x1a\n", truncated, blank(90))
    assert texts(data) == ["kept", ""]
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.name == pack.__name__] == [
        "item b.1 is left out of the merged PDF",
        "item b.2 is left out of the merged PDF",
    ]
    check(data, tmp_path)


def test_a_document_that_fails_leaves_the_merge_as_it_was() -> None:
    merger = Merger()
    merger.start()
    merger.add(pages("one"))
    before = (list(merger.offsets), list(merger.pages), merger.size)
    with pytest.raises(NotMergeable):
        merger.add(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nendobj\n")
    assert (list(merger.offsets), list(merger.pages), merger.size) == before


async def test_merging_ten_times_the_documents_takes_about_the_same_memory(tmp_path: Path) -> None:
    """50 and then 500 documents: the peak grows by about 0.2 MiB (the offsets kept, 8
    bytes per object and per page), where holding the documents (the whole PDF in pypdf's
    writer, as the conductor did before) grew it by 12 MiB."""
    document = pages("a page of text", "and another one")
    peaks = []
    for count in (50, 500):
        store = LocalStorage(str(tmp_path / str(count)), "http://files", "secret")
        await store.put("jobs/t/one.pdf", document, "application/pdf")
        items = [outcome(index, "jobs/t/one.pdf") for index in range(count)]
        gc.collect()  # what earlier tests left is not this merge's
        tracemalloc.start()
        try:
            size = await pack.write_merged(store, KEY, items)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert size > count * len(document) // 2
        peaks.append(peak)
    assert peaks[1] - peaks[0] < 2**20, f"peaks {peaks[0]:,} and {peaks[1]:,} bytes"


async def test_chromiums_pdfs_merge_with_their_fonts_and_links(
    tmp_path: Path, chromium: str
) -> None:
    """Chromium's own output (embedded font subsets, named destinations, a web link):
    merged twice, each copy's in-page links lead within it and the web link stays."""
    html = (
        '<h1 id="top">Contents</h1><p><a href="#end">to the end</a>'
        ' <a href="https://example.com/x">outside</a></p>'
        '<h2 id="end" style="break-before: page">The end</h2><p><a href="#top">top</a></p>'
    )
    pool = BrowserPool(chromium, pages=1, timeout=30, max_output_bytes=10**7, recycle_after=10)
    async with pool:
        made = (await pool.render(Html(html), PageOptions())).data
    data = await merged(tmp_path, pages("before"), made, made)
    reader = pypdf.PdfReader(io.BytesIO(data))
    assert [t.split("\n")[0] for t in texts(data)] == [
        "before", "Contents", "The end", "Contents", "The end",
    ]  # fmt: skip
    links = [
        [
            reader.get_page_number(annot["/Dest"][0].get_object())
            if "/Dest" in annot
            else annot["/A"]["/URI"]
            for annot in (a.get_object() for a in page.get("/Annots", []))
        ]
        for page in reader.pages
    ]
    assert links == [[], [2, "https://example.com/x"], [1], [4, "https://example.com/x"], [3]]
    check(data, tmp_path)
