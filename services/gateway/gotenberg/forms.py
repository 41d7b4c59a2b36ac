"""A Gotenberg form: its text fields and its files, and each field read as Gotenberg
reads it (booleans, numbers, lengths in any of its units, durations, JSON values).

Every problem is a `RequestError` naming the form field as the client sent it
(`paperWidth`, `metadata`), so a caller of a Gotenberg client reads its own field's name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from services.core.model.errors import RequestError
from services.gateway import uploads
from services.gateway.keys import SETTINGS


@dataclass(frozen=True)
class Upload:
    """One file part: the form field it came in (`files`, `embeds`) and its file name."""

    part: str
    filename: str
    data: bytes


REPEATED = tuple(
    f"{kind}{part}" for kind in ("watermark", "stamp") for part in ("Source", "Expression",
                                                                      "Pages", "Options")
)  # fmt: skip
"""The text fields Gotenberg (8.36) reads repeated, as parallel lists: one watermark or
stamp per `…Source`. Its files (`files`, `embeds`, …) are parts of their own names."""


@dataclass
class Form:
    """A multipart form's text fields and its files, in the order sent. A field given
    more than once keeps its later values in `more`: read by `text` it is a `400` naming
    it (Go's `FormValue` would take the first silently), by `texts` a list. `used`
    collects the fields a mapping read, to refuse the rest."""

    fields: dict[str, str] = field(default_factory=dict)
    files: list[Upload] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    more: dict[str, list[str]] = field(default_factory=dict)
    """The later values of each field given more than once (its first is in `fields`)."""
    markdown: dict[str, str] = field(default_factory=dict)
    """The HTML of each Markdown file `index.html` names, made off the event loop
    (`chromium.convert_markdown`) before the form is mapped."""

    def text(self, name: str) -> str | None:
        """The field's value, None if absent or empty (Gotenberg treats both as unset);
        a field given more than once is a `400` naming it."""
        self.used.add(name)
        if name in self.more:
            raise RequestError(f"form field {name!r} is given more than once", field=name)
        value = self.fields.get(name)
        return value if value else None

    def texts(self, name: str) -> list[str]:
        """Every value of a field Gotenberg reads repeated (`REPEATED`), in the order
        sent, empty ones included."""
        self.used.add(name)
        if name not in self.fields:
            return []
        return [self.fields[name], *self.more.get(name, [])]

    def flag(self, name: str, default: bool) -> bool:
        value = self.text(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in ("true", "1", "t"):
            return True
        if lowered in ("false", "0", "f"):
            return False
        raise RequestError(f"form field {name!r} must be true or false, got {value!r}", field=name)

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or not low <= number <= high:
            raise RequestError(
                f"form field {name!r} must be a number from {low:g} to {high:g}, got {value!r}",
                field=name,
            )
        return number

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        value = self.text(name)
        if value is None:
            return default
        if not re.fullmatch(r"-?[0-9]{1,10}", value.strip()) or not (low <= int(value) <= high):
            raise RequestError(
                f"form field {name!r} must be an integer from {low} to {high}, got {value!r}",
                field=name,
            )
        return int(value)

    def json(self, name: str) -> Any:
        """The field parsed as JSON; None if absent."""
        value = self.text(name)
        if value is None:
            return None
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            raise RequestError(f"form field {name!r} is not valid JSON", field=name) from None

    def unknown(self) -> list[str]:
        """The fields no mapping read: Pressroom cannot honour them."""
        return sorted(name for name in self.fields if name not in self.used)


async def read(request: web.Request) -> Form:
    """The request's multipart form, read within the upload limits (`uploads.read_form`:
    `413` naming a file or `files` past them)."""
    limits = uploads.UploadLimits.of(request.app[SETTINGS])
    upload = await uploads.read_form(request, limits, repeats=True)
    form = Form()
    for name, raw in upload.fields.items():
        form.fields[name] = _utf8(name, raw)
        if name in upload.repeated:
            form.more[name] = [_utf8(name, later) for later in upload.repeated[name]]
    for filename, data in upload.files:
        form.files.append(Upload(upload.parts.get(filename, "files"), filename, data))
    return form


def _utf8(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(f"form field {name!r} is not UTF-8 text", field=name) from None


_LENGTH = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(pt|px|in|mm|cm|pc)?\s*")
_PER_INCH = {"in": 1.0, "cm": 2.54, "mm": 25.4, "px": 96.0, "pt": 72.0, "pc": 6.0}


def inches(form: Form, name: str, default: float) -> float:
    """A length field in inches: a number with one of Gotenberg's units (`pt`, `px`,
    `in`, `mm`, `cm`, `pc`), a bare number being inches."""
    value = form.text(name)
    if value is None:
        return default
    found = _LENGTH.fullmatch(value)
    if found is None:
        raise RequestError(
            f"form field {name!r} must be a length such as 8.5, 8.5in, 210mm, 21cm, 612pt,"
            f" 816px or 51pc; got {value!r}",
            field=name,
        )
    return float(found[1]) / _PER_INCH[found[2] or "in"]


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(form: Form, name: str) -> float | None:
    """A duration field as Go writes one (`5s`, `1.5s`, `500ms`, `1m30s`), in seconds;
    None if absent."""
    value = form.text(name)
    if value is None:
        return None
    text = value.strip()
    pieces = _DURATION.findall(text)
    if not pieces or "".join(n + u for n, u in pieces) != text:
        raise RequestError(
            f"form field {name!r} must be a duration such as 5s, 500ms or 1m30s; got {value!r}",
            field=name,
        )
    return sum(float(number) * _SECONDS[unit] for number, unit in pieces)
