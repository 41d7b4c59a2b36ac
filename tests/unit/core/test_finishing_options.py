"""The rules of issue 15's document options (outline, toc, watermark, stamp, sign): each bad
value is a `RequestError` naming the option's path."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.core.errors import RequestError
from services.core.options import check_options
from services.gateway.requests import OptionsRequest
from services.renderer.browser import print_params


def options(**fields: Any) -> OptionsRequest:
    return msgspec.convert(fields, OptionsRequest)


GOOD: list[dict[str, Any]] = [
    {"outline": True},
    {"outline": True, "metadata": {"title": "Report"}},
]


@pytest.mark.parametrize("fields", GOOD)
def test_valid_document_options_pass(fields: dict[str, Any]) -> None:
    check_options(options(**fields))


BAD: list[tuple[dict[str, Any], str]] = [
    ({"outline": True, "tagged": False}, "options.outline"),
    ({"outline": True, "output": "png"}, "options.outline"),
]


@pytest.mark.parametrize(("fields", "field"), BAD)
def test_bad_document_options_name_their_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as raised:
        check_options(options(**fields))
    assert raised.value.field == field


def test_outline_asks_chromium_for_the_document_outline_only_when_wanted() -> None:
    assert print_params(options(outline=True))["generateDocumentOutline"] is True
    assert print_params(options())["generateDocumentOutline"] is False
