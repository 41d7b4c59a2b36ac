"""The safe-filename rule: every hostile class of name made safe (or refused, through
`problem`), names kept apart in one archive, and the download header's two forms."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.model.filenames import (
    MAX_BYTES,
    Unique,
    content_disposition,
    key,
    problem,
    safe_name,
)

HOSTILE = [
    # (class, name, safe name)
    ("path", "../../etc/passwd", "_.._etc_passwd"),
    ("path", "dir/a.pdf", "dir_a.pdf"),
    ("windows path", "..\\a.pdf", "_a.pdf"),
    ("unc path", "\\\\server\\share\\a.pdf", "__server_share_a.pdf"),
    ("drive letter", "C:a.pdf", "C_a.pdf"),
    ("drive path", "C:\\Windows\\a.pdf", "C__Windows_a.pdf"),
    ("ntfs stream", "a.pdf:Zone.Identifier", "a.pdf_Zone.Identifier"),
    ("windows forbidden", 'a<b>c"d|e?f*.pdf', "a_b_c_d_e_f_.pdf"),
    ("full-width slash", "a\uff0fb.pdf", "a_b.pdf"),
    ("full-width backslash", "a\uff3cb.pdf", "a_b.pdf"),
    ("division slash", "a\u2215b.pdf", "a_b.pdf"),
    ("fraction slash", "a\u2044b.pdf", "a_b.pdf"),
    ("big solidus", "a\u29f8b.pdf", "a_b.pdf"),
    ("reverse solidus operator", "a\u29f5b.pdf", "a_b.pdf"),
    ("set minus", "a\u2216b.pdf", "a_b.pdf"),
    ("reserved device", "CON", "_CON"),
    ("reserved device, extension", "con.pdf", "_con.pdf"),
    ("reserved device, two extensions", "NUL.tar.gz", "_NUL.tar.gz"),
    ("reserved device, space", "Aux .pdf", "_Aux .pdf"),
    ("reserved port", "com1.pdf", "_com1.pdf"),
    ("reserved port 0", "LPT0.pdf", "_LPT0.pdf"),
    ("reserved superscript port", "COM\u00b9.pdf", "_COM\u00b9.pdf"),
    ("reserved console", "CONIN$.txt", "_CONIN$.txt"),
    ("dot", ".", "file"),
    ("dot dot", "..", "file"),
    ("dots", "...", "file"),
    ("empty", "", "file"),
    ("hidden", ".bashrc", "bashrc"),
    ("trailing dot", "a.pdf.", "a.pdf"),
    ("trailing space", "a.pdf ", "a.pdf"),
    ("leading space", "  a.pdf", "a.pdf"),
    ("ideographic space", "\u3000a.pdf\u3000", "a.pdf"),
    ("nul", "a\x00b.pdf", "ab.pdf"),
    ("newline", "a\nb.pdf", "ab.pdf"),
    ("carriage return", "a\r\nb.pdf", "ab.pdf"),
    ("escape", "\x1b[31ma.pdf", "[31ma.pdf"),
    ("delete", "a\x7f.pdf", "a.pdf"),
    ("c1 control", "a\u0085b.pdf", "ab.pdf"),
    ("right-to-left override", "invoice\u202efdp.exe", "invoicefdp.exe"),
    ("right-to-left isolate", "a\u2067b\u2069.pdf", "ab.pdf"),
    ("right-to-left mark", "a\u200f.pdf", "a.pdf"),
    ("arabic letter mark", "a\u061c.pdf", "a.pdf"),
    ("zero-width space", "a\u200bb.pdf", "ab.pdf"),
    ("zero-width joiner", "a\u200db.pdf", "ab.pdf"),
    ("byte order mark", "\ufeffa.pdf", "a.pdf"),
    ("soft hyphen", "in\u00advoice.pdf", "invoice.pdf"),
    ("line separator", "a\u2028b.pdf", "ab.pdf"),
    ("hangul filler", "\u3164.pdf", "pdf"),
    ("braille blank", "a\u2800.pdf", "a.pdf"),
    ("private use", "a\ue000.pdf", "a.pdf"),
    ("only controls", "\x01\x02", "file"),
    ("decomposed", "cafe\u0301.pdf", "caf\u00e9.pdf"),
]


@pytest.mark.parametrize(("what", "name", "safe"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_every_hostile_class_is_made_safe_and_named_as_a_problem(what, name, safe):
    assert safe_name(name) == safe
    assert (problem(name) is None) == (what == "decomposed"), problem(name)


@pytest.mark.parametrize(
    "name",
    ["invoice-0042.pdf", "Rechnung März.pdf", "請求書 №1.pdf", "a.b.c.pdf", "x", "\u00e9.pdf"],
)
def test_ordinary_names_are_kept_and_no_problem(name):
    assert safe_name(name) == name
    assert problem(name) is None


def test_a_long_name_is_cut_in_bytes_on_a_character_boundary_keeping_its_extension():
    name = "\u65e5" * 100 + ".xlsx"  # 300 bytes of UTF-8, and the extension
    safe = safe_name(name)
    assert len(safe.encode()) <= MAX_BYTES and safe.endswith(".xlsx")
    assert safe == "\u65e5" * 83 + ".xlsx"
    assert problem(name) == f"must be at most {MAX_BYTES} bytes in UTF-8"
    cut = safe_name("a" * 250 + "   .." + "b" * 10 + ".pdf")  # the cut ends in spaces
    assert cut == "a" * 250 + ".pdf"


def test_a_name_at_the_limit_is_kept():
    name = "\u00e9" * 125 + "a.pdf"
    assert len(name.encode()) == MAX_BYTES
    assert safe_name(name) == name and problem(name) is None


def test_the_fallback_is_made_safe_too():
    assert safe_name("..", fallback="00007.pdf") == "00007.pdf"
    assert safe_name("\u200b", fallback="con.pdf") == "_con.pdf"


def test_names_in_one_archive_are_unique_ignoring_case_and_normalisation():
    names = Unique(["manifest.json"])
    taken = [
        names.take(name)
        for name in [
            "a.pdf",
            "A.pdf",
            "a.PDF",
            "caf\u00e9.pdf",
            "CAFE\u0301.pdf",
            "Manifest.JSON",
            "a/b.pdf",
            "a_b.pdf",
        ]
    ]
    assert taken == [
        "a.pdf",
        "A (2).pdf",
        "a (3).PDF",
        "caf\u00e9.pdf",
        "CAF\u00c9 (2).pdf",
        "Manifest (2).JSON",
        "a_b.pdf",
        "a_b (2).pdf",
    ]
    assert len({key(name) for name in taken}) == len(taken)


def test_a_numbered_name_still_fits_the_limit():
    names = Unique()
    long = "x" * 300 + ".pdf"
    first, second = names.take(long), names.take(long)
    assert len(first.encode()) == len(second.encode()) == MAX_BYTES
    assert second.endswith(" (2).pdf") and key(first) != key(second)


def test_ten_thousand_equal_names_are_numbered_in_one_pass():
    names = Unique()
    taken = [names.take("same.pdf") for _ in range(10_000)]
    assert taken[-1] == "same (10000).pdf" and len(set(taken)) == 10_000


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("b0123.zip", "attachment; filename=\"b0123.zip\"; filename*=UTF-8''b0123.zip"),
        (
            "Rechnung M\u00e4rz.pdf",
            "attachment; filename=\"Rechnung Marz.pdf\"; filename*=UTF-8''Rechnung%20M%C3%A4rz.pdf",
        ),
        (
            "\u8acb\u6c42\u66f8.pdf",
            "attachment; filename=\"___.pdf\"; filename*=UTF-8''%E8%AB%8B%E6%B1%82%E6%9B%B8.pdf",
        ),
        (
            'a"b\\c.pdf',
            "attachment; filename=\"a_b_c.pdf\"; filename*=UTF-8''a_b_c.pdf",
        ),
        (
            "\uff23\uff2f\uff2e.pdf",  # full-width CON: reserved once it is ASCII
            "attachment; filename=\"_CON.pdf\"; filename*=UTF-8''%EF%BC%A3%EF%BC%AF%EF%BC%AE.pdf",
        ),
        (
            "x\r\nSet-Cookie: a=b.pdf",
            'attachment; filename="xSet-Cookie_ a=b.pdf"; '
            "filename*=UTF-8''xSet-Cookie_%20a%3Db.pdf",
        ),
        (
            "\u2100.pdf",  # "account of": a, a slash and c once decomposed
            "attachment; filename=\"a_c.pdf\"; filename*=UTF-8''%E2%84%80.pdf",
        ),
    ],
)
def test_content_disposition_gives_the_exact_name_and_an_ascii_fallback(name, header):
    assert content_disposition(name) == header
    assert header.isascii()


FRAGMENTS = st.one_of(
    st.characters(),
    st.sampled_from('./\\:*?"<>| \t\u202e\u200b\uff0f\u2215\u0301\u00b9'),
    st.sampled_from(["CON", "nul", "COM1", "lpt", ".pdf", "..", "e\u0301"]),
    st.text(max_size=40),
)
NAMES = st.lists(FRAGMENTS, max_size=30).map("".join) | st.text(min_size=200, max_size=300)


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_any_name_becomes_one_that_the_rule_keeps_as_it_is(name):
    """Safe names are a fixed point (the rule leaves them alone, `problem` finds none),
    and `problem` finds one exactly when the rule would change more than NFC."""
    safe = safe_name(name)
    assert safe_name(safe) == safe and problem(safe) is None
    assert 0 < len(safe.encode()) <= MAX_BYTES
    assert safe == unicodedata.normalize("NFC", safe)
    assert (problem(name) is None) == (safe == unicodedata.normalize("NFC", name))
    assert not set(safe) & set('/\\:*?"<>|') and safe.strip(". ") == safe.strip()
