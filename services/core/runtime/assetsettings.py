"""Settings of files that travel with jobs (assets): what one upload, one job and one
tenant may hold, and what a renderer keeps cached.

A base of `Settings` (its fields are `Settings`' fields, read the same way from
`PRESSROOM_*` variables), kept apart so the limits on files are read in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.filesettings import FileSettings
from services.core.runtime.settingvalues import int_in, var


@dataclass(frozen=True)
class AssetSettings(FileSettings):
    """The limits on files sent with jobs, stored as assets or bundled with templates."""

    max_file_bytes: int = var(
        "PRESSROOM_MAX_FILE_BYTES",
        10 * 2**20,
        int_in(1, 2**31),
        "largest file a request may carry (a part of a multipart request, a stored asset)",
    )
    max_files: int = var(
        "PRESSROOM_MAX_FILES",
        100,
        int_in(1, 10_000),
        "most files one request or one job may carry (uploaded and named stored assets)",
    )
    max_upload_bytes: int = var(
        "PRESSROOM_MAX_UPLOAD_BYTES",
        50 * 2**20,
        int_in(1024, 2**34),
        "most bytes of files one request or one job may carry, all files together",
    )
    asset_quota_files: int = var(
        "PRESSROOM_ASSET_QUOTA_FILES",
        1000,
        int_in(0, 10_000_000),
        "most stored asset versions a tenant may keep (0: none may be stored)",
    )
    asset_quota_bytes: int = var(
        "PRESSROOM_ASSET_QUOTA_BYTES",
        2**30,
        int_in(0, 2**50),
        "most bytes of stored asset versions a tenant may keep",
    )
    asset_cache_bytes: int = var(
        "PRESSROOM_ASSET_CACHE_BYTES",
        64 * 2**20,
        int_in(0, 2**40),
        "renderer: bytes of job files kept in memory by digest across jobs (0: no cache)",
    )
