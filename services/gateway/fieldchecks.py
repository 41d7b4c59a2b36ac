"""Checks every request module shares: a decoded body converted to its Struct with the
failing field named, and the string checks the types cannot express (not blank, no NUL).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from services.core.model.errors import RequestError

_PATH = re.compile(r"at `\$\.?([^`]*)`")
_NAMED = re.compile(r"(?:required|unknown) field `([^`]*)`")

_T = TypeVar("_T")


def convert(raw: dict[str, Any], kind: type[_T]) -> _T:
    """`raw` as `kind`; `RequestError` naming the field that is wrong."""
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        message = str(exc)
        raise RequestError(message, field=_field_of(message)) from None


def _field_of(message: str) -> str:
    """The dotted field a msgspec message is about (`options.margin.top`), else `body`."""
    match = _PATH.search(message)
    path = match.group(1) if match else ""
    named = _NAMED.search(message)
    if named:
        return f"{path}.{named.group(1)}" if path else named.group(1)
    return path or "body"


def not_blank(value: str, field: str) -> None:
    """`RequestError` naming `field` if `value` is empty or only white space."""
    if not value.strip():
        raise RequestError(f"{field} must not be empty", field=field)


def no_nul(value: str | None, field: str) -> None:
    """PostgreSQL `text` cannot hold NUL: refuse it here rather than fail the insert."""
    if value is not None and "\x00" in value:
        raise RequestError(f"{field} must not contain NUL characters", field=field)
