"""What a PDF-tool job stores: its one document as a PDF, or its several as a ZIP of
them (stored, not deflated: PDFs are compressed already), named safely and uniquely by
the pipeline (`names.unique`)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

from services.pdftools.pipeline import Written

PDF = "application/pdf"
ZIP = "application/zip"


def packaged(documents: Sequence[Written], name: str = "documents.zip") -> tuple[bytes, str, str]:
    """The bytes to store, their media type and their file name."""
    if len(documents) == 1:
        return documents[0].data, PDF, documents[0].name
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for document in documents:
            archive.writestr(document.name, document.data)
    return out.getvalue(), ZIP, name
