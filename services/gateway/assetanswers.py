"""What the asset routes answer (`assets.py`): stored files, their versions, a tenant's
listing and usage.

Apart from `answers.py`, whose conventions these follow (an `Answer` each, fields
described by the string under them).
"""

from __future__ import annotations

from services.gateway.answers import Answer, Count, Timestamp


class AssetVersion(Answer, kw_only=True):
    """One stored version of an asset: what a job gets when it names it."""

    name: str
    """The name a page refers to it by (`logo.png`, `fonts/brand.woff2`)."""
    version: int
    """Its version, from 1; a name stored again with other bytes gets the next one."""
    digest: str
    """The SHA-256 of its bytes, in hex."""
    size: Count
    """Its size in bytes."""
    content_type: str
    """Its type, sniffed from its bytes (never the one a client declared)."""
    created_at: Timestamp
    """When this version was stored."""


class StoredAsset(AssetVersion, kw_only=True):
    """A file of `POST /assets`, as stored."""

    new: bool
    """False when the name's latest version already had these bytes (nothing was added)."""


class AssetsStored(Answer, kw_only=True):
    """`POST /assets`: every file of the request, in the order sent."""

    assets: list[StoredAsset]
    """The files, each with the version it is stored as."""


class AssetSummary(Answer, kw_only=True):
    """A stored asset as listings show it: its latest version."""

    name: str
    """Its name."""
    latest_version: int
    """Its newest version."""
    versions: int
    """How many versions are stored."""
    size: Count
    """The newest version's size in bytes."""
    content_type: str
    """The newest version's sniffed type."""
    updated_at: Timestamp
    """When the newest version was stored."""


class AssetPage(Answer, kw_only=True):
    """`GET /assets`: the tenant's assets by name, with what they use of its quota."""

    assets: list[AssetSummary]
    """The assets, by name."""
    limit: int
    """How many were asked for at most."""
    offset: int
    """How many were skipped."""
    next_offset: int | None
    """The `offset` of the next page; null on the last page."""
    files: Count
    """Versions the tenant stores, of `PRESSROOM_ASSET_QUOTA_FILES`."""
    bytes: Count
    """Bytes those versions hold, of `PRESSROOM_ASSET_QUOTA_BYTES`."""


class Asset(Answer, kw_only=True):
    """`GET /assets/{name}`: every version of one asset, oldest first."""

    name: str
    """Its name."""
    versions: list[AssetVersion]
    """Its versions, oldest first."""


class AssetRemoved(Answer, kw_only=True):
    """`DELETE /assets/{name}`: what was deleted."""

    name: str
    """The asset's name."""
    versions: Count
    """How many versions were deleted."""
