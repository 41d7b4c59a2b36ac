"""Finishing: what is done to a printed PDF before it is stored, each step asked for by
an option (watermark and stamp, attachments, Factur-X, PDF/A, encryption, signature).
The outline and the table of contents are not steps: Chromium writes the outline while
printing, and the table of contents needs the browser (`browser/toc.py`).

`STEPS` is the one ordered pipeline. Each step is a module with

    applies(options: PageOptions) -> bool
    apply(pdf: bytes, options: PageOptions, context: Context) -> bytes

and `finish` runs, in order, the steps that apply. The order is fixed because each step
must see what the previous ones made and not undo it: marks and the outline change the
pages; attachments and the Factur-X XML are embedded before PDF/A writes the catalog's
/AF array and the XMP that names them; encryption comes after everything that writes
content; a signature comes last, since any later change would break it.

`finish` runs in a finishing worker process (`worker.Finisher`, on `core/jail.py`), with
a memory and a time limit; a job that asks for no step never reaches one (`needed`).
Steps raise `FinishingError` for an input they refuse; whatever else they raise is a bug
in a step, or a PDF the libraries cannot read, and is mapped to `FinishingError` too.
"""

from __future__ import annotations

from services.core.errors import FinishingError, PressroomError
from services.core.pageoptions import PageOptions
from services.pdftools import attachments, encrypt, facturx, marks, pdfa, sign
from services.pdftools.context import Context, Step

__all__ = ["STEPS", "Context", "Step", "finish", "needed"]

STEPS: tuple[Step, ...] = (
    marks,  # watermark, stamp
    attachments,
    facturx,
    pdfa,
    encrypt,
    sign,  # last: it appends a signature any later change would break
)
"""The pipeline, in its order (see the module docstring)."""


def needed(options: PageOptions) -> bool:
    """Whether any step applies: a job that asks for none pays nothing."""
    return any(step.applies(options) for step in STEPS)


def finish(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    """`pdf` after every step that applies, in order (in a finishing worker)."""
    for step in STEPS:
        if step.applies(options):
            pdf = _applied(step, pdf, options, context)
    return pdf


def _applied(step: Step, pdf: bytes, options: PageOptions, context: Context) -> bytes:
    try:
        return step.apply(pdf, options, context)
    except (PressroomError, MemoryError):
        raise
    except Exception as exc:  # a library refusing the PDF: the same job would fail again
        name = getattr(step, "__name__", "a step").rsplit(".", 1)[-1]
        raise FinishingError(f"finishing step {name} failed: {exc}") from None
