"""The watermark and stamp pages, printed by Chromium before finishing.

Chromium, not our own code, sets a mark's text: it shapes every script the document's
fonts cover (Arabic, Devanagari, CJK, emoji) and embeds the font, which PDF/A demands;
writing a content stream by hand would mean subsetting and embedding fonts ourselves and
no shaping at all. An image mark is decoded by Chromium too. Each mark is a small page:
the text at 72 px (an image 1,000 px wide: the image keeps its own pixels, only its
placement is scaled), with its colour and opacity, on a page exactly its size
(`@page` set from its measured box, after `load`); the finishing step
(`finishing/marks.py`) scales, turns and places it. A job without a mark never comes
here.
"""

from __future__ import annotations

import dataclasses
import html

from services.core.model.pageoptions import Margin, Mark, PageOptions, WaitFor
from services.pdftools.marks import asked, style_of
from services.renderer.browser import BrowserPool, Html
from services.renderer.finishing import Context

# Measures the mark once it is laid out (images decoded) and makes the page its size;
# a `wait_for` expression, so it runs after `load` and the print waits for it.
_FIT_PAGE = """(() => {
  const box = document.getElementById("mark").getBoundingClientRect();
  const style = document.createElement("style");
  style.textContent = `@page { size: ${Math.ceil(box.width)}px ${Math.ceil(box.height)}px;
                               margin: 0 }`;
  document.head.append(style);
  return true;
})()"""

MARK_PRINT = PageOptions(
    margin=Margin(),
    prefer_css_page_size=True,
    tagged=False,  # the finishing step marks the placed mark as an artifact instead
    javascript=True,
    wait_for=WaitFor(expression=_FIT_PAGE),
)


def mark_html(kind: str, mark: Mark) -> str:
    """The page of one mark: its text or image alone, styled, on a transparent page."""
    style = style_of(kind, mark)
    if mark.image is not None:
        content = f'<img src="{html.escape(mark.image)}" alt="">'
    else:
        content = html.escape(mark.text or "")
    return (
        "<!doctype html><meta charset=utf-8><style>"
        "html,body{margin:0;padding:0;background:transparent}"
        "#mark{display:block;width:max-content;white-space:pre;font:bold 72px/1.15 sans-serif;"
        f"color:{style.color};opacity:{style.opacity:g}}}"
        "#mark img{display:block;width:1000px;height:auto}"
        f'</style><div id="mark">{content}</div>'
    )


async def with_marks(pool: BrowserPool, options: PageOptions, context: Context) -> Context:
    """`context` with the pages of the marks `options` ask for, printed on `pool`."""
    marks = asked(options)
    if not marks:
        return context
    printed = [
        (kind, (await pool.render(Html(mark_html(kind, mark)), MARK_PRINT)).data)
        for kind, mark in marks
    ]
    return dataclasses.replace(context, marks=tuple(printed))
