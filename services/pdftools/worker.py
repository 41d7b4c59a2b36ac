"""`Tools`: pipelines run in worker processes (`core/sandbox/jail.py`, the mechanism that runs
templates and finishing), with a memory and a time limit, so a hostile or huge PDF can
neither block an event loop nor take a service's memory.

A limit exceeded is a `FinishingError` (deterministic: the same files would exceed it
again); the pipeline's own errors (`PdfInvalid`, `TooManyPages`…) arrive as raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.core.model.errors import FinishingError
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input, Result, run
from services.pdftools.steps import Step


def jail_of(settings: Settings, slots: int) -> Jail:
    """`slots` worker processes with the finishing limits (`PRESSROOM_FINISHING_*`)."""
    limits = TemplateLimits(
        settings.finishing_memory, settings.finishing_timeout, settings.max_output_bytes
    )
    return Jail(slots, limits, what="the PDF steps", error=FinishingError)


class Tools:
    """Runs pipelines in `jail` with the service's `context` and `limits`."""

    def __init__(self, jail: Jail, context: Context, limits: Limits) -> None:
        self.jail = jail
        self.context = context
        self.limits = limits

    async def run(
        self,
        inputs: Sequence[Input],
        steps: Sequence[Step],
        files: Mapping[str, bytes] | None = None,
    ) -> Result:
        """`pipeline.run` in a worker."""
        return await self.jail.call(
            run, list(inputs), list(steps), self.context, self.limits, dict(files or {})
        )
