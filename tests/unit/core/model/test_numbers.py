"""Whole numbers spelled as text: ASCII digits within bounds, and nothing else, however
Python's `int()` would read it."""

from __future__ import annotations

import pytest

from services.core.model.numbers import bounded_int


@pytest.mark.parametrize(
    ("text", "low", "high", "value"),
    [
        ("0", 0, 10, 0),
        ("10", 0, 10, 10),
        ("007", 0, 10, 7),
        ("0" * 5000 + "7", 0, 10, 7),  # zeros in front are not digits to count
        ("-5", -10, 10, -5),
        ("-0", -10, 10, 0),
        ("18446744073709551615", 0, 2**64 - 1, 2**64 - 1),
        ("-9223372036854775808", -(2**63), 0, -(2**63)),
    ],
)
def test_ascii_digits_within_the_bounds_are_their_number(text, low, high, value):
    assert bounded_int(text, low, high) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "11",  # over the bound
        "-1",  # under it
        "\u0661\u0662",  # Arabic-Indic digits: int() reads 12
        "\uff11",  # a full-width one
        "\u00b2",  # a superscript two (str.isdigit() says yes, int() no)
        "+1",
        " 1",
        "1 ",
        "1_0",
        "1e1",
        "0x1",
        "1.0",
        "9" * 5000,  # int() raises ValueError past 4,300 digits
    ],
)
def test_anything_else_is_none(text):
    assert bounded_int(text, 0, 10) is None


def test_a_minus_sign_only_where_negatives_are_allowed():
    assert bounded_int("-0", 0, 10) is None
    assert bounded_int("--1", -10, 10) is None
