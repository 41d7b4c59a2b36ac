"""Rendering's finishing options as PDF steps: in the one order that works, named by the
option in messages, and `needed` (on the event loop, building nothing) agreeing with
the steps the worker would build."""

from __future__ import annotations

import pytest

from services.core.model.pageoptions import (
    Attachment,
    Encrypt,
    FacturX,
    Mark,
    Metadata,
    PageOptions,
    Sign,
)
from services.renderer import finishing

CSV = "data:text/csv;base64,YSxiCjEsMgo="
OPTIONS = [
    PageOptions(),
    PageOptions(attachments=()),
    PageOptions(metadata=Metadata(title="t"), outline=True, toc=True),
    PageOptions(pdfa="2b"),
    PageOptions(facturx=FacturX(xml="<x/>")),
    PageOptions(attachments=(Attachment("a.csv", CSV),)),
    PageOptions(encrypt=Encrypt(owner_password="owner-pass-1")),
    PageOptions(watermark=Mark(text="DRAFT")),
    PageOptions(stamp=Mark(text="PAID")),
    PageOptions(sign=Sign()),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_needed_agrees_with_the_steps_built(options: PageOptions) -> None:
    assert finishing.needed(options) == bool(finishing.steps_of(options))


def test_the_steps_come_in_the_order_that_works_each_named_by_its_option() -> None:
    options = PageOptions(
        sign=Sign(),
        encrypt=Encrypt(owner_password="owner-pass-1"),
        attachments=(Attachment("factur-x.xml", CSV),),
        facturx=FacturX(xml="<x/>", profile="BASIC"),
        stamp=Mark(text="PAID"),
        watermark=Mark(text="DRAFT"),
    )
    steps = finishing.steps_of(options)
    assert [label for label, _ in steps] == [
        "options.watermark",
        "options.stamp",
        "options.attachments",
        "options.facturx",
        "options.encrypt",
        "options.sign",
    ]
    attach = steps[2][1]
    assert [f.name for f in attach.files] == ["factur-x (2).xml"]  # the invoice keeps its name
