"""The `split` step: each document as several, by page ranges, every N pages, or one
per top-level outline entry (pages before the first entry go with it); each part named
after its document (`invoice-1-3.pdf`, or the entry's title)."""

from __future__ import annotations

import pikepdf

from services.core.model.errors import OutputTooLarge
from services.core.model.options import page_numbers
from services.pdftools import outlines
from services.pdftools.document import Document
from services.pdftools.names import stem
from services.pdftools.steps import Split


def split(docs: list[Document], step: Split, most: int) -> list[Document]:
    """The parts of every document; `OutputTooLarge` past `most` of them."""
    out: list[Document] = []
    for doc in docs:
        source = doc.view()
        for name, numbers in parts(source, step, stem(doc.name)):
            if not numbers:
                continue
            part = pikepdf.new()
            for number in numbers:
                part.pages.append(source.pages[number - 1])
            out.append(Document.made(name, part, sources=[doc]))
            if len(out) > most:
                raise OutputTooLarge(
                    f"split makes more than {most} documents (PRESSROOM_PDF_MAX_OUTPUTS)"
                )
    return out


def parts(source: pikepdf.Pdf, step: Split, base: str) -> list[tuple[str, list[int]]]:
    """Each part's name and its page numbers (from 1)."""
    count = len(source.pages)
    if step.ranges is not None:
        chosen = [page_numbers(text, count) for text in step.ranges]
    elif step.every is not None:
        starts = range(1, count + 1, step.every)
        chosen = [list(range(first, min(first + step.every, count + 1))) for first in starts]
    else:
        return _by_outline(source, base, count)
    return [(_named(base, numbers), numbers) for numbers in chosen]


def _named(base: str, numbers: list[int]) -> str:
    if not numbers:
        return f"{base}.pdf"
    first, last = numbers[0], numbers[-1]
    return f"{base}-{first}.pdf" if first == last else f"{base}-{first}-{last}.pdf"


def _by_outline(source: pikepdf.Pdf, base: str, count: int) -> list[tuple[str, list[int]]]:
    """One part per top-level outline entry that goes to a page, in page order."""
    pages = outlines.page_index(source)
    starts: list[tuple[int, str]] = []
    for item in source.open_outline(max_depth=1).root:  # read only: no `with`
        index = outlines.target(item, source, pages)
        if index is not None:
            starts.append((index + 1, item.title or base))
    starts.sort()
    if not starts:
        return [(f"{base}.pdf", list(range(1, count + 1)))]
    starts[0] = (1, starts[0][1])
    ends = [start - 1 for start, _ in starts[1:]] + [count]
    return [
        (f"{title}.pdf", list(range(start, end + 1)))
        for (start, title), end in zip(starts, ends, strict=True)
    ]
