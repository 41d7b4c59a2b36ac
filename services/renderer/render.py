"""The finished PDF: its document information set after printing (`set_metadata`).

(The template → HTML step is `renderer/templating.py`, run in a jail.)
"""

from __future__ import annotations

import io
import re

from pypdf import PdfReader
from pypdf.generic import (
    DictionaryObject,
    IndirectObject,
    NameObject,
    NumberObject,
    TextStringObject,
)

from services.core.model.pageoptions import Metadata

_STARTXREF = re.compile(rb"startxref\s+(\d+)\s+%%EOF")


def set_metadata(pdf: bytes, metadata: Metadata) -> bytes:
    """`pdf` with the given `/Title`, `/Author`, `/Subject` and `/Keywords` in its Info.

    Chromium writes only `/Title` (from the document's `<title>`), so the rest is added
    afterwards as an incremental update (ISO 32000 §7.5.6): Chromium's bytes stay as they
    are, and a new version of the Info dictionary, a one-entry cross-reference section and
    a trailer pointing back (`/Prev`) to Chromium's are appended. Fields left out keep
    Chromium's values, as do Creator, Producer and the dates. pypdf only parses the
    cross-reference table, the trailer and the old Info here, far cheaper than rewriting
    the file with pypdf's `PdfWriter`, even in its incremental mode (docs/benchmarks.md).
    Assumes a classic xref table, which is what Chromium (Skia) writes.
    """
    fields = _info_fields(metadata)
    if not fields:
        return pdf
    reader = PdfReader(io.BytesIO(pdf))
    info = DictionaryObject(reader.metadata or {})
    for key, value in fields.items():
        info[NameObject(key)] = TextStringObject(value)
    return pdf + _info_update(reader, info, pdf)


def _info_fields(metadata: Metadata) -> dict[str, str]:
    fields = {
        "/Title": metadata.title,
        "/Author": metadata.author,
        "/Subject": metadata.subject,
        "/Keywords": metadata.keywords,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _info_update(reader: PdfReader, info: DictionaryObject, pdf: bytes) -> bytes:
    """The Info object, xref section and trailer to append to `pdf` (which `reader` read)."""
    offset = len(pdf)
    trailer = reader.trailer
    size = trailer.get("/Size")
    if not isinstance(size, int):  # NumberObject is an int
        raise ValueError("PDF trailer has no /Size")
    old = trailer.raw_get("/Info")
    number = old.idnum if isinstance(old, IndirectObject) else size
    out = io.BytesIO()
    out.write(f"\n{number} 0 obj\n".encode())
    info.write_to_stream(out)
    out.write(b"\nendobj\n")
    xref = offset + out.tell()
    # Each xref entry is exactly 20 bytes: 10-digit offset, generation, "n", space, newline.
    out.write(f"xref\n{number} 1\n{offset + 1:010d} 00000 n \ntrailer\n".encode())
    new_trailer = DictionaryObject(
        {
            NameObject("/Size"): NumberObject(max(size, number + 1)),
            NameObject("/Root"): trailer.raw_get("/Root"),
            NameObject("/Info"): IndirectObject(number, 0, reader),
            NameObject("/Prev"): NumberObject(_startxref(pdf)),
        }
    )
    if "/ID" in trailer:
        new_trailer[NameObject("/ID")] = trailer.raw_get("/ID")
    new_trailer.write_to_stream(out)
    out.write(f"\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def _startxref(pdf: bytes) -> int:
    """Where the file's last cross-reference section starts (its `startxref`)."""
    found = _STARTXREF.findall(pdf[-1024:])
    if not found:
        raise ValueError("PDF has no startxref")
    return int(found[-1])
