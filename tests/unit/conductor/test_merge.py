"""The merged PDF of a batch: pages in order with their text, fonts and links, each
input's outline under an entry of its own, a file other readers accept, and memory that
does not grow with the documents' content.

Documents are made here byte by byte (to control what a page inherits and links to) or
by pypdf, and by the real Chromium; the merge is the production `write_merged` into
local storage. Each result is checked by pypdf, by poppler's `pdftotext` (the pages'
text in order) and by `qpdf --check`, which must find nothing to repair.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pikepdf
import pypdf
import pytest
from pypdf.generic import ArrayObject, NameObject, NumberObject

from services.conductor import pack
from services.conductor.merge import Merger, NotMergeable
from services.core.pageoptions import PageOptions
from services.core.status import JobStatus
from services.core.storage import LocalStorage
from services.core.templating import render_html
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
    """Every page names the page tree as its parent, and qpdf reads the file without a
    warning (a misplaced object or a broken table, which readers repair silently)."""
    reader = pypdf.PdfReader(io.BytesIO(data))
    tree = reader.root_object.raw_get("/Pages")
    assert all(page.raw_get("/Parent") == tree for page in reader.pages)
    if not shutil.which("qpdf"):
        pytest.skip("qpdf is not installed")
    path = tmp_path / "check.pdf"
    path.write_bytes(data)
    result = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    assert "WARNING" not in result.stdout, result.stdout


def pdftotext(data: bytes, tmp_path: Path) -> list[str]:
    """Each page's text as poppler reads it, in page order."""
    if not shutil.which("pdftotext"):
        pytest.skip("poppler's pdftotext is not installed")
    path = tmp_path / "text.pdf"
    path.write_bytes(data)
    shown = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    return [page.strip() for page in shown.stdout.split("\f")[:-1]]


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


def test_a_document_that_fails_leaves_the_merge_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "merge"
    folder.mkdir()
    merger = Merger(folder)
    merger.add(pages("one"), "one.pdf")
    with pytest.raises(NotMergeable):
        merger.add(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nendobj\n", "x.pdf")
    merger.add(pages("two"), "two.pdf")
    assert merger.pages == 2
    data = merger.end().read_bytes()
    assert pdftotext(data, tmp_path) == ["one", "two"]
    check(data, tmp_path)


def test_the_pages_come_out_in_order_across_groups(tmp_path: Path) -> None:
    """More documents than one group: every page, in the order given, once."""
    folder = tmp_path / "merge"
    folder.mkdir()
    merger = Merger(folder, group=3)
    for n in range(8):
        merger.add(pages(f"doc {n} page 1", f"doc {n} page 2"), f"{n}.pdf")
    data = merger.end().read_bytes()
    assert pdftotext(data, tmp_path) == [f"doc {n} page {p}" for n in range(8) for p in (1, 2)]
    assert list(folder.iterdir()) == [folder / "merged.pdf"]  # inputs and parts gone
    check(data, tmp_path)


def with_outline(*lines: str) -> bytes:
    """`pages(*lines)` with an outline: one entry per page, the last nested in the first."""
    with pikepdf.open(io.BytesIO(pages(*lines))) as pdf:
        with pdf.open_outline() as outline:
            items = [pikepdf.OutlineItem(f"about {line}", n) for n, line in enumerate(lines)]
            items[0].children.extend(items[2:])
            outline.root.extend(items[:2])
        out = io.BytesIO()
        pdf.save(out)
    return out.getvalue()


async def test_each_documents_outline_sits_under_an_entry_of_its_own(tmp_path: Path) -> None:
    data = await merged(tmp_path, pages("plain"), with_outline("a", "b", "c"), with_outline("d"))
    with pikepdf.open(io.BytesIO(data)) as pdf:
        index = {page.obj.objgen: n for n, page in enumerate(pdf.pages)}

        def tree(items: list[pikepdf.OutlineItem]) -> list[Any]:
            return [(str(i.title), index[i.destination[0].objgen], tree(i.children)) for i in items]

        with pdf.open_outline() as outline:
            found = tree(outline.root)
    assert found == [
        ("1.pdf", 1, [("about a", 1, [("about c", 3, [])]), ("about b", 2, [])]),
        ("2.pdf", 4, [("about d", 4, [])]),
    ]
    check(data, tmp_path)


def test_merging_ten_times_the_documents_takes_about_the_same_memory(tmp_path: Path) -> None:
    """50 and then 500 documents of 64 KB, each merge in a process of its own, sampled
    there: the resident memory the merge adds (qpdf's included, which tracemalloc would
    not see) grows by far less than the 450 more documents' 28 MiB (a few MiB, for
    their pages' dictionaries)."""
    (tmp_path / "one.pdf").write_bytes(padded(64_000))
    grown = []
    for count in (50, 500):
        script = MEASURED % {"store": str(tmp_path / str(count)), "count": count}
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "one.pdf")],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        size, added = map(int, done.stdout.split())
        assert size > count * 100
        grown.append(added)
    print(f"\n[merge memory] RSS added by merging 50 and 500 documents: {grown}")
    assert grown[1] - grown[0] < 12 * 2**20, f"grew by {grown[0]:,} and {grown[1]:,} bytes"


