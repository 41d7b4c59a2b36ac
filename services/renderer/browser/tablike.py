"""What printing, capturing, the document limits and a table of contents need of a tab.

`tab.Tab` is the one implementation; `output`, `capture`, `limits`, `toc` and `diagnosis`
take a `TabLike`, not a `Tab`, so `tab` imports them and none of them imports `tab` back.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from services.renderer.browser.cdp import Session
from services.renderer.browser.params import Emulation
from services.renderer.evidence import Evidence


class TabLike(Protocol):
    session: Session
    """The tab's flat DevTools session."""
    emulation: Emulation
    """What the tab emulates now (JavaScript, media, viewport)."""
    printing: bool
    """Set once the job's page is loaded and being printed: a timeout is then the print's."""
    evidence: Evidence
    """What the tab's current job's page did (requests, refusals, console, errors)."""
    foreground: asyncio.Lock
    """Shared by a browser's tabs: held while a tab must be in front (a screenshot)."""

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A DevTools command on the tab's session, its result."""
        ...

    async def evaluate(self, expression: str) -> dict[str, Any]:
        """`Runtime.evaluate` of `expression` in the page, awaiting a promise; the reply."""
        ...
