"""What a loaded tab becomes: its PDF (`print_pdf`) or image (`screenshot`).

Printing goes straight to CDP `Page.printToPDF` on the tab's own session: `Page.pdf`
passes neither `generateTaggedPDF` nor anything we did not know about when it was
written, and one path for every option is easier to reason about (the parameters are
made in `params`). The PDF is streamed out of Chromium and held to the job's limits while
it is made and read (`limits`).
"""

from __future__ import annotations

import base64
import math
from typing import Any

import msgspec

from services.core.model.errors import OutputTooLarge, RequestError
from services.core.model.options import CSS_PX_PER_INCH, MAX_PAPER_INCHES
from services.core.model.pageoptions import PageOptions
from services.renderer.browser.capture import element_clip, page_clip, viewport_clip
from services.renderer.browser.cdp import CommandError
from services.renderer.browser.limits import Limits, capped_ranges, check_pages, nth_selected
from services.renderer.browser.params import check_image_size, count_pages, print_params
from services.renderer.browser.tablike import TabLike

# The height a receipt needs: the document's full height at the receipt's width.
_CONTENT_HEIGHT = (
    "Math.ceil(Math.max(document.documentElement.scrollHeight,"
    " document.documentElement.getBoundingClientRect().height))"
)

STREAM_CHUNK = 4 * 2**20
"""Bytes asked for per `IO.read` of a PDF: an invoice comes in one read."""


async def print_pdf(tab: TabLike, options: PageOptions, limits: Limits) -> bytes:
    """Print the loaded document with `Page.printToPDF`, streamed out of Chromium
    (`ReturnAsStream`) so that a document over `limits.output_bytes` is refused while it
    is read, not after the whole of it was held in memory, twice (base64 and bytes).
    Chromium is asked for one page more than `limits.pages` at most (`capped_ranges`):
    a document that has more fails without the rest being drawn."""
    tab.printing = True  # a timeout from now on is the print's (`PrintTimeout`)
    params = {**print_params(options), "transferMode": "ReturnAsStream"}
    params["pageRanges"] = capped_ranges(options.page_ranges, limits.pages + 1)
    if options.receipt_width is not None:
        params["paperHeight"] = await _receipt_height(tab, options, params)
    else:
        await _probe_length(tab, options, params, limits)
    try:
        reply = await tab.send("Page.printToPDF", params)
    except CommandError as exc:
        # "Page range exceeds page count": the ranges were valid, but not for this document.
        if "Page range" in str(exc):
            message = str(exc).rsplit(": ", 1)[-1]
            raise RequestError(
                f"options.page_ranges: {message}", field="options.page_ranges"
            ) from exc
        raise
    pdf = await _read_stream(tab, str(reply["stream"]), limits.output_bytes)
    check_pages(count_pages(pdf), limits)
    return pdf


async def _probe_length(
    tab: TabLike, options: PageOptions, params: dict[str, Any], limits: Limits
) -> None:
    """`TooManyPrintedPages` before anything is drawn for a document that looks long (its height
    on screen is more than half `limits.pages` pages) and has a page past the limit: only
    that page is printed, which costs Chromium the pagination alone, far less than drawing
    every page up to the limit would (docs/benchmarks-history.md). Chromium answers "Page
    range exceeds page count" when there is none; the document is then printed as asked."""
    past = nth_selected(options.page_ranges, limits.pages + 1)
    if past is None or await _screen_pages(tab, options, params) <= limits.pages / 2:
        return
    probe = {**params, "pageRanges": str(past), "transferMode": "ReturnAsBase64"}
    try:
        await tab.send("Page.printToPDF", probe)
    except CommandError as exc:
        if "Page range" in str(exc):
            return
        raise
    check_pages(limits.pages + 1, limits)