def padded(size: int) -> bytes:
    """A one-page document of about `size` bytes (its content stream, uncompressed)."""
    shown = b"BT /F1 12 Tf 10 40 Td (padded) Tj ET\n%" + b"x" * size
    return document(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(shown), shown),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    )


MEASURED = """
import asyncio, os, sys, threading
from pathlib import Path
from services.conductor import pack
from services.core.status import JobStatus
from services.core.storage import LocalStorage

PAGE = os.sysconf("SC_PAGE_SIZE")
def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE

async def main():
    store = LocalStorage(%(store)r, "http://files", "secret")
    await store.put("jobs/t/one.pdf", Path(sys.argv[1]).read_bytes(), "application/pdf")
    items = [
        pack.Outcome(id=f"b.{n}", item_index=n, status=JobStatus.DONE, attempts=1,
                     error_type=None, error_message=None, object_key="jobs/t/one.pdf",
                     filename=None)
        for n in range(%(count)d)
    ]
    base, peak, done = resident(), [0], threading.Event()
    def sample():
        while not done.wait(0.002):
            peak[0] = max(peak[0], resident())
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        size = await pack.write_merged(store, "batches/t/b.pdf", items)
    finally:
        done.set()
        sampler.join()
    print(size, max(peak[0], resident()) - base)

asyncio.run(main())
"""


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


async def test_chromiums_invoice_keeps_its_text_and_fonts(tmp_path: Path, chromium: str) -> None:
    """The invoice the batch bench renders: each copy of it keeps its pages' text (as
    poppler reads it) and fonts."""
    made = await invoice(chromium)
    data = await merged(tmp_path, made, pages("between"), made)
    alone = pdftotext(made, tmp_path)
    assert pdftotext(data, tmp_path) == [*alone, "between", *alone]

    def fonts(data: bytes) -> list[list[str]]:
        return [
            sorted(entry(f, "/BaseFont") for f in entry(page, "/Resources", "/Font").values())
            for page in pypdf.PdfReader(io.BytesIO(data)).pages
        ]

    assert fonts(data) == [*fonts(made), fonts(pages("between"))[0], *fonts(made)]
    check(data, tmp_path)


async def test_strings_that_read_like_references_come_out_as_they_were(tmp_path: Path) -> None:
    """`5 0 R` in a string of an annotation, of a nested dictionary and of a content
    stream is left as it is, and a stream's length given as an object of its own is
    found, in a document numbered anew after another."""
    data = await merged(tmp_path, pages("first"), STRINGS)
    page = pypdf.PdfReader(io.BytesIO(data)).pages[1]
    assert entry(page, "/Annots", 0, "/Contents") == "note (5 0 R) (and 5 0 R)) \\"
    assert entry(page, "/Annots", 0, "/NM").original_bytes == b"5 0 R"
    assert entry(page, "/PieceInfo", "/X", "/Private") == "5 0 R"
    assert texts(data) == ["first", "see 5 0 R"]
    check(data, tmp_path)


@pytest.mark.parametrize(
    "kind", ["named destinations", "inherited attributes", "cross-reference stream"]
)
async def test_documents_of_every_make_are_merged(tmp_path: Path, kind: str) -> None:
    """A link by name, a page size inherited from a pypdf-made page tree, and qpdf's
    object and cross-reference streams: each document's pages come out whole."""
    source, expected, width = {
        "named destinations": (NAMED, ["named one", "named two"], 300),
        "inherited attributes": (inherited(130), ["", ""], 130),
        "cross-reference stream": (b"", ["streamed", "pages"], 100),
    }[kind]
    if kind == "cross-reference stream":
        source = with_xref_stream(pages(*expected), tmp_path)
    data = await merged(tmp_path, pages("first"), source, pages("last"))
    assert texts(data) == ["first", *expected, "last"]
    sizes = [float(p.mediabox.width) for p in pypdf.PdfReader(io.BytesIO(data)).pages]
    assert sizes == [100, width, width, 100]
    check(data, tmp_path)
