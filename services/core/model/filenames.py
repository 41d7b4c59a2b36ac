"""File names a user will save or unpack: one rule for batch archives' entries, files
embedded in PDFs and every `Content-Disposition`, safe on Windows, macOS and Linux.

`safe_name` applies the rule, in this order:

1. NFC: one spelling per name (macOS writes names decomposed, the others as given).
2. Invisible characters are removed: controls (C0, DEL, C1), format characters (the bidi
   controls U+200E/U+200F, U+202A to U+202E, U+2066 to U+2069 and U+061C that make
   `invoice\u202efdp.exe` read as `invoiceexe.pdf`; zero-width spaces and joiners,
   U+FEFF, soft hyphens), line and paragraph separators, surrogates, private-use and
   unassigned code points, and the blank letters that show as nothing (Hangul fillers,
   the braille blank, the combining grapheme joiner).
3. Path separators, their look-alikes (full-width U+FF0F and U+FF3C, division and fraction slashes,
   big solidi, set minus, box-drawing diagonals) and what Windows forbids (`< > : " | ?
   *`) become `_`: a name is never a path, never a drive (`C:`), never an NTFS stream
   (`a:b`), and `:` is never shown as `/` by macOS's Finder.
4. Dots and white space at either end are removed: no hidden `.name`, no `.`/`..`, no
   name Windows would cut short (it drops trailing dots and spaces).
5. A name Windows reserves for a device, with any extension (`CON`, `PRN`, `AUX`, `NUL`,
   `COM0` to `COM9`, `LPT0` to `LPT9`, their superscript-digit forms `COM¹`…, `CONIN$`,
   `CONOUT$`, in any case: `nul.tar.gz`, `Com1 .pdf`) gets `_` in front.
6. At most `MAX_BYTES` bytes of UTF-8 (the limit of ext4, APFS and NTFS names): the part
   before the extension is cut, on a character boundary, and the extension kept.
7. Nothing left (`""`, `"..."`, only controls): the caller's fallback name.

`problem` tells which step would change a name, for the gateway's rule: a name a client
gives is refused with a `400` naming its field when the rule would change it (it would
not get the name it asked for), except for step 1, which changes no character a user
sees. Names made at saving time (an old event, a default name) are made safe silently.

`Unique` keeps names apart within one archive or one PDF, the way a case-insensitive
disk does: after NFC and case folding (`A.pdf` and `a.pdf`, or `é` composed and
decomposed, are one name), a later name gets ` (2)`, ` (3)`… before its extension.

`content_disposition` writes the header for a download under a name: RFC 6266's
`filename*=UTF-8''…` and an ASCII `filename="…"` for old clients.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable

MAX_BYTES = 255
"""Longest name, in bytes of UTF-8."""
MAX_EXTENSION = 16
"""Longest extension kept whole when a name is cut (`.pdf`, `.xlsx`, `.json`)."""

REPLACEMENT = "_"

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_BLANK_LETTERS = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")
_SEPARATORS = frozenset(
    '/\\<>:"|?*\u2044\u2215\u2216\u2571\u2572\u27cb\u27cd\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c'
)
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"{port}{digit}" for port in ("com", "lpt") for digit in "0123456789¹²³"}
)
_EDGES = re.compile(r"^[.\s]+|[.\s]+$")
_EXTENSION = re.compile(rf"\.[A-Za-z0-9]{{1,{MAX_EXTENSION}}}$")


def _nfc(name: str) -> str:
    return unicodedata.normalize("NFC", name)


def _is_invisible(char: str) -> bool:
    return unicodedata.category(char) in _INVISIBLE_CATEGORIES or char in _BLANK_LETTERS


def _visible(name: str) -> str:
    return "".join(char for char in name if not _is_invisible(char))


def _no_separators(name: str) -> str:
    return "".join(REPLACEMENT if char in _SEPARATORS else char for char in name)


def _trimmed(name: str) -> str:
    return _EDGES.sub("", name)


def _unreserved(name: str) -> str:
    device = name.split(".", 1)[0].rstrip().casefold()
    return REPLACEMENT + name if device in _RESERVED else name


def fit(name: str, limit: int = MAX_BYTES) -> str:
    """`name` cut to `limit` bytes of UTF-8, its extension kept (when it has a short
    one), on a character boundary, without dots or spaces left at the end of the cut."""
    if len(name.encode()) <= limit:
        return name
    found = _EXTENSION.search(name)
    extension = found.group() if found and found.start() > 0 else ""
    room = limit - len(extension.encode())
    stem = name[: len(name) - len(extension)].encode()[:room].decode(errors="ignore")
    return _trimmed(_nfc(stem)) + extension


_STEPS: tuple[tuple[Callable[[str], str], str], ...] = (
    (_visible, "must not contain control, format or bidirectional characters ({char})"),
    (_no_separators, "must not contain {char}: no paths, drives or characters Windows forbids"),
    (_trimmed, "must not begin or end with a dot or white space"),
    (_unreserved, "must not be a name Windows reserves for a device (CON, NUL, COM1…)"),
    (fit, f"must be at most {MAX_BYTES} bytes in UTF-8"),
)


def safe_name(name: str, fallback: str = "file") -> str:
    """`name` made safe to save or unpack anywhere (the module's rule); `fallback`
    (itself made safe) if nothing of it is left."""
    safe = _nfc(name)
    for step, _ in _STEPS:
        safe = _nfc(step(safe))
    if safe:
        return safe
    return safe_name(fallback) if fallback else "file"


def problem(name: str) -> str | None:
    """Why the rule would change `name` beyond NFC (as words to follow the field's name:
    "must not …"), or None if it would not: what the gateway refuses a client's name for."""
    current = _nfc(name)
    if not current:
        return "must not be empty"
    for step, reason in _STEPS:
        changed = _nfc(step(current))
        if changed != current:
            return reason.format(char=_first_difference(current, changed))
    return None


def _first_difference(before: str, after: str) -> str:
    """The first character of `before` a step removed or replaced, as `'x' (U+0078)`."""
    for index, char in enumerate(before):
        if index >= len(after) or after[index] != char:
            return f"{char!r} (U+{ord(char):04X})"
    return "?"


def key(name: str) -> str:
    """What two names that one case-insensitive disk holds as one have in common."""
    return _nfc(_nfc(name).casefold())


def numbered(name: str, number: int) -> str:
    """`name` with ` (number)` before its extension, cut to fit `MAX_BYTES`."""
    found = _EXTENSION.search(name)
    extension = found.group() if found and found.start() > 0 else ""
    stem = name[: len(name) - len(extension)]
    tail = f" ({number}){extension}"
    return fit(stem, MAX_BYTES - len(tail.encode())) + tail


class Unique:
    """Safe names, unique within one archive or one PDF ignoring case and normalisation
    (`key`): a name already taken gets the first free ` (2)`, ` (3)`… Names in `taken`
    are reserved from the start (an archive's `manifest.json`)."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._keys = {key(name) for name in taken}
        self._next: dict[str, int] = {}

    def take(self, name: str, fallback: str = "file") -> str:
        """`name` made safe and unique, and now taken."""
        safe = safe_name(name, fallback)
        candidate = safe
        while key(candidate) in self._keys:
            number = self._next.get(key(safe), 2)
            self._next[key(safe)] = number + 1
            candidate = numbered(safe, number)
        self._keys.add(key(candidate))
        return candidate


def content_disposition(name: str, disposition: str = "attachment") -> str:
    """A `Content-Disposition` header for a download saved as `name` (made safe): the
    exact name as RFC 6266's `filename*=UTF-8''…`, and for clients that do not read that
    form an ASCII `filename="…"` (accents dropped, other characters `_`)."""
    safe = safe_name(name)
    fallback = safe_name(_ascii(safe), "download")
    exact = urllib.parse.quote(safe, safe="")
    return f"{disposition}; filename=\"{fallback}\"; filename*=UTF-8''{exact}"


def _ascii(name: str) -> str:
    """`name` in printable ASCII: compatibility forms decomposed (full-width `A` is `A`, `é` is `e`
    and an accent, which is dropped), any other character `_`."""
    chars = []
    for char in unicodedata.normalize("NFKD", name):
        if not unicodedata.combining(char):
            chars.append(char if " " <= char <= "~" else REPLACEMENT)
    return "".join(chars)
