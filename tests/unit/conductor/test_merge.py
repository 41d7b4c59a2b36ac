"""The merged PDF of a batch: pages in order with their text, fonts and links, a file
other readers accept, and memory that does not grow with the number of documents.

Documents are made here byte by byte (to control what a page inherits and links to) or
by pypdf, and by the real Chromium; the merge is the production `write_merged` into
local storage, or the `Merger` itself where a test asks which way a document was copied
(as bytes, or parsed by pypdf). Each result is checked by pypdf, by its own
cross-reference table (every offset starts its object: pypdf and pdfinfo repair a wrong
one silently) and by `qpdf --check`, or `pdfinfo` where qpdf is not installed.
"""

from __future__ import annotations

import gc
import io
import json
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import pypdf
import pytest
from pypdf.generic import ArrayObject, NameObject, NumberObject

from services.conductor import pack
from services.conductor.merge import Merger, NotMergeable
from services.core.model.pageoptions import PageOptions
from services.core.model.status import JobStatus
from services.core.objectstore.storage import LocalStorage
from services.core.sandbox.templating import render_html
from services.renderer.browser import BrowserPool, Html

KEY = "batches/t/b.pdf"
WORKLOAD = Path(__file__).resolve().parents[3] / "bench" / "workload"


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


# Two pages with their own size and font, the first linking to the second by name.
NAMED = document(
    b"<< /Type /Catalog /Pages 2 0 R /Names << /Dests 8 0 R >> >>",
    b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 150] /Contents 6 0 R"
    b" /Resources << /Font << /F1 5 0 R >> >> /Annots [9 0 R] >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 150] /Contents 7 0 R"
    b" /Resources << /Font << /F1 5 0 R >> >> >>",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    text("named one"),
    text("named two"),
    b"<< /Names [(second) [4 0 R /Fit]] >>",
    b"<< /Type /Annot /Subtype /Link /Rect [0 0 50 50] /A << /S /GoTo /D (second) >> >>",
)

# A page whose annotation and dictionary hold strings that read like references (escaped
# and nested parentheses, a hex string), whose text does too, and whose content stream's
# length is an object of its own.
SHOWN = b"BT /F1 12 Tf 10 40 Td (see 5 0 R) Tj ET"
STRINGS = document(
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Contents 4 0 R /Annots [6 0 R]"
    b" /Resources << /Font << /F1 5 0 R >> >> /PieceInfo << /X << /Private (5 0 R) >> >> >>",
    b"<< /Length 7 0 R >>\nstream\n%s\nendstream" % SHOWN,
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    b"<< /Type /Annot /Subtype /Text /Rect [0 0 50 50]"
    b" /Contents (note \\(5 0 R\\) (and 5 0 R\\)) \\\\) /NM <35203020 52> >>",
    b"%d" % len(SHOWN),
)


def blank(*widths: int) -> bytes:
    """A PDF made by pypdf: blank pages of these widths."""
    writer = pypdf.PdfWriter()
    for width in widths:
        writer.add_blank_page(width=width, height=100)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def inherited(width: int) -> bytes:
    """A PDF made by pypdf whose two pages take their size from the page tree."""
    writer = pypdf.PdfWriter()
    for _ in range(2):
        writer.add_blank_page(width=width, height=100)
    tree = entry(writer.root_object, "/Pages")
    tree[NameObject("/MediaBox")] = ArrayObject(NumberObject(n) for n in (0, 0, width, 100))
    for page in writer.pages:
        del page["/MediaBox"]
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def with_xref_stream(data: bytes, tmp_path: Path) -> bytes:
    """`data` rewritten by qpdf with object streams and a cross-reference stream."""
    if not shutil.which("qpdf"):
        pytest.skip("qpdf is not installed")
    source, target = tmp_path / "plain.pdf", tmp_path / "streams.pdf"
    source.write_bytes(data)
    subprocess.run(["qpdf", "--object-streams=generate", str(source), str(target)], check=True)
    made = target.read_bytes()
    assert b"/XRef" in made and b"/ObjStm" in made
    return made


async def invoice(chromium: str) -> bytes:
    """The shared workload's invoice as Chromium prints it."""
    template = (WORKLOAD / "invoice.html.j2").read_text()
    html = render_html(template, json.loads((WORKLOAD / "data.json").read_text()))
    pool = BrowserPool(chromium, pages=1, timeout=30, max_output_bytes=10**7, recycle_after=10)
    async with pool:
        return (await pool.render(Html(html), PageOptions())).data


