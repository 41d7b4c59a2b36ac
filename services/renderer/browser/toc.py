"""`options.toc`: fill the document's `<nav data-toc>` with its headings and the pages
they were printed on.

The page of a heading is only known once the document is printed, and writing the numbers
can move the layout (a table of contents that grows by a page pushes everything after
it). So a ToC job prints in passes: the entries are written (links and titles, no
numbers), the document printed, each heading's page read from the file, the numbers
written, and the document printed again, until a print gives the numbers it carries
(`MAX_PASSES` numbered prints at most). A job without `toc` never comes here.

A heading's page is read from the PDF's named destinations: Chromium writes one, exact,
for every element a fragment link points to, and every entry is such a link. Chromium
derives a destination's name from the link's URL fragment in a way of its own (non-ASCII
characters become `\\uXXXX`, some others percent-escaped), so links point only at ids
made of `[A-Za-z0-9_.:-]`, whose names are the ids themselves: a heading without an id
gets one; a heading whose id has other characters (or is not unique) keeps it, and its
entry points at an empty `<span>` with such an id put first inside the heading.

Everything is written with DOM calls (`textContent`, `setAttribute`), never as markup.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable, Sequence

from pypdf import PdfReader

from services.core.model.errors import RequestError
from services.renderer.browser.tablike import TabLike

MAX_PASSES = 3
"""Numbered prints before giving up on numbers that keep moving the layout: one is the
rule, two when the numbers pushed headings to other pages."""

# Builds the entries in the first `nav[data-toc]` and returns the id each entry links
# to (null without such a nav). Headings inside the nav or that a reader cannot see are
# left out: without a box (`display: none` on it or on a parent, the `hidden` attribute),
# or invisible (`visibility: hidden` or `collapse`, inherited or not, `content-visibility:
# hidden` on a parent), as `checkVisibility` judges them in the media the document is
# printed in.
_BUILD = """(() => {
  const nav = document.querySelector("nav[data-toc]");
  if (!nav) return null;
  const plain = /^[A-Za-z0-9_.:-]+$/;
  let serial = 0;
  const fresh = () => {
    let id;
    do { id = "pressroom-toc-" + ++serial; } while (document.getElementById(id));
    return id;
  };
  const target = (heading) => {
    if (!heading.id) heading.id = fresh();
    if (plain.test(heading.id) && document.getElementById(heading.id) === heading) {
      return heading.id;
    }
    const marker = document.createElement("span");
    marker.id = fresh();
    heading.prepend(marker);
    return marker.id;
  };
  const entries = document.createElement("ol");
  entries.setAttribute("data-toc-entries", "");
  const open = [{ level: 0, item: null, list: entries }];
  const ids = [];
  for (const heading of document.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    if (nav.contains(heading) || !heading.checkVisibility({ visibilityProperty: true })) continue;
    const level = Number(heading.tagName[1]);
    while (open.length > 1 && open[open.length - 1].level >= level) open.pop();
    const parent = open[open.length - 1];
    if (!parent.list) {
      parent.list = document.createElement("ol");
      parent.item.append(parent.list);
    }
    const id = target(heading);
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.setAttribute("href", "#" + id);
    link.textContent = heading.textContent.replace(/\\s+/g, " ").trim();
    const page = document.createElement("span");
    page.setAttribute("data-toc-page", "");
    item.append(link, page);
    parent.list.append(item);
    open.push({ level, item, list: null });
    ids.push(id);
  }
  nav.append(entries);
  return ids;
})()"""

# Writes each entry's page number, in the order `_BUILD` returned the ids.
_FILL = """((pages) => {
  const nav = document.querySelector("nav[data-toc]");
  const spans = nav.querySelectorAll(":scope > ol[data-toc-entries] [data-toc-page]");
  pages.forEach((page, i) => { spans[i].textContent = page; });
})"""


async def print_with_toc(tab: TabLike, print_pdf: Callable[[], Awaitable[bytes]]) -> bytes:
    """The document printed by `print_pdf` with its table of contents filled in.

    `RequestError` (field `options.toc`) when the document has no `<nav data-toc>`, when
    its own scripts broke the DOM calls used here, or when its numbers still moved the
    layout after `MAX_PASSES` numbered prints. Every print counts against the render's
    time limit and output limits like a single one.
    """
    ids = await _build(tab)
    pdf = await print_pdf()
    if not ids:
        return pdf
    pages = await asyncio.to_thread(heading_pages, pdf, ids)
    for _ in range(MAX_PASSES):
        await _fill(tab, pages)
        pdf = await print_pdf()
        printed = await asyncio.to_thread(heading_pages, pdf, ids)
        if printed == pages:
            return pdf
        pages = printed
    raise RequestError(
        f"options.toc: the page numbers still moved the layout after {MAX_PASSES} passes",
        field="options.toc",
    )


async def _build(tab: TabLike) -> list[str]:
    """Write the entries; the id each one links to, in document order. The headings are
    judged visible or not in print media unless the job emulates another one (a PDF is
    laid out on screen and printed in print media): a heading `@media print` hides is no
    entry."""
    if tab.emulation.media:
        value = await _run(tab, _BUILD)
    else:
        await tab.send("Emulation.setEmulatedMedia", tab.emulation.media_params("print"))
        try:
            value = await _run(tab, _BUILD)
        finally:
            await tab.send("Emulation.setEmulatedMedia", tab.emulation.media_params())
    if not isinstance(value, list):
        raise RequestError(
            "options.toc: the document has no <nav data-toc> element to fill",
            field="options.toc",
        )
    return [str(id_) for id_ in value]


async def _fill(tab: TabLike, pages: Sequence[str]) -> None:
    await _run(tab, f"({_FILL})({json.dumps(list(pages))})")


async def _run(tab: TabLike, expression: str) -> object:
    """`expression`'s value; an exception comes from the document itself (its scripts
    replaced the DOM calls used here), so the same job would fail again."""
    reply = await tab.evaluate(expression)
    if (details := reply.get("exceptionDetails")) is not None:
        text = str((details.get("exception") or {}).get("description") or details.get("text"))
        raise RequestError(
            f"options.toc: the table of contents could not be written: {text[:300]}",
            field="options.toc",
        )
    return reply.get("result", {}).get("value")


def heading_pages(pdf: bytes, ids: Sequence[str]) -> list[str]:
    """The page (from 1, as text) each of `ids` was printed on, `""` where the file has
    no destination for it (a heading hidden in print)."""
    reader = PdfReader(io.BytesIO(pdf))
    found: dict[str, int] = {}
    for name, destination in reader.named_destinations.items():
        page = reader.get_destination_page_number(destination)
        if page is not None:
            found[str(name).removeprefix("/")] = page + 1
    return [str(found[id_]) if id_ in found else "" for id_ in ids]
