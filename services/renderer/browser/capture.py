"""What part of a loaded page an image captures: the page as tall as its content, the
viewport `options.height` sets, or the box of the element `options.selector` names.

Chromium's content size (`Page.getLayoutMetrics`' `cssContentSize`, `scrollHeight`) is
never less than the viewport, so a 250 px chart in the 600 px high viewport measured
600 px and its PNG was mostly white. Laying the page out in a viewport 1 px high, as a
receipt is, would measure it, but would also shrink whatever the page sizes by the
viewport (`100vh`, a `height: 100%` chart). So the page keeps its viewport, and when its
content size is the viewport's height the content is measured: the lowest bottom edge of
the root element, of every element and of the text (`_CONTENT_BOTTOM`). That walk runs
only for a page that fits in the viewport, so it stays small.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from services.core.model.errors import BrowserError, RequestError
from services.renderer.browser.tablike import TabLike

_CONTENT_BOTTOM = """(() => {
  const root = document.documentElement, body = document.body;
  // Without a doctype (quirks mode) <html> and <body> stretch to the viewport.
  const standard = document.compatMode === "CSS1Compat" || body === null;
  let bottom = standard ? root.getBoundingClientRect().bottom : 0;
  if (body !== null) {
    let content = 0;
    for (const element of body.querySelectorAll("*")) {
      content = Math.max(content, element.getBoundingClientRect().bottom);
    }
    const text = document.createRange();
    text.selectNodeContents(body);
    const style = getComputedStyle(body);
    const below = ["paddingBottom", "borderBottomWidth", "marginBottom"];
    content = Math.max(content, text.getBoundingClientRect().bottom);
    content += below.reduce((sum, side) => sum + parseFloat(style[side]), 0);
    bottom = Math.max(bottom, content);
  }
  return bottom + scrollY;
})()"""
"""The document's lowest drawn edge, in CSS px from its top: the root element's (but for
a document in quirks mode, whose root is stretched to the viewport), and below that of
every element and text in the body, plus the body's own padding, border and margin."""


_ELEMENT_BOX = """((selector) => {
  const element = document.querySelector(selector);
  if (element === null) return null;
  const box = element.getBoundingClientRect();
  return [box.left + scrollX, box.top + scrollY, box.width, box.height];
})"""
"""The first element `selector` matches: its border box in document CSS px (left, top,
width, height), or null. An invalid selector throws (a `SyntaxError` DOMException)."""


@dataclass(frozen=True)
class Clip:
    """A rectangle of the document in CSS px."""

    x: float
    y: float
    width: float
    height: float

    def params(self) -> dict[str, Any]:
        """As `Page.captureScreenshot`'s `clip` (its own scale 1: the tab's device scale
        factor already gives the pixels per CSS px)."""
        return {"x": self.x, "y": self.y, "width": self.width, "height": self.height, "scale": 1}


async def page_clip(tab: TabLike) -> Clip:
    """The whole page: as wide as its content (at least the viewport), as tall as its
    content (at least 1 px)."""
    metrics = await tab.send("Page.getLayoutMetrics")
    size, viewport = metrics["cssContentSize"], metrics["cssLayoutViewport"]
    width, height = math.ceil(size["width"]), math.ceil(size["height"])
    if height <= viewport["clientHeight"]:
        height = math.ceil(await _value(tab, _CONTENT_BOTTOM, "the page's height"))
    return Clip(0, 0, width, max(height, 1))


def viewport_clip(tab: TabLike) -> Clip:
    """The viewport the job's emulation set (`options.width` by `options.height`), from
    the top of the page."""
    viewport = tab.emulation.viewport
    return Clip(0, 0, viewport.width, viewport.height)


async def element_clip(tab: TabLike, selector: str) -> Clip:
    """The box of the first element `selector` matches, on device pixels. `RequestError`
    naming `options.selector` when it is invalid, matches nothing or matches an element
    with no box (`display: none`, empty)."""
    reply = await tab.evaluate(f"({_ELEMENT_BOX})({json.dumps(selector)})")
    if (details := reply.get("exceptionDetails")) is not None:
        raise _selector_error(selector, f"is invalid: {_exception_text(details)}")
    box = reply.get("result", {}).get("value")
    if box is None:
        raise _selector_error(selector, "matched nothing")
    left, top, width, height = (float(edge) for edge in box)
    if width <= 0 or height <= 0:
        raise _selector_error(selector, "matched an element with no box (hidden or empty)")
    return _snapped(left, top, width, height, tab.emulation.viewport.scale)


def _snapped(left: float, top: float, width: float, height: float, scale: float) -> Clip:
    """The box with its edges on the nearest device pixels, where Chromium paints the
    edges of a box at a fractional position: the clip then holds the element's pixels,
    none of its neighbours'."""
    x, y = round(left * scale), round(top * scale)
    right, bottom = round((left + width) * scale), round((top + height) * scale)
    return Clip(x / scale, y / scale, (right - x) / scale, (bottom - y) / scale)


def _selector_error(selector: str, what: str) -> RequestError:
    return RequestError(f"options.selector {selector[:200]!r} {what}", field="options.selector")


def _exception_text(details: dict[str, Any]) -> str:
    exception = details.get("exception") or {}
    return str(exception.get("description") or details.get("text") or "error").split("\n")[0]


async def _value(tab: TabLike, expression: str, what: str) -> float:
    reply = await tab.evaluate(expression)
    value = reply.get("result", {}).get("value")
    if not isinstance(value, int | float):
        raise BrowserError(f"could not measure {what}: {reply.get('exceptionDetails')}")
    return float(value)
