"""The rules of `options.sign` beyond its types; `options.check_options` runs them with
the other rules (a 400 naming the field). What only the printed document knows (whether
`page` exists) the signing step checks (`renderer/finishing/sign.py`)."""

from __future__ import annotations

import math
import re

from services.core.model.errors import RequestError
from services.core.model.pageoptions import PageOptions, Sign

MAX_SIGN_TEXT = 200
"""Longest `reason` or `location`, in characters."""
MAX_POINTS = 14_400.0
"""The largest page side PDF readers accept, in points (200 in, Acrobat's limit)."""
MIN_SIDE = 10.0
"""Narrowest and lowest box, in points: a smaller appearance cannot be read."""
MAX_PAGE = 100_000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _fail(name: str, rule: str) -> RequestError:
    return RequestError(f"options.sign.{name} {rule}", field=f"options.sign.{name}")


def check_sign(options: PageOptions) -> None:
    """Raise `RequestError` naming the first field of `options.sign` that breaks a rule."""
    sign = options.sign
    if sign is None:
        return
    for name in ("reason", "location", "contact", "signer_name"):  # the last two: a step's
        _check_text(name, getattr(sign, name, None))
    if sign.visible:
        _check_visible(options, sign)
    elif sign.page is not None or sign.box is not None:
        raise _fail("box" if sign.box is not None else "page", "needs visible: true")


def _check_text(name: str, text: str | None) -> None:
    if text is not None and (not 0 < len(text) <= MAX_SIGN_TEXT or _CONTROL.search(text)):
        raise _fail(name, f"must be 1 to {MAX_SIGN_TEXT} characters, no control characters")


def _check_visible(options: PageOptions, sign: Sign) -> None:
    if options.pdfa is not None or options.facturx is not None:
        # pyHanko draws the appearance in a standard font it does not embed.
        raise _fail("visible", "cannot be true with pdfa or facturx (PDF/A embeds every font)")
    if sign.page is not None and not 1 <= sign.page <= MAX_PAGE:
        raise _fail("page", f"must be a page number from 1 to {MAX_PAGE}")
    if sign.box is None:
        raise _fail("box", "is needed for a visible signature: [x1, y1, x2, y2] in points")
    if not _is_box(sign.box):
        raise _fail(
            "box",
            f"must be [x1, y1, x2, y2] in points from the page's lower left corner, "
            f"0 <= x1 < x2 <= {MAX_POINTS:g}, 0 <= y1 < y2 <= {MAX_POINTS:g}, "
            f"at least {MIN_SIDE:g} wide and high",
        )


def _is_box(box: list[float]) -> bool:
    if len(box) != 4 or not all(math.isfinite(value) for value in box):
        return False
    x1, y1, x2, y2 = box
    fits = x2 <= MAX_POINTS and y2 <= MAX_POINTS
    return fits and 0 <= x1 <= x2 - MIN_SIDE and 0 <= y1 <= y2 - MIN_SIDE
