"""`options.sign`: each refusal is a 400 naming the field; nothing of a key or certificate
can come in the request."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.core.model.errors import RequestError
from services.core.model.options import check_options
from services.gateway.requests import OptionsRequest

BOX = [40, 40, 300, 110]


def checked(**fields: Any) -> None:
    check_options(msgspec.convert(fields, OptionsRequest))


@pytest.mark.parametrize(
    "fields",
    [
        {"sign": {}},
        {"sign": {"visible": False, "reason": "Approved", "location": "Berlin"}},
        {"sign": {"visible": True, "box": BOX}},
        {"sign": {"visible": True, "page": 3, "box": [0, 0, 10, 10.5]}},
        {"sign": {}, "encrypt": {"owner_password": "owner-password-1"}},
        {"sign": {}, "pdfa": "2b"},
    ],
)
def test_good_signatures_are_accepted(fields):
    checked(**fields)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"sign": {"visible": True}}, "options.sign.box"),
        ({"sign": {"box": BOX}}, "options.sign.box"),
        ({"sign": {"page": 2}}, "options.sign.page"),
        ({"sign": {"visible": True, "page": 0, "box": BOX}}, "options.sign.page"),
        ({"sign": {"visible": True, "box": [1, 2, 3]}}, "options.sign.box"),
        ({"sign": {"visible": True, "box": [300, 40, 40, 110]}}, "options.sign.box"),
        ({"sign": {"visible": True, "box": [0, 0, 5, 5]}}, "options.sign.box"),
        ({"sign": {"visible": True, "box": [-1, 0, 100, 100]}}, "options.sign.box"),
        ({"sign": {"visible": True, "box": [0, 0, 20000, 100]}}, "options.sign.box"),
        ({"sign": {"reason": ""}}, "options.sign.reason"),
        ({"sign": {"location": "a\nb"}}, "options.sign.location"),
        ({"sign": {"reason": "x" * 201}}, "options.sign.reason"),
        ({"sign": {"visible": True, "box": BOX}, "pdfa": "3b"}, "options.sign.visible"),
        ({"sign": {}, "output": "png"}, "options.sign"),
    ],
)
def test_bad_signatures_name_their_field(fields, field):
    with pytest.raises(RequestError) as raised:
        checked(**fields)
    assert raised.value.field == field, raised.value.message


@pytest.mark.parametrize("extra", ["key", "certificate", "password"])
def test_key_material_cannot_come_in_the_request(extra):
    with pytest.raises(msgspec.ValidationError, match=extra):
        msgspec.convert({"sign": {extra: "-----BEGIN"}}, OptionsRequest)
