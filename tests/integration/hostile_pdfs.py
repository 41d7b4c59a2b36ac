"""Hostile PDFs, made here (no file is checked in): each is what an attacker could
upload to PDF tools, built with pikepdf where the structure is legal and by hand where
the point is that it is not (a broken cross-reference table, a file cut short, a page
tree that loops, nesting beyond any parser's depth).

Each function returns the file's bytes; `CORPUS` names them for the tests.
"""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Callable

import pikepdf


def plain(pages: int = 1, text: str = "Hello") -> bytes:
    """A small valid PDF of `pages` pages, each showing `text` in Helvetica."""
    pdf = pikepdf.new()
    font = pdf.make_indirect(
        pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica
        )
    )
    for number in range(1, pages + 1):
        page = pdf.add_blank_page(page_size=(300, 200))
        page.obj.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))
        page.obj.Contents = pdf.make_stream(
            f"BT /F1 18 Tf 20 100 Td ({text} {number}) Tj ET".encode()
        )
    return _saved(pdf)


def _saved(pdf: pikepdf.Pdf, **kwargs: object) -> bytes:
    out = io.BytesIO()
    pdf.save(out, **kwargs)  # type: ignore[arg-type]
    return out.getvalue()


def broken_xref() -> bytes:
    """Every cross-reference offset wrong by 7 bytes: qpdf must rebuild the table."""
    data = plain(3)
    start = data.rindex(b"\nxref\n") + 1
    lines = data[start:].split(b"\n")
    mended = [
        b"%010d 00000 n " % (int(line[:10]) + 7)
        if line.endswith(b" n ") or line.endswith(b" n")
        else line
        for line in lines
    ]
    return data[:start] + b"\n".join(mended)


def truncated() -> bytes:
    """A header and the start of an object: no page left to find."""
    return plain(2)[:40]


def garbage() -> bytes:
    return b"%PDF-1.7\n" + b"\x00\xff" * 500


@functools.cache
def flate_bomb(gib: int = 1) -> bytes:
    """A page whose content is deflated twice: a few KB that decode to `gib` GiB (over
    qpdf's decoding limit, `document.DECODE_LIMIT`)."""
    inner = zlib.compressobj(9)
    zeros = b"\0" * (1 << 20)
    once = b"".join(inner.compress(zeros) for _ in range(1024 * gib)) + inner.flush()
    twice = zlib.compress(once, 9)
    pdf = pikepdf.new()
    page = pdf.add_blank_page(page_size=(300, 200))
    stream = pikepdf.Stream(pdf, twice)
    stream.Filter = pikepdf.Array([pikepdf.Name.FlateDecode, pikepdf.Name.FlateDecode])
    page.obj.Contents = pdf.make_indirect(stream)
    return _saved(pdf, compress_streams=False)


def deep_nesting(levels: int = 10_000) -> bytes:
    """A page dictionary holding arrays and dictionaries nested `levels` deep."""
    half = levels // 2
    nested = b"[<< /A " * half + b"1" + b" >>]" * half
    return _by_hand(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Deep " + nested + b" >>",
        ]
    )


def many_pages(pages: int = 20_000) -> bytes:
    """`pages` empty pages in one flat page tree (a file of about 1 MB)."""
    kids = b" ".join(b"%d 0 R" % (3 + n) for n in range(pages))
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] >>"
    return _by_hand(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            *[page] * pages,
        ]
    )


def javascript_open_action() -> bytes:
    pdf = pikepdf.open(io.BytesIO(plain()))
    pdf.Root.OpenAction = pikepdf.Dictionary(
        S=pikepdf.Name.JavaScript, JS=pikepdf.String("app.alert('hi')")
    )
    return _saved(pdf)


def javascript_page_aa() -> bytes:
    pdf = pikepdf.open(io.BytesIO(plain()))
    action = pikepdf.Dictionary(S=pikepdf.Name.JavaScript, JS=pikepdf.String("this.print()"))
    pdf.pages[0].obj.AA = pikepdf.Dictionary(O=action)
    return _saved(pdf)


def launch_action() -> bytes:
    pdf = pikepdf.open(io.BytesIO(plain()))
    pdf.Root.OpenAction = pikepdf.Dictionary(S=pikepdf.Name.Launch, F=pikepdf.String("calc.exe"))
    return _saved(pdf)


def looping_page_tree() -> bytes:
    """A /Pages node that lists itself among its kids."""
    return _by_hand(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] >>",
        ]
    )


def huge_image() -> bytes:
    """An image XObject claiming 1,000,000 x 1,000,000 RGB pixels in a few bytes."""
    pdf = pikepdf.open(io.BytesIO(plain()))
    image = pikepdf.Stream(pdf, zlib.compress(b"\0" * 1024))
    image.Type, image.Subtype = pikepdf.Name.XObject, pikepdf.Name.Image
    image.Width = image.Height = 1_000_000
    image.ColorSpace, image.BitsPerComponent = pikepdf.Name.DeviceRGB, 8
    image.Filter = pikepdf.Name.FlateDecode
    page = pdf.pages[0]
    page.obj.Resources.XObject = pikepdf.Dictionary(Im1=image)
    page.obj.Contents = pdf.make_stream(b"q 300 0 0 200 0 0 cm /Im1 Do Q")
    return _saved(pdf)


def encrypted(password: str = "open-sesame-1") -> bytes:
    pdf = pikepdf.open(io.BytesIO(plain()))
    return _saved(pdf, encryption=pikepdf.Encryption(owner=password, user=password, R=6))


def _by_hand(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (numbered from 1) with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


CORPUS: dict[str, Callable[[], bytes]] = {
    "broken_xref": broken_xref,
    "truncated": truncated,
    "garbage": garbage,
    "flate_bomb": flate_bomb,
    "deep_nesting": deep_nesting,
    "many_pages": many_pages,
    "javascript_open_action": javascript_open_action,
    "javascript_page_aa": javascript_page_aa,
    "launch_action": launch_action,
    "looping_page_tree": looping_page_tree,
    "huge_image": huge_image,
    "encrypted": encrypted,
}
