"""The PDF tools' entries of the API's table (`contract.py` merges them): the examples
of a PDF-tools job, its report route, and `POST /validate`."""

from __future__ import annotations

import json
from typing import Any

from services.gateway import pdfreports

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


def routes(route: Any, job_id: Any, read_errors: tuple[int, ...]) -> dict[tuple[str, str], Any]:
    """The PDF tools' routes, built with `contract.py`'s `Route` and parameters (passed
    in: that module imports this one)."""
    return {
        ("GET", "/jobs/{id}/report"): route(
            "What a PDF-tools job's steps did and found",
            "jobs",
            {200: pdfreports.PdfReport},
            (*read_errors, 409),
            params=(job_id,),
            description="Each step run, the documents written, the metadata and validations "
            "asked for, and `pages_processed` (what usage counts). 404 for a job that is "
            "not a PDF-tools job, 409 until it is done.",
        ),
    }