def merged_by(*documents: bytes) -> tuple[bytes, int]:
    """The `Merger`'s PDF of `documents`, and how many of them it copied as bytes."""
    merger = Merger()
    data = merger.start() + b"".join(map(merger.add, documents)) + b"".join(merger.end())
    return data, merger.copied_as_bytes


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


def entry(obj: Any, *keys: str | int) -> Any:
    """What `keys` lead to from `obj`, references followed."""
    for key in keys:
        obj = obj.get_object()[key]
    return obj.get_object()


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
    merged twice, each copy's in-page links lead within it and the web link stays. Its
    links by name make it one the byte copy leaves to pypdf."""
    html = (
        '<h1 id="top">Contents</h1><p><a href="#end">to the end</a>'
        ' <a href="https://example.com/x">outside</a></p>'
        '<h2 id="end" style="break-before: page">The end</h2><p><a href="#top">top</a></p>'
    )
    pool = BrowserPool(chromium, pages=1, timeout=30, max_output_bytes=10**7, recycle_after=10)
    async with pool:
        made = (await pool.render(Html(html), PageOptions())).data
    data = await merged(tmp_path, pages("before"), made, made)
    assert merged_by(made)[1] == 0  # links by name: pypdf's way, which resolves them
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


async def test_chromiums_invoice_is_copied_as_bytes_with_its_text_and_fonts(
    tmp_path: Path, chromium: str
) -> None:
    """The invoice the batch bench renders takes the byte copy, and each copy of it keeps
    its pages' text and fonts."""
    made = await invoice(chromium)
    data, as_bytes = merged_by(made, pages("between"), made)
    assert as_bytes == 3
    alone = texts(made)
    assert texts(data) == [*alone, "between", *alone]

    def fonts(data: bytes) -> list[list[str]]:
        return [
            sorted(entry(f, "/BaseFont") for f in entry(page, "/Resources", "/Font").values())
            for page in pypdf.PdfReader(io.BytesIO(data)).pages
        ]

    assert fonts(data) == [*fonts(made), fonts(pages("between"))[0], *fonts(made)]
    check(data, tmp_path)


async def test_strings_that_read_like_references_come_out_as_they_were(tmp_path: Path) -> None:
    """In a document copied as bytes (and numbered anew, after another), `5 0 R` in a
    string of an annotation, of a nested dictionary and of a content stream is left as
    it is, and a stream's length given as an object of its own is found."""
    data, as_bytes = merged_by(pages("first"), STRINGS)
    assert as_bytes == 2
    page = pypdf.PdfReader(io.BytesIO(data)).pages[1]
    assert entry(page, "/Annots", 0, "/Contents") == "note (5 0 R) (and 5 0 R)) \\"
    assert entry(page, "/Annots", 0, "/NM").original_bytes == b"5 0 R"
    assert entry(page, "/PieceInfo", "/X", "/Private") == "5 0 R"
    assert texts(data) == ["first", "see 5 0 R"]
    check(data, tmp_path)


@pytest.mark.parametrize(
    "kind", ["named destinations", "inherited attributes", "cross-reference stream"]
)
async def test_documents_the_byte_copy_does_not_read_are_merged_by_pypdf(
    tmp_path: Path, kind: str
) -> None:
    """A link by name (which only pypdf's way resolves), a page size inherited from a
    pypdf-made page tree, and qpdf's object and cross-reference streams: each document is
    parsed by pypdf, and its pages come out as well as the byte copy's."""
    source, expected, width = {
        "named destinations": (NAMED, ["named one", "named two"], 300),
        "inherited attributes": (inherited(130), ["", ""], 130),
        "cross-reference stream": (b"", ["streamed", "pages"], 100),
    }[kind]
    if kind == "cross-reference stream":
        source = with_xref_stream(pages(*expected), tmp_path)
    data, as_bytes = merged_by(pages("first"), source, pages("last"))
    assert as_bytes == 2
    assert texts(data) == ["first", *expected, "last"]
    sizes = [float(p.mediabox.width) for p in pypdf.PdfReader(io.BytesIO(data)).pages]
    assert sizes == [100, width, width, 100]
    check(data, tmp_path)
