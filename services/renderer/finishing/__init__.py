"""Finishing: what is done to a printed PDF before it is stored. The work is the PDF
library's (`services/pdftools`): each finishing option is one of its steps, and
`steps_of` is the mapping, in the one order that works:

    watermark, stamp   marks change the pages
    attachments        embedded before PDF/A lists them in the catalog's /AF
    facturx | pdfa     the invoice checked and embedded, then PDF/A written and checked
    encrypt            after everything that writes content
    sign               last: any later change would break it

The outline and the table of contents are not steps: Chromium writes the outline while
printing, and the table of contents needs the browser (`browser/toc.py`).

A job that asks for no step is still rewritten when its PDF is tagged, or untagged and
over `PRESSROOM_COMPACT_PDF_BYTES` (`compacts`): a tagged Chromium PDF's structure tree
is thousands of small uncompressed objects, which object streams shrink several-fold,
and it is most of a small tagged document's bytes too.
`finish` runs in a finishing worker process (`worker.Finisher`, on `core/sandbox/jail.py`).
"""

from __future__ import annotations

from services.core.model import filenames
from services.core.model.errors import FinishingError
from services.core.model.finishingoptions import FACTURX_FILE, data_url
from services.core.model.pageoptions import PageOptions
from services.pdftools import pipeline
from services.pdftools.context import Context, Limits
from services.pdftools.marks import asked
from services.pdftools.steps import (
    Attach,
    AttachedFile,
    Encrypt,
    FacturX,
    Optimise,
    PdfA,
    Sign,
    Stamp,
    Step,
    Watermark,
)

__all__ = ["Context", "finish", "needed", "steps_of"]

NAME = "document.pdf"
"""The printed document's name in the pipeline's messages."""


def steps_of(options: PageOptions) -> list[tuple[str, Step]]:
    """The steps `options` ask for, each with the option it comes from (for messages)."""
    steps: list[tuple[str, Step]] = []
    for kind, mark in asked(options):
        made = Watermark if kind == "watermark" else Stamp
        steps.append(
            (f"options.{kind}", made(**{f: getattr(mark, f) for f in mark.__struct_fields__}))
        )
    if options.attachments:
        names = filenames.Unique([FACTURX_FILE] if options.facturx is not None else [])
        files = [
            AttachedFile(
                name=names.take(a.name, fallback="attachment"),
                source=f"options.attachments[{i}]",
                mime=_mime(a.content, i),
            )
            for i, a in enumerate(options.attachments)
        ]
        steps.append(("options.attachments", Attach(files=files)))
    if options.facturx is not None:
        invoice = options.facturx
        steps.append(("options.facturx", FacturX(xml=invoice.xml, profile=invoice.profile)))
    elif options.pdfa is not None:
        steps.append(("options.pdfa", PdfA(level=options.pdfa)))
    if options.encrypt is not None:
        crypt = options.encrypt
        steps.append(
            ("options.encrypt", Encrypt(**{f: getattr(crypt, f) for f in crypt.__struct_fields__}))
        )
    if options.sign is not None:
        sign = options.sign
        steps.append(
            ("options.sign", Sign(**{f: getattr(sign, f) for f in sign.__struct_fields__}))
        )
    return steps


def needed(options: PageOptions) -> bool:
    """Whether any step applies: a small job that asks for none pays nothing. Cheap (on
    the event loop, for every job): it reads the options, builds no step."""
    asks = (options.attachments, options.facturx, options.pdfa, options.encrypt, options.sign)
    return bool(asked(options)) or any(option is not None and option != () for option in asks)


def compacts(size: int, limit: int, tagged: bool) -> bool:
    """Whether a printed PDF of `size` bytes is rewritten compactly: every tagged one,
    an untagged one over `limit` (the setting; 0 rewrites every one)."""
    return tagged or size > limit


def finish(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    """`pdf` after every step that applies, in order, or compacted when none does (in a
    finishing worker)."""
    labelled = steps_of(options) or [("compaction", Optimise(remove_unused=False))]
    files = _files(options, context)
    result = pipeline.run(
        [pipeline.Input(NAME, pdf)],
        [step for _, step in labelled],
        context,
        Limits(),
        files,
        labels=[label for label, _ in labelled],
    )
    return result.documents[0].data


def _mime(url: str, index: int) -> str:
    decoded = data_url(url)
    if decoded is None:  # the gateway refuses these; an old one may not have
        raise FinishingError(f"options.attachments[{index}].content is not a data URL")
    return decoded[0]


def _files(options: PageOptions, context: Context) -> dict[str, bytes]:
    """The attachments' bytes and the printed marks, as the pipeline's job files."""
    files = {}
    for index, attachment in enumerate(options.attachments or ()):
        decoded = data_url(attachment.content)
        if decoded is not None:
            files[f"options.attachments[{index}]"] = decoded[1]
    printed = dict(context.marks)
    for index, (kind, _) in enumerate(asked(options)):
        if kind in printed:
            files[pipeline.mark_key(index)] = printed[kind]
    return files
