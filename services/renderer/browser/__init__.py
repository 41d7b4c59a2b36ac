"""The Chromium pool: HTML or a URL in, PDF or PNG bytes out. The only package that
speaks Chromium's DevTools protocol.

- `pool`: `BrowserPool`, which hands renders to tabs and replaces broken tabs and
  browsers.
- `launch`: starting Chromium (flags, environment, fonts, a launcher that dies with the
  renderer and runs it below the services' CPU priority).
- `process`: `Chromium`, one running browser process with its idle tabs.
- `privileges`: who Chromium runs as, and whether its own sandbox is on.
- `tab`: `Tab`, and what one render does on it (load, wait, print, capture).
- `interception`: `guard`, the egress request filter wired onto a tab's CDP sessions.
- `params`: pure code turning options into CDP parameters and tab settings.
- `documents`: what a render takes and gives (`Html`, `Url`, `RenderResult`).
- `cdp`: the DevTools protocol over a pipe, with flat sessions.
- `tasks`: awaiting the browser with a deadline.

What Chromium 156 needs care with is noted in the docstring of the module that handles
it (`cdp`, `launch`, `tab`, `interception`, `process`, `pool`).
"""

from services.renderer.browser.documents import PDF, PNG, Html, RenderResult, Source, Url
from services.renderer.browser.launch import CHROMIUM_ARGS, chromium_env
from services.renderer.browser.params import (
    DEFAULT_VIEWPORT,
    EMPTY_TEMPLATE,
    count_pages,
    emulation_for,
    javascript_for,
    needs_frames,
    print_params,
)
from services.renderer.browser.pool import BrowserPool

__all__ = [
    "CHROMIUM_ARGS",
    "DEFAULT_VIEWPORT",
    "EMPTY_TEMPLATE",
    "PDF",
    "PNG",
    "BrowserPool",
    "Html",
    "RenderResult",
    "Source",
    "Url",
    "chromium_env",
    "count_pages",
    "emulation_for",
    "javascript_for",
    "needs_frames",
    "print_params",
]
