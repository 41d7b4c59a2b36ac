"""Whole numbers a client spells as text (query parameters, headers, page ranges, link
expiries): one parser, strict about what a digit is and bounded before `int()` runs.

Python's `int()` takes far more than a client means by a number: other scripts' digits
(Arabic-Indic U+0661, full-width U+FF11), `'+1'`, `' 1 '`, `'1_000'`; and on thousands
of digits it raises `ValueError` (over 4,300) after spending quadratic time. `bounded_int` accepts
ASCII digits only, with a `-` in front where negatives are allowed, and counts the digits
against the bounds before converting them.
"""

from __future__ import annotations


def bounded_int(text: str, low: int, high: int) -> int | None:
    """The integer `text` spells, if it is one from `low` to `high`; None otherwise.

    Zeros in front are allowed (`007`); only the digits after them are counted against
    the widest bound, so no more digits than that ever reach `int()`."""
    negative = low < 0 and text.startswith("-")
    digits = text[1:] if negative else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(max(abs(low), abs(high)))):
        return None
    value = -int(significant) if negative else int(significant)
    return value if low <= value <= high else None
