"""`Finisher`: the finishing steps run in worker processes of their own, with a memory
and a time limit (`core/sandbox/jail.py`, the mechanism that runs templates), so a hostile or
huge document cannot block the renderer's event loop or take its memory.

Only a PDF whose options ask for a step goes there (`finishing.needed`), or a tagged one,
or an untagged one over `PRESSROOM_COMPACT_PDF_BYTES` (`finishing.compacts`): a small
untagged job pays nothing.
A limit exceeded is a `FinishingError` (deterministic: the same document would exceed
it again), as is a step refusing its input; a finished PDF over
`PRESSROOM_MAX_OUTPUT_BYTES` is `OutputTooLarge`.
"""

from __future__ import annotations

import dataclasses

from services.core.model.errors import FinishingError, OutputTooLarge
from services.core.model.pageoptions import PageOptions
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.renderer import finishing
from services.renderer.browser.documents import PDF, RenderResult


def jail_of(settings: Settings) -> Jail:
    """The finishing workers: one per page that may be printing at once."""
    limits = TemplateLimits(
        settings.finishing_memory, settings.finishing_timeout, settings.max_output_bytes
    )
    return Jail(settings.render_concurrency, limits, what="finishing the PDF", error=FinishingError)


class Finisher:
    """Runs `finishing.finish` in `jail` for the documents that need it; `compact_bytes`
    is `PRESSROOM_COMPACT_PDF_BYTES` (default: the setting's)."""

    def __init__(
        self,
        jail: Jail,
        context: finishing.Context,
        compact_bytes: int = Settings.compact_pdf_bytes,
    ) -> None:
        self.jail = jail
        self.context = context
        self.compact_bytes = compact_bytes

    async def finished(self, result: RenderResult, options: PageOptions) -> RenderResult:
        """`result` with its finishing steps done (itself when none applies)."""
        if result.content_type != PDF:
            return result
        if not finishing.needed(options) and not finishing.compacts(
            len(result.data), self.compact_bytes, options.tagged
        ):
            return result
        data = await self.jail.call(finishing.finish, result.data, options, self.context)
        limit = self.jail.limits.output_chars
        if len(data) > limit:
            raise OutputTooLarge(f"finished PDF is {len(data)} bytes, over the limit of {limit}")
        return dataclasses.replace(result, data=data)
