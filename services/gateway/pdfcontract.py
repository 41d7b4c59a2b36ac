"""The PDF tools' entries of the API's table (`contract.py` merges them): the examples
of a PDF-tools job, its report route, and `POST /validate`."""

from __future__ import annotations

import json
from typing import Any

from services.gateway import pdfreports, requests, validation
from services.gateway.routedocs import Body, Param, Route, files_schema, path_id

PDF_JOB_EXAMPLES: dict[str, Any] = {
    "merge": {
        "pdf": {
            "inputs": [{"file": "invoice.pdf"}, {"asset": "terms.pdf"}],
            "steps": [{"step": "merge"}, {"step": "metadata", "title": "Invoice and terms"}],
        }
    },
    "split": {
        "pdf": {
            "inputs": [{"job": "4f1c2b9e8d7a6c5b4a3f2e1d0c9b8a7f"}],
            "steps": [{"step": "split", "ranges": ["1-2", "3-"]}],
        }
    },
    "pdfa": {
        "pdf": {
            "inputs": [{"file": "scan.pdf", "password": "open-sesame"}],
            "steps": [{"step": "pdfa", "level": "2b"}, {"step": "validate"}],
        }
    },
}
"""`POST /jobs` bodies of PDF-tools jobs (the files are parts of a multipart request)."""

PDF_JOB_TEXT = (
    " A PDF-tools job gives `pdf` instead: input PDFs (the job's own files, stored "
    "assets, or earlier jobs of yours) and steps run on them in order; one output is "
    "stored as a PDF, several as a ZIP, and the job's report is at `/jobs/{id}/report`. "
    "For example: " + "; ".join(f"`{json.dumps(body)}`" for body in PDF_JOB_EXAMPLES.values())
)


TINY_PDF = (
    "%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n"
    "2 0 obj <</Type /Pages /Kids [3 0 R] /Count 1>> endobj\n"
    "3 0 obj <</Type /Page /Parent 2 0 R /MediaBox [0 0 200 200]>> endobj\n"
    "trailer <</Root 1 0 R>>\n%%EOF\n"
)
"""The smallest PDF (its cross-reference table left for the reader to rebuild, which
the answer's `warnings` then say): `POST /validate`'s example."""


ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/jobs/{id}/report"): Route(
        "What a PDF-tools job's steps did and found",
        "jobs",
        {200: pdfreports.PdfReport},
        (401, 403, 404, 409, 503),
        params=(path_id("job", requests.JOB_ID),),
        description="Each step run, the documents written, the metadata and validations "
        "asked for, and `pages_processed` (what usage counts). 404 for a job that is "
        "not a PDF-tools job, 409 until it is done.",
    ),
    ("POST", "/validate"): Route(
        "What a PDF claims, and whether it holds",
        "jobs",
        {200: validation.Validated},
        (400, 401, 403, 408, 413, 422, 429, 503),
        params=(
            Param(
                "name",
                "query",
                {"type": "string", "maxLength": 200},
                "the document's name in the answer (`document.pdf` by default)",
            ),
            Param(
                validation.PASSWORD,
                "header",
                {"type": "string"},
                "the password that opens an encrypted PDF",
            ),
        ),
        body=Body(
            None,
            TINY_PDF,
            raw_types=("application/pdf",),
            multipart=files_schema(
                "the PDF: one file",
                {"password": {"type": "string", "description": "the password that opens it"}},
            ),
            multipart_example={"files": [TINY_PDF]},
        ),
        description="The body is the PDF, or a form of one file and an optional `password` "
        "(at most `PRESSROOM_VALIDATE_MAX_BYTES`). "
        "Answered at once: PDF/A level and structural checks, PDF/UA markers, an "
        "embedded Factur-X invoice against its XSD and declared profile, signatures, "
        "encryption. Read in a worker process, each tenant within its share "
        "(429 `compile_limited` beyond it, 503 when every worker is busy); a file "
        "that cannot be read is a 422 naming why.",
    ),
}
"""The PDF tools' routes (`contract.ROUTES` holds them with the others)."""
