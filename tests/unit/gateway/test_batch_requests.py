"""Parsing `POST /batches`: every bad input is a 400 naming its field (inside an item, by
the item's index), and every item leaves with its file name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.core.model.errors import LogFull, RequestError
from services.gateway.batches import check_addresses
from services.gateway.ids import batch_id_for
from services.gateway.logroom import RESERVE_PER_JOB, LogRoom
from services.gateway.requests import (
    BATCH_ID,
    default_filename,
    parse_batch,
    parse_batch_lines,
)

TEMPLATE_ID = "0" * 32


def body(urls: bool = False, **fields: Any) -> bytes:
    """A batch request: `fields`, with one item and an inline template unless they (or
    `urls`, for a batch of urls) say otherwise."""
    fields.setdefault("items", [{"data": {"n": 1}}])
    if not urls and not {"template", "template_id"} & fields.keys():
        fields["template"] = "<p>{{ n }}</p>"
    return json.dumps(fields).encode()


def field_of(raw: bytes, max_items: int = 100) -> str | None:
    with pytest.raises(RequestError) as raised:
        parse_batch(raw, max_items)
    return raised.value.field


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (body(html="<p>same for all</p>"), "html"),
        (body(urls=True), "items[0].url"),  # neither template nor urls
        (body(template="t", template_id=TEMPLATE_ID), "template_id"),
        (body(template="  "), "template"),
        (body(template_id="nope"), "template_id"),
        (body(template_version=2), "template_version"),
        (body(items=[{"data": {}}, {"url": "https://example.com/"}]), "items[1].url"),
        (body(urls=True, items=[{"url": "https://a.example/"}, {}]), "items[1].url"),
        (body(urls=True, items=[{"url": "https://a.example/", "data": {"n": 1}}]), "items[0].data"),
        (body(items=[]), "items"),
        (body(items=None), "items"),
        (json.dumps({"template": "x"}).encode(), "items"),
        (body(items=[{"data": {}}, {"data": {}, "colour": "red"}]), "items[1].colour"),
        (body(items=[{"data": 5}]), "items[0].data"),
        (body(surprise=True), "surprise"),
        (body(output="tar"), "output"),
        (body(output="merged", options={"output": "png"}), "output"),
        (body(options={"format": "A0"}), "options.format"),
        (body(webhook_secret="whsec_x"), "webhook_secret"),
    ],
)
def test_a_bad_batch_is_a_400_naming_its_field(raw: bytes, field: str) -> None:
    assert field_of(raw) == field


def test_more_items_than_the_limit_is_a_400_naming_items() -> None:
    raw = body(items=[{"data": {}}] * 4)
    with pytest.raises(RequestError) as raised:
        parse_batch(raw, 3)
    assert raised.value.field == "items"
    assert "PRESSROOM_MAX_BATCH_ITEMS" in raised.value.message
    assert len(parse_batch(raw, 4).items) == 4


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a" * 252 + ".pdf",  # 256 bytes
        "\u00e9" * 126 + ".pdf",  # 256 bytes in UTF-8
        ".",
        "..",
        ".hidden.pdf",
        "a.pdf.",
        " a.pdf",
        "dir/a.pdf",
        "..\\a.pdf",
        "C:a.pdf",
        "a\uff0fb.pdf",  # a full-width slash
        "a\u2215b.pdf",  # a division slash
        "a|b.pdf",
        "a?.pdf",
        "CON.pdf",
        "nul.pdf",
        "com\u00b9.pdf",
        "a\x00.pdf",
        "a\nb.pdf",
        "a\x7f.pdf",
        "a\u0085.pdf",  # a C1 control
        "invoice\u202efdp.pdf",  # right-to-left override
        "a\u200bb.pdf",  # zero-width space
    ],
)
def test_an_unsafe_filename_is_a_400_naming_the_item(name: str) -> None:
    items = [{"data": {}}, {"data": {}}, {"data": {}, "filename": name}]
    assert field_of(body(items=items)) == "items[2].filename"


def test_a_filename_of_255_bytes_is_accepted() -> None:
    name = "\u00e9" * 125 + "a.pdf"
    assert parse_batch(body(items=[{"filename": name}]), 10).items[0].filename == name


def test_a_decomposed_filename_is_accepted_in_nfc_and_clashes_with_its_composed_twin():
    decomposed = "cafe\u0301.pdf"
    batch = parse_batch(body(items=[{"filename": decomposed}]), 10)
    assert batch.items[0].filename == "caf\u00e9.pdf"
    items = [{"filename": "CAF\u00c9.pdf"}, {"filename": decomposed}]
    assert field_of(body(items=items)) == "items[1].filename"


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("a.png", {}),
        ("a.pdf", {"output": "png"}),
        ("a", {}),
        ("a.pdf.txt", {}),
        ("a.png", {"output": "jpeg"}),
        ("a.jpg", {"output": "webp"}),
    ],
)
def test_a_filename_without_the_outputs_extension_is_a_400(name: str, options: Any) -> None:
    raw = body(items=[{"data": {}, "filename": name}], options=options)
    assert field_of(raw) == "items[0].filename"


def test_a_merged_batch_still_checks_given_filenames() -> None:
    assert field_of(body(output="merged", items=[{"filename": "a/b.pdf"}])) == "items[0].filename"


def test_duplicate_filenames_are_refused_ignoring_case() -> None:
    items = [{"filename": "Report.pdf"}, {"filename": "other.pdf"}, {"filename": "REPORT.PDF"}]
    with pytest.raises(RequestError) as raised:
        parse_batch(body(items=items), 10)
    assert raised.value.field == "items[2].filename"
    assert "items[0]" in raised.value.message


def test_a_filename_that_clashes_with_a_default_is_blamed_on_the_one_given() -> None:
    # Item 3 has no name, so its default is 00003.pdf: item 1 took it first.
    items = [{}, {"filename": "00003.PDF"}, {}, {}]
    assert field_of(body(items=items)) == "items[1].filename"
    items = [{}, {}, {}, {}, {"filename": "00003.pdf"}]  # and after it
    assert field_of(body(items=items)) == "items[4].filename"


def test_every_item_leaves_with_its_filename_given_or_default() -> None:
    items = [{"data": {"n": i}} for i in range(3)] + [{"filename": "mine.pdf"}]
    batch = parse_batch(body(items=items), 10)
    assert [item.filename for item in batch.items] == [
        "00000.pdf",
        "00001.pdf",
        "00002.pdf",
        "mine.pdf",
    ]
    assert [item.data for item in batch.items][:3] == [{"n": 0}, {"n": 1}, {"n": 2}]
    for output, name in (("png", "00000.png"), ("jpeg", "00000.jpg"), ("webp", "00000.webp")):
        images = parse_batch(body(items=[{}], options={"output": output}), 10)
        assert images.items[0].filename == name


def test_url_items_and_their_default_names() -> None:
    items = [{"url": f"https://example.com/{i}"} for i in range(2)]
    batch = parse_batch(body(urls=True, items=items), 10)
    assert [(i.url, i.filename) for i in batch.items] == [
        ("https://example.com/0", "00000.pdf"),
        ("https://example.com/1", "00001.pdf"),
    ]
    assert batch.template is None and batch.template_id is None


def test_default_filenames_widen_past_five_digits_and_sort_in_item_order() -> None:
    assert default_filename(7, 100_000, "pdf") == "00007.pdf"
    assert default_filename(7, 100_001, "pdf") == "000007.pdf"
    names = [default_filename(i, 123_456, "png") for i in range(0, 123_456, 997)]
    assert names == sorted(names)


def test_batch_ids_match_the_contract_and_an_idempotency_key_fixes_them() -> None:
    key = b"k" * 32
    fresh = {batch_id_for(key, "t", None) for _ in range(3)}
    assert len(fresh) == 3 and all(BATCH_ID.match(i) for i in fresh)
    keyed = batch_id_for(key, "t", "order-7")
    assert BATCH_ID.match(keyed) and keyed == batch_id_for(key, "t", "order-7")
    assert keyed != batch_id_for(key, "u", "order-7") != batch_id_for(b"o" * 32, "t", "order-7")
    with pytest.raises(RequestError) as raised:
        batch_id_for(key, "t", "x" * 256)
    assert raised.value.field == "Idempotency-Key"


async def test_item_urls_are_checked_against_the_address_policy_naming_the_first_refused():
    urls = ["http://93.184.216.34/a", "http://93.184.216.34/b", "http://10.0.0.1/", "http://[::1]/"]
    batch = parse_batch(body(urls=True, items=[{"url": url} for url in urls]), 10)
    with pytest.raises(RequestError) as raised:
        await check_addresses(batch, allow_private=False)
    assert raised.value.field == "items[2].url"
    await check_addresses(batch, allow_private=True)
    unparsable = parse_batch(body(urls=True, items=[{"url": "http://a/"}, {"url": "ftp://b/"}]), 10)
    with pytest.raises(RequestError) as raised:
        await check_addresses(unparsable, allow_private=True)
    assert raised.value.field == "items[1].url"


def test_the_log_room_must_hold_every_items_submission_and_reserve():
    room = LogRoom(used=1000, limit=1000 + 10 * RESERVE_PER_JOB + 500, unfinished=2)
    room.admit_batch(8, 500)  # exactly fits: 2 + 8 reserves and 500 bytes of submissions
    with pytest.raises(LogFull):
        room.admit_batch(8, 501)
    with pytest.raises(LogFull):
        room.admit_batch(9, 0)
    room.took_batch(8, 500)
    with pytest.raises(LogFull):
        room.admit_batch(1, 0)
    LogRoom(used=10**12, limit=-1).admit_batch(10_000, 10**9)  # an unbounded log


def test_json_lines_carry_the_batch_on_the_first_line_and_an_item_per_line():
    raw = b'{"template": "<p>{{ n }}</p>"}\n{"data": {"n": 1}}\n\n{"data": {"n": 2}}\n'
    batch = parse_batch_lines(raw, 10)
    assert [item.data for item in batch.items] == [{"n": 1}, {"n": 2}]
    assert [item.filename for item in batch.items] == ["00000.pdf", "00001.pdf"]
    assert batch == parse_batch(body(items=[{"data": {"n": 1}}, {"data": {"n": 2}}]), 10)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"template": "t", "items": []}\n{"data": {}}', "items"),  # items are lines
        (b'{"template": "t"}\n{"data": {}}\n[1]', "items[1]"),  # not an object
        (
            b'{"template": "t"}\n{"data": {}}\n{"data": {"n": 1' + b"0" * 30 + b"}}",
            "items[1].data.n",
        ),  # a number out of range
        (b'{"template": "t"}\n{"data": {"s": "a\\u0000"}}', "items[0].data.s"),  # a NUL
        (b'{"template": "t"}\n{"data": {}, "filename": "a/b.pdf"}', "items[0].filename"),
        (b'{"template": "t"}\n' + b'{"data": {}}\n' * 4, "items"),  # over the limit of 3
        (b'{"html": "<p>x</p>"}\n{"data": {}}', "html"),
    ],
)
def test_every_bad_json_lines_batch_names_its_field(raw: bytes, field: str):
    with pytest.raises(RequestError) as raised:
        parse_batch_lines(raw, 3)
    assert raised.value.field == field


def test_progress_webhooks_need_a_webhook_url():
    assert field_of(body(progress_webhooks=True)) == "progress_webhooks"
    batch = parse_batch(body(progress_webhooks=True, webhook_url="https://example.com/h"), 10)
    assert batch.progress_webhooks
