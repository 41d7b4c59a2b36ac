"""File names of the documents a pipeline writes: safe to save as given (no folder, no
control character, no leading dot, at most `MAX_NAME` characters, ending in `.pdf`)
and unique in the job (a second `a.pdf` becomes `a-2.pdf`), as a ZIP of them needs."""

from __future__ import annotations

import re
import unicodedata

MAX_NAME = 120
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')


def safe(name: str, fallback: str = "document") -> str:
    """`name` as a file name anyone may save (see the module docstring)."""
    text = unicodedata.normalize("NFC", name)
    stem = _UNSAFE.sub("-", text).strip(" .-") or fallback
    if stem.lower().endswith(".pdf"):
        stem = stem[:-4].rstrip(" .-") or fallback
    return stem[: MAX_NAME - 4] + ".pdf"


def stem(name: str) -> str:
    """`name` without its `.pdf`."""
    return name[:-4] if name.lower().endswith(".pdf") else name


def unique(names: list[str]) -> list[str]:
    """`names` made safe, the later of equal ones (ignoring case) numbered."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate, number = safe(name), 1
        while candidate.lower() in taken:
            number += 1
            candidate = safe(f"{stem(safe(name))}-{number}")
        taken.add(candidate.lower())
        result.append(candidate)
    return result