async def _screen_pages(tab: TabLike, options: PageOptions, params: dict[str, Any]) -> float:
    """Roughly how many pages the document's height on screen fills: a hint of its
    length (print media, page breaks and margins cut at breaks change it either way)."""
    reply = await tab.evaluate(_CONTENT_HEIGHT)
    height = float(reply.get("result", {}).get("value") or 0)
    side = float(params["paperWidth"] if options.landscape else params["paperHeight"])
    page = (side - float(params["marginTop"]) - float(params["marginBottom"])) * CSS_PX_PER_INCH
    return height * options.scale / max(page, 1.0)


class StreamChunk(msgspec.Struct):
    """An `IO.read` answer for a binary stream (a PDF): Chromium sends it as base64,
    which msgspec decodes while reading the message."""

    data: bytes = b""
    base64Encoded: bool = False
    eof: bool = False


_STREAM_CHUNK = msgspec.json.Decoder(StreamChunk)


async def _read_stream(tab: TabLike, handle: str, limit: int) -> bytes:
    """The bytes of a CDP `IO` stream, at most `limit` of them; the stream is closed."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = await tab.session.send_as(
                _STREAM_CHUNK, "IO.read", {"handle": handle, "size": STREAM_CHUNK}
            )
            size += len(chunk.data)
            if size > limit:
                raise OutputTooLarge(
                    f"PDF is over the limit of {limit} bytes (PRESSROOM_MAX_OUTPUT_BYTES)"
                )
            chunks.append(chunk.data)
            if chunk.eof:
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        await tab.send("IO.close", {"handle": handle})


async def _receipt_height(tab: TabLike, options: PageOptions, params: dict[str, Any]) -> float:
    """Paper height in inches that holds the whole document on one page."""
    reply = await tab.evaluate(_CONTENT_HEIGHT)
    content = float(reply["result"]["value"]) * options.scale / CSS_PX_PER_INCH
    height = float(content + params["marginTop"] + params["marginBottom"])
    if height > MAX_PAPER_INCHES:
        raise OutputTooLarge(
            f"receipt is {height * 25.4:.0f} mm long, over the PDF page limit of 5080 mm"
        )
    return height


_TRANSPARENT = {"color": {"r": 0, "g": 0, "b": 0, "a": 0}}
"""`Emulation.setDefaultBackgroundColorOverride`'s colour for no background at all."""


async def screenshot(tab: TabLike, options: PageOptions) -> bytes:
    """An image (`options.output`: PNG, JPEG or WebP) of the box of the element
    `options.selector` matches, else of the viewport when `options.height` sets it, else
    of the whole page as tall as its content (`capture`), `options.scale` device pixels
    per CSS pixel. JPEG and WebP at `options.quality`; with `options.omit_background`
    (PNG, WebP) the page's default white is left out, so where the page paints nothing
    the image is transparent."""
    if options.selector is not None:
        clip = await element_clip(tab, options.selector)
    elif options.height is not None:
        clip = viewport_clip(tab)
    else:
        clip = await page_clip(tab)
    scale = options.scale
    check_image_size(math.ceil(clip.width * scale), math.ceil(clip.height * scale), options.output)
    params: dict[str, Any] = {
        "format": options.output,
        "clip": clip.params(),
        "captureBeyondViewport": True,
    }
    if options.quality is not None:
        params["quality"] = options.quality
    # A screenshot waits for the tab to commit a frame. Headless tabs in the background
    # (all but the last one opened) are reported elsewhere to sometimes never commit one;
    # here a capture hung once until the render timeout, in ~300 not reproduced. So the
    # capturing tab is brought to the front first, one tab at a time, so that no other
    # capture sends it back meanwhile.
    async with tab.foreground:
        await tab.send("Page.bringToFront")
        if options.omit_background:
            await tab.send("Emulation.setDefaultBackgroundColorOverride", _TRANSPARENT)
        try:
            reply = await tab.send("Page.captureScreenshot", params)
        finally:
            if options.omit_background:  # no colour: back to the default white
                await tab.send("Emulation.setDefaultBackgroundColorOverride", {})
    return base64.b64decode(reply["data"])
