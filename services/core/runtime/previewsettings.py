"""Settings of template previews (`"preview": true` jobs, an editor's renders).

A base of `Settings` (its fields are `Settings`' fields, read the same way from
`PRESSROOM_*` variables), kept apart as `assetsettings.py` is.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.settingvalues import int_in, var


@dataclass(frozen=True)
class PreviewSettings:
    """How many previews a tenant may have rendering at once."""

    preview_limit: int = var(
        "PRESSROOM_PREVIEW_LIMIT",
        4,
        int_in(1, 1000),
        "gateway: a tenant's unfinished template previews at most; the next is a 429",
    )
