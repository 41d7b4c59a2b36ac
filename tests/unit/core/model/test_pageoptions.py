"""The print options' reference table names exactly the fields of `PageOptions`: an option
added without a row, or a row left for an option that went, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from services.core.model.pageoptions import PageOptions

REFERENCE = Path(__file__).parents[4] / "docs" / "print-options.md"
"""Where the options' table is: its header `| option | type, default | rule and meaning |`."""

HEADER = "| option | type, default | rule and meaning |"


def documented_options() -> set[str]:
    """Every option a row of the table names (a row may name two: `width`, `height`)."""
    text = REFERENCE.read_text(encoding="utf-8")
    assert HEADER in text, f"the options' table is gone from {REFERENCE}"
    table = text[text.index(HEADER) :].split("\n\n")[0]
    cells = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", table, re.M)
    return {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}


def test_the_options_table_names_every_option_and_no_other():
    fields = {field.encode_name for field in msgspec.structs.fields(PageOptions)}
    assert documented_options() == fields
