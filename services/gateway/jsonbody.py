"""JSON request bodies decoded strictly: an object, nested at most `MAX_DEPTH` deep, with
no NUL in any string and no number out of range; each problem a `RequestError` naming
the field it is in (`data.rows[3].n`), else `body`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import msgspec

from services.core.model.errors import RequestError
from services.core.model.numbers import bounded_int

MAX_DEPTH = 32
"""How deeply a request's JSON may nest: far more than any document needs, and far less
than what makes PostgreSQL's jsonb or a template's recursion give up."""

LOWEST_INT, HIGHEST_INT = -(2**63), 2**64 - 1
"""The integers a body may hold: 64 bits, signed or not. msgspec alone would take up to
Python's 4,300 digits, each converted by `int()` in quadratic time, and carried on into
events, PostgreSQL and templates."""

_ALL_DIGITS_ZERO = bytes.maketrans(b"123456789", b"0" * 9)
_LONG_DIGITS = b"0" * 20
"""Twenty digits in a row (once every digit is a 0): where an integer out of 64 bits may
be. Bodies without them (nearly all) skip the search for it. A translation and a
substring search cost a tenth of the regular expression `[0-9]{20}`, which tries a match
at every digit."""


def parse_json(body: bytes) -> dict[str, Any]:
    """Decode a JSON object, or raise `RequestError` saying what is wrong with it
    (including nesting deeper than `MAX_DEPTH`, and numbers out of range)."""
    value = _decoded(body)
    # Fewer brackets than the limit cannot nest deeper than it: most bodies skip the walk.
    brackets = body.count(b"[") + body.count(b"{")
    if value is None or (brackets > MAX_DEPTH and _too_deep(value, MAX_DEPTH)):
        raise RequestError(f"body nests deeper than {MAX_DEPTH} levels", field="body")
    if not isinstance(value, dict):
        raise RequestError("body must be a JSON object", field="body")
    if b"\\u0000" in body and (path := _first(value, _has_nul)) is not None:
        # PostgreSQL's text and jsonb cannot hold NUL: refuse it here rather than let an
        # accepted job jam the projection. (Only a real NUL: the text "\\u0000" escaped
        # in a script is fine.)
        raise RequestError(f"{path} must not contain NUL characters (\\u0000)", field=path)
    if _LONG_DIGITS in body.translate(_ALL_DIGITS_ZERO) and (path := _out_of_range_at(body)):
        raise _out_of_range(path)
    return value


def _decoded(body: bytes) -> Any:
    """The body decoded by msgspec; None if it nests deeper than the decoder goes."""
    try:
        return msgspec.json.decode(body)
    except msgspec.ValidationError:  # untyped decoding fails only on a number's range
        raise _out_of_range(_out_of_range_at(body) or "body") from None
    except msgspec.DecodeError as exc:
        raise RequestError(f"body is not valid JSON: {exc}", field="body") from None
    except RecursionError:
        return None  # certainly deeper than MAX_DEPTH


def _out_of_range(path: str) -> RequestError:
    return RequestError(
        f"{path} is a number out of range: an integer must fit in 64 bits "
        f"({LOWEST_INT} to {HIGHEST_INT}), any other number in a double",
        field=path,
    )


def _too_deep(value: Any, limit: int) -> bool:
    """Whether `value` (decoded JSON) nests arrays and objects more than `limit` deep.

    Level by level, and only containers go to the next level: an invoice's hundreds of
    strings and numbers are looked at once each, not stacked (a fifth of the CPU)."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level = below
        depth += 1
    return False


class _OutOfRange:
    """Marks, in a body decoded again by the standard library, a number msgspec refused."""


_OUT = _OutOfRange()


def _int(text: str) -> object:
    value = bounded_int(text, LOWEST_INT, HIGHEST_INT)  # never int() on 5,000 digits
    return _OUT if value is None else value


def _float(text: str) -> object:
    return _OUT if math.isinf(float(text)) else 0.0


def _out_of_range_at(body: bytes) -> str | None:
    """The field of the first number out of range, found by decoding the body again with
    the standard library, whose hooks see each number's text; None if there is none, and
    `body` if that decoder fails (on a body msgspec refused, or one nested too deep)."""
    try:
        value = json.loads(body, parse_int=_int, parse_float=_float)
        return _first(value, lambda item: item is _OUT)
    except (ValueError, RecursionError):
        return "body"


def _has_nul(item: Any) -> bool:
    return isinstance(item, str) and "\x00" in item


def _first(value: Any, bad: Callable[[Any], bool], path: str = "") -> str | None:
    """The path (`data.rows[3].n`) of the first value or key that is `bad`; None if none."""
    if bad(value):
        return path or "body"
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else str(key)
            if bad(key):
                return name
            items.append((name, item))
    elif isinstance(value, list):
        items = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    for name, item in items:
        if (found := _first(item, bad, name)) is not None:
            return found
    return None
