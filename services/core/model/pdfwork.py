"""A PDF-tools job's work as the log carries it: which PDFs go in, and the steps.

Inputs name where the bytes are, never the bytes: a file of the job (`files`, by the
name it was uploaded as), a stored asset (resolved by the gateway into the job's files)
or an earlier job of the same tenant whose document is a PDF. The steps are kept as the
JSON objects `services/pdftools/steps.py` decodes (core does not import the PDF
library); the gateway checks them strictly before they are stored, and the renderer
decodes them tolerantly, as every event is.
"""

from __future__ import annotations

from typing import Any

import msgspec

SECRET_FIELDS = ("password", "owner_password", "user_password", "identity")
"""What a timeline never shows of the work, and what is sealed on the log (the inputs'
and `encrypt`'s passwords, a `sign` step's own certificate and key)."""


class PdfInput(msgspec.Struct, omit_defaults=True):
    """One input PDF: exactly one of `file`, `asset` and `job`, and its `password` if
    it is encrypted."""

    file: str | None = None
    asset: str | None = None
    job: str | None = None
    password: str | None = None
    # With `job`: that job was submitted with this one and may not have ended yet; the
    # renderer waits for its end (retrying) and fails with its failure (`renderer/chains`).
    after: bool = False

    @property
    def label(self) -> str:
        """How messages name the input: its file name, or the job it comes from."""
        if self.job is not None:
            return f"job {self.job}"
        return self.file or self.asset or "input"


class PdfWork(msgspec.Struct, omit_defaults=True):
    """`inputs` run through `steps` in order (`services/pdftools/pipeline.py`)."""

    inputs: list[PdfInput]
    steps: list[dict[str, Any]]

    def public_view(self) -> dict[str, Any]:
        """The work without its passwords (a timeline's view)."""
        view: dict[str, Any] = msgspec.to_builtins(self)
        for part in (*view["inputs"], *view["steps"]):
            for name in SECRET_FIELDS:
                if name in part:
                    part[name] = "(hidden)"
        return view


def report_key(tenant: str, job_id: str) -> str:
    """Where a PDF-tools job's report (`pdftools/report.Report`, JSON) is stored: beside
    its document (`storage.object_key`), under its tenant."""
    return f"jobs/{tenant}/{job_id}.report.json"
