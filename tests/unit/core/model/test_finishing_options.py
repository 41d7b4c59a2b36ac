"""The rules of issue 15's document options (outline, toc, watermark, stamp, sign): each bad
value is a `RequestError` naming the option's path."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.core.model.errors import RequestError
from services.core.model.options import check_options, page_numbers
from services.gateway.requests import OptionsRequest
from services.renderer.browser import print_params


def options(**fields: Any) -> OptionsRequest:
    return msgspec.convert(fields, OptionsRequest)


GOOD: list[dict[str, Any]] = [
    {"outline": True},
    {"outline": True, "metadata": {"title": "Report"}},
    {"toc": True},
    {"toc": True, "outline": True, "receipt_width": 80},
    {"watermark": {"text": "DRAFT"}, "stamp": {"text": "PAID", "position": "bottom-left"}},
    {"watermark": {"text": "x", "opacity": 1, "rotation": -30, "size": 1, "pages": "2-, 1"}},
    {"stamp": {"image": "data:image/jpeg;base64,/9j/4AAQ", "color": "#ABC"}},
]


@pytest.mark.parametrize("fields", GOOD)
def test_valid_document_options_pass(fields: dict[str, Any]) -> None:
    check_options(options(**fields))


BAD: list[tuple[dict[str, Any], str]] = [
    ({"outline": True, "tagged": False}, "options.outline"),
    ({"outline": True, "output": "png"}, "options.outline"),
    ({"toc": True, "tagged": False}, "options.toc"),
    ({"toc": True, "output": "png"}, "options.toc"),
    ({"toc": True, "page_ranges": "1-2"}, "options.toc"),
    ({"watermark": {}}, "options.watermark"),
    ({"stamp": {"text": "   "}}, "options.stamp.text"),
    ({"stamp": {"text": "x" * 201}}, "options.stamp.text"),
    ({"stamp": {"image": "https://example.com/a.png"}}, "options.stamp.image"),
    ({"watermark": {"text": "x", "opacity": 0}}, "options.watermark.opacity"),
    ({"watermark": {"text": "x", "rotation": 400}}, "options.watermark.rotation"),
    ({"watermark": {"text": "x", "size": 0.01}}, "options.watermark.size"),
    ({"watermark": {"text": "x", "color": "red;x:y"}}, "options.watermark.color"),
    ({"watermark": {"text": "x", "pages": "0"}}, "options.watermark.pages"),
    ({"watermark": {"text": "x"}, "output": "png"}, "options.watermark"),
]


@pytest.mark.parametrize(("fields", "field"), BAD)
def test_bad_document_options_name_their_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as raised:
        check_options(options(**fields))
    assert raised.value.field == field


def test_outline_asks_chromium_for_the_document_outline_only_when_wanted() -> None:
    assert print_params(options(outline=True))["generateDocumentOutline"] is True
    assert print_params(options())["generateDocumentOutline"] is False


def test_page_numbers_are_those_the_range_names_within_the_document() -> None:
    assert page_numbers(None, 3) == [1, 2, 3]
    assert page_numbers("2-, 1", 4) == [1, 2, 3, 4]
    assert page_numbers("-2, 5, 9", 6) == [1, 2, 5]
    assert page_numbers("7-", 3) == []
