"""File names of the documents a pipeline writes: `core/model/filenames`' rule (safe to save
or unpack anywhere, unique ignoring case, a later `a.pdf` becoming `a (2).pdf`), and
ending in `.pdf`."""

from __future__ import annotations

from collections.abc import Iterable

from services.core.model import filenames

FALLBACK = "document.pdf"


def stem(name: str) -> str:
    """`name` without its `.pdf`."""
    return name[:-4] if name.lower().endswith(".pdf") else name


def pdf_name(name: str) -> str:
    """`name` made safe, with `.pdf` at its end."""
    safe = filenames.safe_name(name, FALLBACK)
    if safe.lower().endswith(".pdf"):
        return safe
    return filenames.safe_name(filenames.fit(safe, filenames.MAX_BYTES - 4) + ".pdf", FALLBACK)


def unique(names: Iterable[str]) -> list[str]:
    """`names` made safe PDF names, unique within one job's documents."""
    taken = filenames.Unique()
    return [taken.take(pdf_name(name), FALLBACK) for name in names]
