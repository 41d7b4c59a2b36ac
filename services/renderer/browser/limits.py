"""What a document may be, checked as early as each can be: `Limits`.

A document that can never fit must fail on its first attempt, at once, with its own error
type and a message naming the limit and the setting that raises it, rather than time out
and be retried (a retry costs the other tenants a page for as long again). Each limit is
checked where it first can be, cheapest first:

- header and footer templates, by size, before a tab is taken (Chromium lays them out
  again on every page, so their cost is their size times the page count);
- the document's nodes (elements, text, comments, its frames' included), counted with
  one `Runtime.evaluate` once it is loaded and again before printing: a tagged PDF's cost
  grows with the square of them;
- a table of contents' headings, counted before its entries are written (each print pass
  and each page lookup grows with them);
- the page count while printing: Chromium is asked for the first `pages + 1` pages the
  job's `page_ranges` select (every page when it has none), so a document of 50,000
  pages is cut at its 501st and fails as `too_many_pages` without the rest being drawn;
  and a document that looks long on screen is first asked for its page `pages + 1`
  alone (`output._probe_length`), which fails it before a page is drawn;
- the output bytes while the PDF is read out of Chromium (`tab._read_stream`).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.model.errors import DomTooLarge, HeaderTooLarge, TocTooLarge, TooManyPrintedPages
from services.core.model.options import page_intervals
from services.core.model.pageoptions import PageOptions
from services.core.runtime.settings import Settings
from services.renderer.browser.tablike import TabLike

# The nodes of the document and of the frames whose documents it can reach (a srcdoc
# or same-origin frame is laid out and printed with it), counted by XPath in C++.
_COUNT_NODES = """(() => {
  let count = 0;
  const documents = [document];
  for (const doc of documents) {
    count += doc.evaluate("count(//node())", doc, null, XPathResult.NUMBER_TYPE, null)
      .numberValue;
    for (const frame of doc.querySelectorAll("iframe, frame")) {
      try { if (frame.contentDocument) documents.push(frame.contentDocument); } catch (e) {}
    }
  }
  return count;
})()"""

_COUNT_HEADINGS = 'document.querySelectorAll("h1, h2, h3, h4, h5, h6").length'


@dataclass(frozen=True)
class Limits:
    """A renderer's limits on one document (each a `PRESSROOM_*` setting)."""

    output_bytes: int = Settings.max_output_bytes
    pages: int = Settings.max_pages
    dom_nodes: int = Settings.max_dom_nodes
    header_bytes: int = Settings.max_header_bytes
    toc_entries: int = Settings.max_toc_entries


def check_template_sizes(options: PageOptions, limits: Limits) -> None:
    """`HeaderTooLarge` for a header or footer template over `limits.header_bytes` (as
    sent: the job's files written in later do not count)."""
    for name in ("header_template", "footer_template"):
        template = getattr(options, name)
        if template is None:
            continue
        size = len(template.encode("utf-8", "surrogatepass"))
        if size > limits.header_bytes:
            raise HeaderTooLarge(
                f"options.{name} is {size:,} bytes, over the limit of {limits.header_bytes:,} "
                "(PRESSROOM_MAX_HEADER_BYTES; Chromium lays it out again on every page)",
                field=f"options.{name}",
            )


async def check_nodes(tab: TabLike, limits: Limits) -> None:
    """`DomTooLarge` when the loaded document has more nodes than `limits` allow."""
    count = await _number(tab, _COUNT_NODES)
    if count > limits.dom_nodes:
        raise DomTooLarge(
            f"the document has {count:,} nodes, over the limit of {limits.dom_nodes:,} "
            "(PRESSROOM_MAX_DOM_NODES); split it into smaller documents"
        )


async def check_headings(tab: TabLike, limits: Limits) -> None:
    """`TocTooLarge` when a table of contents would have more entries than allowed."""
    count = await _number(tab, _COUNT_HEADINGS)
    if count > limits.toc_entries:
        raise TocTooLarge(
            f"options.toc: the document has {count:,} headings, over the limit of "
            f"{limits.toc_entries:,} entries (PRESSROOM_MAX_TOC_ENTRIES)",
            field="options.toc",
        )


def check_pages(count: int, limits: Limits) -> None:
    """`TooManyPrintedPages` for a PDF of `count` pages, printed with `capped_ranges` (so that
    `limits.pages + 1` means "at least that many": printing stopped there)."""
    if count <= limits.pages:
        return
    over = f"over the limit of {limits.pages:,} (PRESSROOM_MAX_PAGES)"
    if count == limits.pages + 1:
        raise TooManyPrintedPages(
            f"the PDF has more than {limits.pages:,} pages, {over}; printing stopped at page "
            f"{count:,}"
        )
    raise TooManyPrintedPages(f"the PDF has {count:,} pages, {over}")


async def _number(tab: TabLike, expression: str) -> int:
    reply = await tab.evaluate(expression)
    value = reply.get("result", {}).get("value")
    return int(value) if isinstance(value, int | float) else 0


def capped_ranges(page_ranges: str | None, pages: int) -> str:
    """`Page.printToPDF`'s `pageRanges` for the first `pages` pages that `page_ranges`
    (validated: `options.check_options`) selects, every page without it.

    Chromium prints the union of the ranges in ascending order, ends cut at the last
    page, so the first `pages` pages of that union print exactly what the job's ranges
    would as long as those hold at most `pages` pages, and `pages` of them otherwise.
    """
    if page_ranges is None:
        return f"1-{pages}"
    cut: list[str] = []
    left = pages
    for first, last in _union(page_intervals(page_ranges)):
        if left <= 0:
            break
        stop = first + left - 1 if last is None else min(last, first + left - 1)
        cut.append(f"{first}-{stop}" if stop > first else str(first))
        left -= stop - first + 1
    return ", ".join(cut)


def nth_selected(page_ranges: str | None, n: int) -> int | None:
    """The `n`th page (from 1) that `page_ranges` selects, every page without it; None
    when the ranges select fewer than `n` pages whatever the document's length."""
    if page_ranges is None:
        return n
    for first, last in _union(page_intervals(page_ranges)):
        if last is None or n <= last - first + 1:
            return first + n - 1
        n -= last - first + 1
    return None


def _union(intervals: list[tuple[int, int | None]]) -> list[tuple[int, int | None]]:
    """The intervals merged, ascending (None: to the last page)."""
    merged: list[tuple[int, int | None]] = []
    for first, last in sorted(intervals, key=lambda interval: interval[0]):
        if merged and (merged[-1][1] is None or first <= merged[-1][1] + 1):
            end = merged[-1][1]
            merged[-1] = (merged[-1][0], None if end is None or last is None else max(end, last))
        else:
            merged.append((first, last))
    return merged
