"""Validation of print options beyond their types (ranges, units, known values).

Shared by the gateway (a 400 naming the option) and anything else that accepts options.
"""

from __future__ import annotations

import re

from services.core.errors import RequestError
from services.core.events import PageOptions

PAPER_FORMATS = {"A3", "A4", "A5", "Letter", "Legal", "Tabloid"}
_LENGTH = re.compile(r"^\d+(\.\d+)?(px|in|cm|mm)?$")


def check_options(options: PageOptions) -> None:
    if options.format not in PAPER_FORMATS:
        allowed = ", ".join(sorted(PAPER_FORMATS))
        raise RequestError(f"options.format must be one of {allowed}", field="options.format")
    if not 0.1 <= options.scale <= 2.0:
        raise RequestError("options.scale must be between 0.1 and 2", field="options.scale")
    if options.margin is not None:
        for side in ("top", "right", "bottom", "left"):
            value = getattr(options.margin, side)
            if not _LENGTH.match(value):
                raise RequestError(
                    f"options.margin.{side} must be a length such as 10mm, 0.5in or 12px",
                    field=f"options.margin.{side}",
                )
