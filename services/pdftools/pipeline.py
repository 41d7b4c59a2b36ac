"""`run`: a pipeline of steps over input PDFs, in a worker process: documents in,
documents out, and a `Report`.

    run(inputs, steps, context, limits, files) -> Result

1. qpdf's decoding limits are set (`document.guard`), the step rules checked again
   (`rules.check_steps`: the log may carry what an older gateway let through).
2. Every input is opened: its bytes counted against `limits.input_bytes`, its pages
   against `limits.pages` (`TooManyPages` names PRESSROOM_PDF_MAX_PAGES), its active
   content refused (`PdfActiveContent`) unless the pipeline only reports.
3. Each step runs over the documents flowing (`merge` and `split` change how many).
4. Each document is written (`Document.data`): `OutputTooLarge` past the limits.

A step's library failure on a damaged document becomes `PdfInvalid` naming the step and
the document; a `PressroomError` a step raises passes as it is; anything else is a bug
and stays one (the jail returns it, and the job fails).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pikepdf
from pyhanko.pdf_utils.misc import PdfError as PyhankoPdfError

from services.core.model.errors import (
    OutputTooLarge,
    PayloadTooLarge,
    PdfActiveContent,
    PdfInvalid,
    PressroomError,
    TooManyPages,
)
from services.pdftools import (
    active,
    attachments,
    bookmarks,
    encrypt,
    facturx,
    identity,
    invoice,
    marks,
    merge,
    metadata,
    names,
    optimise,
    pages,
    pdfa,
    pdfua,
    sign,
    split,
    validate,
)
from services.pdftools.context import Context, Limits
from services.pdftools.document import Document, described, guard
from services.pdftools.report import Output, Report, StepRecord
from services.pdftools.rules import check_steps
from services.pdftools.steps import (
    CHANGES_NOTHING,
    Attach,
    Encrypt,
    FacturX,
    Flatten,
    Merge,
    Metadata,
    Optimise,
    PdfA,
    PdfUA,
    ReadBookmarks,
    ReadMetadata,
    Rotate,
    Sign,
    Split,
    Stamp,
    Step,
    Validate,
    Watermark,
    WriteBookmarks,
    kind_of,
    name_of,
)


@dataclass(frozen=True)
class Input:
    """An input PDF: its file name, its bytes and its password (if encrypted)."""

    name: str
    data: bytes
    password: str = ""


@dataclass(frozen=True)
class Written:
    """A document the pipeline wrote."""

    name: str
    data: bytes
    pages: int


@dataclass(frozen=True)
class Result:
    documents: list[Written]
    report: Report


@dataclass
class Work:
    """What a step may use: the service's context, the job's limits and other files,
    the report, and the notes of the step running."""

    context: Context
    limits: Limits
    files: Mapping[str, bytes]
    report: Report
    labels: Sequence[str]
    index: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """How messages name the step running (`steps[2]`, or `options.facturx`)."""
        return self.labels[self.index]


def mark_key(index: int) -> str:
    """The key of the page Chromium printed for the text or image mark of step `index`
    (the caller prints it with `renderer/marks.py` and passes it in `files`)."""
    return f"#mark-{index}"


def run(
    inputs: Sequence[Input],
    steps: Sequence[Step],
    context: Context,
    limits: Limits,
    files: Mapping[str, bytes] | None = None,
    labels: Sequence[str] | None = None,
) -> Result:
    """Run `steps` over `inputs` (see the module docstring); `labels` name the steps in
    messages (default `steps[i]`)."""
    guard()
    files = files or {}
    labels = labels or [f"steps[{index}]" for index in range(len(steps))]
    check_steps(steps, [key for key in files if not key.startswith("#")])
    for step, label in zip(steps, labels, strict=True):
        if isinstance(step, FacturX):  # before any PDF is read: the cheaper refusal
            invoice.checked(step.xml, step.profile, f"{label}.xml")
    report = Report()
    docs = _opened(inputs, steps, limits, files, report)
    work = Work(context, limits, files, report, labels)
    for index, step in enumerate(steps):
        docs = _step(docs, step, work, index)
    return Result(_written(docs, limits, report), report)


def _opened(
    inputs: Sequence[Input],
    steps: Sequence[Step],
    limits: Limits,
    files: Mapping[str, bytes],
    report: Report,
) -> list[Document]:
    size = sum(len(i.data) for i in inputs) + sum(len(data) for data in files.values())
    if size > limits.input_bytes:
        raise PayloadTooLarge(
            f"the job's files are {size} bytes, over the limit of {limits.input_bytes} "
            "(PRESSROOM_PDF_MAX_INPUT_BYTES)"
        )
    reporting = all(isinstance(step, CHANGES_NOTHING) for step in steps)
    docs = []
    for given, name in zip(inputs, names.unique([i.name for i in inputs]), strict=True):
        doc = Document(name, given.data, given.password)
        pdf: pikepdf.Pdf = _guarded(doc.view, "reading", doc.name)
        doc.pages = _counted(pdf, doc.name)
        if doc.pages == 0:
            why = "".join(f" ({described(w, doc.name)})" for w in pdf.get_warnings()[:1])
            raise PdfInvalid(f"{doc.name} has no page that can be read{why}")
        report.pages_processed += doc.pages
        if report.pages_processed > limits.pages:
            raise TooManyPages(
                f"the inputs have more than {limits.pages} pages (at {doc.name}: "
                f"{doc.pages}); PRESSROOM_PDF_MAX_PAGES raises the limit"
            )
        found = active.found(pdf)
        if found and not reporting:
            raise PdfActiveContent(f"{doc.name} has JavaScript or launch actions: {found[0]}")
        report.warnings += [f"{doc.name}: {described(w, doc.name)}" for w in pdf.get_warnings()[:5]]
        docs.append(doc)
    return docs


def _counted(pdf: pikepdf.Pdf, name: str) -> int:
    try:
        return len(pdf.pages)
    except (pikepdf.PdfError, RuntimeError, RecursionError) as exc:  # a page tree that loops
        raise PdfInvalid(f"{name} has a page tree that cannot be read: {exc}") from None


def _guarded(action: Callable[[], Any], doing: str, name: str) -> Any:
    """`action()`, its library failures on a damaged or hostile PDF as `PdfInvalid`."""
    try:
        return action()
    except PressroomError:
        raise
    except pikepdf.DataDecodingError as exc:
        raise PdfInvalid(
            f"{doing} {name}: a stream cannot be decoded ({described(exc, name)})"
        ) from None
    except (pikepdf.PdfError, pikepdf.ForeignObjectError, PyhankoPdfError, RecursionError) as exc:
        problem = described(exc, name)
        raise PdfInvalid(f"{doing} {name} failed on a damaged part of it: {problem}") from None


def _step(docs: list[Document], step: Step, work: Work, index: int) -> list[Document]:
    started = time.perf_counter()
    work.index, work.notes = index, []
    name = name_of(step)
    run_step = _FLOWS.get(kind_of(step))
    if run_step is not None:
        docs = _guarded(functools.partial(run_step, docs, step, work), name, "the documents")
    else:
        each = _EACH[kind_of(step)]
        for doc in docs:
            _guarded(functools.partial(each, doc, step, work), name, doc.name)
    work.report.steps.append(
        StepRecord(
            step=name,
            index=index,
            documents=[doc.name for doc in docs],
            milliseconds=round((time.perf_counter() - started) * 1000, 1),
            notes=work.notes,
        )
    )
    return docs


def _written(docs: list[Document], limits: Limits, report: Report) -> list[Written]:
    if len(docs) > limits.outputs:
        raise OutputTooLarge(
            f"the pipeline makes {len(docs)} documents, over the limit of {limits.outputs} "
            "(PRESSROOM_PDF_MAX_OUTPUTS)"
        )
    written = []
    for doc, name in zip(docs, names.unique([d.name for d in docs]), strict=True):
        data = _guarded(doc.data, "writing", doc.name)
        if len(data) > limits.output_bytes:
            raise OutputTooLarge(
                f"{name} is {len(data)} bytes, over the limit of {limits.output_bytes} "
                "(PRESSROOM_MAX_OUTPUT_BYTES)"
            )
        written.append(Written(name, data, doc.pages))
        report.outputs.append(Output(name=name, pages=doc.pages, bytes=len(data)))
    return written


# Each step's function: over the whole flow (`_FLOWS`), or per document (`_EACH`).


def _merge(docs: list[Document], step: Any, work: Work) -> list[Document]:
    merged, notes = merge.merge(docs, step)
    work.notes += notes
    return merged


def _split(docs: list[Document], step: Any, work: Work) -> list[Document]:
    return split.split(docs, step, work.limits.outputs)


def _pdfa(doc: Document, step: Any, work: Work) -> None:
    work.report.warnings += pdfa.convert(doc, step.level, work.context.icc_profile)


def _facturx(doc: Document, step: Any, work: Work) -> None:
    where = f"{work.label}.xml"
    work.report.warnings += facturx.apply(
        doc, step.xml, step.profile, work.context.icc_profile, where
    )


def _mark(doc: Document, step: Any, work: Work) -> None:
    key = step.pdf if step.pdf is not None else mark_key(work.index)
    if key not in work.files:
        raise PdfInvalid(f"the {name_of(step)} of {work.label} was not printed")
    marks.place(doc.pdf(), work.files[key], name_of(step), step)


def _flatten(doc: Document, step: Any, work: Work) -> None:
    work.notes += pages.flatten(doc)


def _optimise(doc: Document, step: Any, work: Work) -> None:
    work.notes += optimise.optimise(doc, step)


def _metadata(doc: Document, step: Any, work: Work) -> None:
    metadata.write(doc.pdf(), step)
    if step.version is not None and "force_version" not in doc.save_kwargs:
        doc.save_kwargs = {**doc.save_kwargs, "min_version": step.version}


def _write_bookmarks(doc: Document, step: Any, work: Work) -> None:
    if step.document is None or step.document == doc.name:
        work.notes += bookmarks.write(doc, step.bookmarks)


def _sign(doc: Document, step: Any, work: Work) -> None:
    own = identity.opened(step.identity) if step.identity else None
    sign.apply(doc, step, own or work.context.signing, work.label)


_FLOWS: dict[type[Step], Callable[[list[Document], Any, Work], list[Document]]] = {
    Merge: _merge,
    Split: _split,
}
_EACH: dict[type[Step], Callable[[Document, Any, Work], None]] = {
    Rotate: lambda doc, step, work: pages.rotate(doc, step),
    Flatten: _flatten,
    Metadata: _metadata,
    ReadMetadata: lambda doc, step, work: work.report.metadata.append(
        metadata.read(doc.view(), doc.name)
    ),
    PdfA: _pdfa,
    PdfUA: lambda doc, step, work: pdfua.identify(doc, step),
    Encrypt: lambda doc, step, work: encrypt.apply(doc, step),
    Attach: lambda doc, step, work: attachments.attach(doc, step, work.files),
    FacturX: _facturx,
    Watermark: _mark,
    Stamp: _mark,
    Sign: _sign,
    Optimise: _optimise,
    Validate: lambda doc, step, work: work.report.validations.append(validate.validate(doc)),
    ReadBookmarks: lambda doc, step, work: work.report.bookmarks.append(bookmarks.read(doc)),
    WriteBookmarks: _write_bookmarks,
}
