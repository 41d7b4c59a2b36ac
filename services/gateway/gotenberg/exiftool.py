"""A PDF-tools job's report of metadata read, in the ExifTool-style keys Gotenberg's
`metadata/read` answers with: `{"<file>": {"Title": …, "CreateDate": "2018:12:06
17:50:06+00:00", "PageCount": 3, "PDFVersion": 1.4, …}}`."""

from __future__ import annotations

import re
from typing import Any

INFO_KEYS = {
    "Title": "Title",
    "Author": "Author",
    "Subject": "Subject",
    "Keywords": "Keywords",
    "Creator": "Creator",
    "Producer": "Producer",
    "CreationDate": "CreateDate",
    "ModDate": "ModifyDate",
    "Trapped": "Trapped",
}
"""Document information keys and ExifTool's names for them."""

_DATE = re.compile(r"D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?([Zz+-])?(\d{2})?'?(\d{2})?")


def exif_date(value: str) -> str:
    """A PDF date (`D:20181206175006+00'00'`) as ExifTool writes it
    (`2018:12:06 17:50:06+00:00`); other text unchanged."""
    found = _DATE.match(value.strip())
    if found is None:
        return value
    year, month, day, hour, minute, second, sign, tz_hour, tz_minute = found.groups()
    text = f"{year}:{month or '01'}:{day or '01'} {hour or '00'}:{minute or '00'}:{second or '00'}"
    if sign in ("Z", "z"):
        return text + "Z"
    if sign is not None:
        return f"{text}{sign}{tz_hour or '00'}:{tz_minute or '00'}"
    return text


def file_size(size: int) -> str:
    """ExifTool's file size: `208 kB`, `1.5 MB`, `512 bytes`."""
    if size < 2000:
        return f"{size} bytes"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        value = size / scale
        if value < 10:
            return f"{value:.1f} {unit}"
        if value < 2000 or unit == "GB":
            return f"{value:.0f} {unit}"
    return f"{size} bytes"


def _entry(facts: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    name = str(facts.get("document", ""))
    entry: dict[str, Any] = {
        "FileName": name,
        "FileType": "PDF",
        "FileTypeExtension": "pdf",
        "MIMEType": "application/pdf",
    }
    if name in sizes:
        entry["FileSize"] = file_size(sizes[name])
    for key, value in dict(facts.get("info", {})).items():
        exif = INFO_KEYS.get(str(key).lstrip("/"))
        if exif is not None:
            text = str(value).lstrip("/") if exif == "Trapped" else str(value)
            entry[exif] = exif_date(text) if exif.endswith("Date") else text
    return entry


def linearized(data: bytes) -> bool:
    """Whether a PDF says it is linearized: a linearization dictionary within its first
    1024 bytes (ISO 32000-1, F.2), the test ExifTool makes; the bytes are not parsed."""
    return b"/Linearized" in data[:1024]


def answer(
    report: dict[str, Any], sizes: dict[str, int], linear: dict[str, bool]
) -> dict[str, dict[str, Any]]:
    """Each input file's metadata from a report (`pdftools/report.Report` as JSON)."""
    found = {str(f.get("document", "")): _entry(f, sizes) for f in report.get("metadata", [])}
    for name, entry in found.items():
        if name in linear:
            entry["Linearized"] = "Yes" if linear[name] else "No"
    for validation in report.get("validations", []):
        known = found.get(str(validation.get("document", "")))
        if known is None:
            continue
        if "pages" in validation:
            known["PageCount"] = validation["pages"]
        version = str(validation.get("version", ""))
        if re.fullmatch(r"[0-9]\.[0-9]", version):
            known["PDFVersion"] = float(version)
    return found
