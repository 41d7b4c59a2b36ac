"""`options.selector`: a PNG-only option, refused at the gateway for a PDF, empty or too long
(whether Chromium can parse it is known only in the page), carried by events."""

from __future__ import annotations

import msgspec
import pytest

from services.core.model.errors import RequestError
from services.core.model.options import MAX_SELECTOR, check_options
from services.core.model.pageoptions import PageOptions
from services.gateway.requests import OptionsRequest


def test_a_png_may_name_an_element_to_capture() -> None:
    check_options(msgspec.convert({"output": "png", "selector": "#chart svg"}, OptionsRequest))


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"selector": "#chart"}, "options.selector applies to image output (png, jpeg, webp) only"),
        ({"output": "png", "selector": "  "}, "options.selector must not be empty"),
        (
            {"output": "png", "selector": "a" * (MAX_SELECTOR + 1)},
            f"options.selector must be at most {MAX_SELECTOR} characters",
        ),
    ],
)
def test_a_selector_that_cannot_apply_is_refused_naming_it(
    fields: dict[str, str], rule: str
) -> None:
    with pytest.raises(RequestError) as caught:
        check_options(msgspec.convert(fields, OptionsRequest))
    assert (caught.value.message, caught.value.field) == (rule, "options.selector")


def test_the_selector_travels_in_the_event_and_is_left_out_when_unset() -> None:
    given = PageOptions(output="png", selector="#label")
    assert msgspec.json.decode(msgspec.json.encode(given), type=PageOptions) == given
    assert b"selector" not in msgspec.json.encode(PageOptions(output="png"))
