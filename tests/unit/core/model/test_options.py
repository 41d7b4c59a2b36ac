"""Print options: every rule of `check_options` names the option it refuses, lengths convert
to the right units, and options become the right `Page.printToPDF` parameters."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.core.model import events
from services.core.model.errors import RequestError
from services.core.model.options import check_options, css_px, inches
from services.core.model.pageoptions import PageOptions
from services.gateway.requests import OptionsRequest
from services.renderer.browser import (
    DEFAULT_VIEWPORT,
    EMPTY_TEMPLATE,
    PNG,
    Html,
    RenderResult,
    emulation_for,
    print_params,
)
from services.renderer.consumer import document_key


def options(**fields: Any) -> PageOptions:
    """Options as the gateway builds them: converted from JSON-like values, unknown refused."""
    return msgspec.convert(fields, OptionsRequest)


GOOD = [
    {},
    {"format": "Letter", "landscape": True, "scale": 2},
    {"width": "210mm", "height": "11in"},
    {"width": "8.5in", "height": "1100px", "margin": {"top": "1cm", "bottom": "20mm"}},
    {"page_ranges": "1-3, 5"},
    {"page_ranges": "2-,-4, 7"},
    {"header_template": "<span class=pageNumber></span>", "margin": {"top": "20mm"}},
    {"wait_for": {"selector": "#chart svg", "timeout": 5}},
    {"wait_for": {"expression": "window.ready === true"}},
    {"wait_for": {"network_idle": True, "timeout": 2.5}},
    {"wait_for": {"selector": "p"}, "javascript": False},
    {"emulate_media": "screen", "prefer_css_page_size": True, "print_background": False},
    {"metadata": {"title": "Invoice", "author": "Acme", "keywords": "a, b"}, "tagged": False},
    {"output": "png", "width": "1024px", "scale": 3, "emulate_media": "screen"},
    {"output": "png", "width": "4in"},
    {"output": "png", "width": "640px", "height": "480px", "omit_background": True},
    {"output": "jpeg", "quality": 0, "scale": 2, "selector": "#chart"},
    {"output": "webp", "quality": 100, "omit_background": True, "height": "4096px"},
    {"receipt_width": 80},
    {"receipt_width": 58, "margin": {"left": "2mm", "right": "2mm"}, "page_ranges": "1"},
    {"page_ranges": "007 - 2147483647,\t3"},  # zeros in front, the last page there can be
    {"fail_on_status": []},  # every page printed, whatever its status
    {"fail_on_status": [200, 404, 599], "fail_on_resource_status": [100, 499]},
]


@pytest.mark.parametrize("fields", GOOD)
def test_valid_options_pass(fields: dict[str, Any]) -> None:
    check_options(options(**fields))


BAD = [
    ({"format": "B5"}, "options.format"),
    ({"scale": 0.05}, "options.scale"),
    ({"scale": 2.5}, "options.scale"),
    ({"output": "png", "scale": 0.5}, "options.scale"),
    ({"output": "png", "scale": 4}, "options.scale"),
    ({"margin": {"top": "1em"}}, "options.margin.top"),
    ({"margin": {"left": "-5mm"}}, "options.margin.left"),
    ({"margin": {"left": "110mm", "right": "120mm"}}, "options.margin"),
    ({"margin": {"top": "6in", "bottom": "6in"}}, "options.margin"),
    ({"width": "20em", "height": "10in"}, "options.width"),
    ({"width": "8in", "height": "5pt"}, "options.height"),
    ({"width": "8in"}, "options.height"),
    ({"height": "8in"}, "options.width"),
    ({"width": "5mm", "height": "8in"}, "options.width"),
    ({"width": "8in", "height": "201in"}, "options.height"),
    ({"page_ranges": "1-3;5"}, "options.page_ranges"),
    ({"page_ranges": "0"}, "options.page_ranges"),
    ({"page_ranges": "5-3"}, "options.page_ranges"),
    ({"page_ranges": "-"}, "options.page_ranges"),
    ({"page_ranges": ""}, "options.page_ranges"),
    ({"page_ranges": "1,,2"}, "options.page_ranges"),
    ({"page_ranges": "a-b"}, "options.page_ranges"),
    ({"page_ranges": "\u0661-\u0663"}, "options.page_ranges"),  # Arabic-Indic digits
    ({"page_ranges": "\uff11"}, "options.page_ranges"),  # a full-width 1
    ({"page_ranges": "1-3\n"}, "options.page_ranges"),
    ({"page_ranges": "1" + "0" * 5000}, "options.page_ranges"),  # int() raises past 4,300
    ({"page_ranges": "2-" + "9" * 5000}, "options.page_ranges"),
    ({"page_ranges": "2147483648"}, "options.page_ranges"),  # past Chromium's 32 bits
    ({"margin": {"top": "\u0661\u0660mm"}}, "options.margin.top"),  # float() reads 10
    ({"margin": {"top": "\uff11cm"}}, "options.margin.top"),
    ({"watermark": {"text": "x", "pages": "\u0662"}}, "options.watermark.pages"),
    ({"watermark": {"text": "x", "color": "red\n"}}, "options.watermark.color"),
    ({"wait_for": {}}, "options.wait_for"),
    ({"wait_for": {"selector": "p", "expression": "true"}}, "options.wait_for"),
    ({"wait_for": {"selector": "p", "network_idle": True}}, "options.wait_for"),
    ({"wait_for": {"network_idle": False}}, "options.wait_for"),
    ({"wait_for": {"selector": "  "}}, "options.wait_for.selector"),
    ({"wait_for": {"expression": ""}}, "options.wait_for.expression"),
    ({"wait_for": {"selector": "p", "timeout": 0}}, "options.wait_for.timeout"),
    ({"wait_for": {"selector": "p", "timeout": -1}}, "options.wait_for.timeout"),
    ({"wait_for": {"expression": "x"}, "javascript": False}, "options.wait_for.expression"),
    ({"emulate_media": "tv"}, "options.emulate_media"),
    ({"output": "gif"}, "options.output"),
    ({"output": "png", "width": "5000px"}, "options.width"),
    ({"output": "png", "width": "wide"}, "options.width"),
    ({"output": "webp", "height": "4097px"}, "options.height"),
    ({"output": "jpeg", "height": "0px"}, "options.height"),
    ({"output": "jpeg", "omit_background": True}, "options.omit_background"),
    ({"omit_background": True}, "options.omit_background"),
    ({"output": "png", "quality": 80}, "options.quality"),
    ({"quality": 80}, "options.quality"),
    ({"output": "jpeg", "quality": 101}, "options.quality"),
    ({"output": "webp", "quality": -1}, "options.quality"),
    ({"output": "jpeg", "scale": 3.5}, "options.scale"),
    ({"output": "webp", "page_ranges": "1"}, "options.page_ranges"),
    ({"output": "jpeg", "javascript": False}, "options.javascript"),
    ({"output": "png", "page_ranges": "1"}, "options.page_ranges"),
    ({"output": "png", "metadata": {"title": "x"}}, "options.metadata"),
    ({"output": "png", "header_template": "<b>h</b>"}, "options.header_template"),
    ({"output": "png", "margin": {"top": "1cm"}}, "options.margin"),
    ({"output": "png", "format": "Letter"}, "options.format"),
    ({"output": "png", "landscape": True}, "options.landscape"),
    ({"output": "png", "tagged": False}, "options.tagged"),
    ({"output": "png", "receipt_width": 80}, "options.receipt_width"),
    ({"receipt_width": 75}, "options.receipt_width"),
    ({"receipt_width": 80, "width": "80mm", "height": "200mm"}, "options.width"),
    ({"receipt_width": 80, "landscape": True}, "options.landscape"),
    ({"receipt_width": 80, "prefer_css_page_size": True}, "options.prefer_css_page_size"),
    ({"receipt_width": 58, "margin": {"left": "30mm", "right": "30mm"}}, "options.margin"),
    ({"fail_on_status": [99]}, "options.fail_on_status"),
    ({"fail_on_status": [404, 600]}, "options.fail_on_status"),
    ({"fail_on_status": list(range(200, 301))}, "options.fail_on_status"),  # 101 statuses
    ({"fail_on_resource_status": [0]}, "options.fail_on_resource_status"),
]


@pytest.mark.parametrize(("fields", "field"), BAD, ids=[f for _, f in BAD])
def test_each_bad_option_is_refused_naming_it(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as caught:
        check_options(options(**fields))
    assert caught.value.field == field
    assert caught.value.message.startswith(field)


def test_unknown_options_are_refused_by_the_struct() -> None:
    for fields in ({"colour": "red"}, {"wait_for": {"selector": "p", "delay": 1}}):
        with pytest.raises(msgspec.ValidationError, match="Object contains unknown field"):
            options(**fields)


@pytest.mark.parametrize(
    ("length", "expected"),
    [("1in", 1.0), ("25.4mm", 1.0), ("2.54cm", 1.0), ("96px", 1.0), ("48", 0.5), ("0", 0.0)],
)
def test_lengths_convert_to_inches(length: str, expected: float) -> None:
    assert inches(length) == pytest.approx(expected)
    assert css_px(length) == pytest.approx(expected * 96)


def test_print_params_are_in_inches_with_zero_margins_by_default() -> None:
    params = print_params(options(format="A4", scale=0.8, page_ranges="1-2"))
    assert params["paperWidth"] == pytest.approx(8.2677, abs=1e-3)
    assert params["paperHeight"] == pytest.approx(11.6929, abs=1e-3)
    assert [params[f"margin{s}"] for s in ("Top", "Right", "Bottom", "Left")] == [0, 0, 0, 0]
    assert params["scale"] == 0.8 and params["pageRanges"] == "1-2"
    assert params["generateTaggedPDF"] is True and params["displayHeaderFooter"] is False


def test_print_params_width_height_replace_the_format() -> None:
    params = print_params(options(width="100mm", height="6in", margin={"top": "12.7mm"}))
    assert params["paperWidth"] == pytest.approx(100 / 25.4)
    assert params["paperHeight"] == pytest.approx(6)
    assert params["marginTop"] == pytest.approx(0.5)


def test_a_header_alone_turns_headers_on_and_gets_an_empty_footer() -> None:
    params = print_params(options(header_template="<span class=title></span>"))
    assert params["displayHeaderFooter"] is True
    assert params["headerTemplate"] == "<span class=title></span>"
    assert params["footerTemplate"] == EMPTY_TEMPLATE


def test_emulation_per_output() -> None:
    plain = emulation_for(options())
    assert (plain.javascript, plain.media, plain.viewport) == (False, "", DEFAULT_VIEWPORT)
    screen = emulation_for(options(emulate_media="screen", javascript=False))
    assert (screen.javascript, screen.media) == (False, "screen")
    png = emulation_for(options(output="png", width="1000px", scale=2))
    assert (png.media, png.viewport.width, png.viewport.scale) == ("print", 1000, 2)
    receipt = emulation_for(options(receipt_width=80, margin={"left": "5mm", "right": "5mm"}))
    assert receipt.media == "print"
    assert receipt.viewport.width == int(70 / 25.4 * 96)  # printable width, rounded down
    assert receipt.viewport.height == 1


def test_documents_are_stored_under_the_tenant_and_job_id_with_their_extension() -> None:
    job = events.JobSubmitted(job_id="abc", tenant="ten_1")
    assert document_key(job, RenderResult(b"%PDF", 1)) == "jobs/ten_1/abc.pdf"
    assert document_key(job, RenderResult(b"\x89PNG", 1, PNG)) == "jobs/ten_1/abc.png"


@pytest.mark.parametrize(
    ("html", "asked", "runs"),
    [
        ("<p>static {{x}}</p>", None, False),
        ("<p>x</p><script>1</script>", None, True),
        ("<img src=x OnError = 'alert(1)'>", None, True),
        ("<a href='JavaScript:void(0)'>x</a>", None, True),
        ("<iframe srcdoc='&lt;b&gt;'></iframe>", None, True),
        ("<SCRIPT>1</SCRIPT>", None, True),
        ("<body\nonload\n=\n'x()'>", None, True),
        ("<p>Online shop: one button</p>", None, False),
        ("<p>Grüße, Ünïcode</p><p onmouseover=x>", None, True),
        ("<p data-x_onload=1>x_onload=1 bonus=2</p>", None, False),
        ("onload=1", None, True),
        ("<p>static</p>", True, True),
        ("<script>1</script>", False, False),
    ],
)
def test_javascript_auto_runs_script_only_where_a_document_can_have_it(html, asked, runs):
    from services.renderer.browser import javascript_for

    assert javascript_for(options(javascript=asked), Html(html)) is runs


def test_png_never_runs_with_script_disabled():
    from services.renderer.browser import javascript_for

    assert javascript_for(options(output="png"), Html("<p>static</p>")) is True
    with pytest.raises(RequestError) as raised:
        check_options(options(output="png", javascript=False))
    assert raised.value.field == "options.javascript"


@pytest.mark.parametrize(
    ("html", "fields", "drawn"),
    [
        ("<p>static {{x}}</p>", {}, False),  # a static PDF: printed from layout alone
        ("<p>x</p>", {"wait_for": {"selector": "p"}}, False),
        ("<p>x</p>", {"toc": True}, False),
        ("<p>x</p>", {"receipt_width": 80}, False),
        ("<p>x</p><script>1</script>", {}, True),  # animation frames, observers
        ("<p>x</p>", {"javascript": True}, True),
        ("<p>x</p>", {"output": "png"}, True),  # a screenshot
        ("<p>x</p>", {"diagnostics": True}, True),  # its screenshot
    ],
)
def test_only_script_and_screenshots_need_a_tab_that_draws(html, fields, drawn):
    from services.renderer.browser import needs_frames

    asked = options(**fields)
    assert needs_frames(asked, emulation_for(asked, Html(html))) is drawn


def test_a_page_from_a_url_gets_a_tab_that_draws():
    from services.renderer.browser import Url, needs_frames

    assert needs_frames(options(), emulation_for(options(), Url("https://example.com/")))
