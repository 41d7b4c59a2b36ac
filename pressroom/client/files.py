"""Files for the API: what a job, a template or the asset store is given, read from
paths, bytes or open files; and the calls of stored assets (`POST /assets`, …).

`files` may be a list of paths or open files (each named by its file's base name, as the
page refers to it: `logo.png`), or a mapping from the name the page uses to a path,
bytes or an open file (`{"fonts/brand.woff2": "build/brand.woff2"}`). The bytes are read
once, so a request sent again (a retry) sends the same ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, TypeAlias
from urllib.parse import quote

import msgspec

from pressroom.client.calls import Call, Page, decoder
from pressroom.client.models import Asset, AssetSummary

Named: TypeAlias = "str | os.PathLike[str] | BinaryIO"
"""A file named after itself: a path, or an open file (its `name`)."""

Content: TypeAlias = "str | os.PathLike[str] | bytes | BinaryIO"
"""One file: a path, its bytes, or a file open for reading in binary."""

Files: TypeAlias = "Mapping[str, Content] | Iterable[Named]"
"""A request's files: named by a mapping, or named after their paths (see the module)."""

Read = tuple[tuple[str, bytes], ...]


def read_files(files: Files | None) -> Read:
    """(name, bytes) of each file, in order."""
    if files is None:
        return ()
    if isinstance(files, Mapping):
        return tuple((str(name), _content(value)) for name, value in files.items())
    return tuple((_name_of(value), _content(value)) for value in files)


def _name_of(value: Named) -> str:
    if isinstance(value, (str, os.PathLike)):
        return Path(value).name
    name = getattr(value, "name", None)
    if not isinstance(name, str) or not Path(name).name:
        raise ValueError("an open file without a name: give files as a mapping {name: file}")
    return Path(name).name


def _content(value: Content) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Path(value).read_bytes()
    data = value.read()
    if not isinstance(data, bytes):
        raise TypeError("a file must be open in binary mode ('rb')")
    return data


def asset_path(name: str) -> str:
    """`/assets/{name}`, its `/`s kept (a name may have folders)."""
    return "/assets/" + quote(name, safe="/")


class _Stored(msgspec.Struct):
    assets: list[Asset]


class _Versions(msgspec.Struct):
    versions: list[Asset]


class _Removed(msgspec.Struct):
    versions: int


class AssetsPage(Page[AssetSummary]):
    entries: list[AssetSummary] = msgspec.field(name="assets")


def store_assets(files: Read) -> Call[list[Asset]]:
    return Call("POST", "/assets", lambda raw: decoder(_Stored)(raw).assets, files=files)


def assets_page(limit: int, offset: int) -> Call[AssetsPage]:
    params = {"limit": str(limit), "offset": str(offset)}
    return Call("GET", "/assets", decoder(AssetsPage), params=params)


def asset_versions(name: str) -> Call[list[Asset]]:
    return Call("GET", asset_path(name), lambda raw: decoder(_Versions)(raw).versions)


def delete_asset(name: str) -> Call[int]:
    return Call("DELETE", asset_path(name), lambda raw: decoder(_Removed)(raw).versions)


def names(assets: Sequence[str] | None) -> list[str] | None:
    return list(assets) if assets else None
