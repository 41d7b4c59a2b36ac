"""The rules of `pdfa`, `facturx`, `attachments` and `encrypt`
(services/core/model/finishingoptions.py):
each bad value is a `RequestError` naming the option's path; data URLs and invoice XML are
read the way the renderer's finishing steps read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from services.core.model.errors import RequestError
from services.core.model.finishingoptions import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS,
    data_url,
    invoice_problem,
)
from services.core.model.options import check_options
from services.gateway.requests import OptionsRequest

INVOICE = (Path(__file__).resolve().parents[4] / "examples" / "factur-x.xml").read_text()
NAMESPACE = "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
CII = f'<rsm:CrossIndustryInvoice xmlns:rsm="{NAMESPACE}"/>'
CSV = "data:text/csv;base64,YSxiCjEsMgo="
OWNER = "owner-pass-1"


def refused_field(**fields: Any) -> str | None:
    try:
        check_options(msgspec.convert(fields, OptionsRequest))
    except RequestError as exc:
        assert exc.message.startswith(exc.field or "?")
        return exc.field
    return None


def attachments(*items: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "content": content} for name, content in items]


def test_good_finishing_options_pass() -> None:
    assert refused_field(pdfa="2b") is None
    assert refused_field(facturx={"xml": INVOICE, "profile": "BASIC WL"}, pdfa="3b") is None
    assert refused_field(attachments=attachments(("a.csv", CSV), ("b.csv", CSV))) is None
    crypt = {"owner_password": OWNER, "user_password": "user-pass-1", "permissions": ["print"]}
    assert refused_field(encrypt=crypt) is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"pdfa": "1b"}, "options.pdfa"),
        ({"pdfa": "2b", "facturx": {"xml": CII}}, "options.pdfa"),
        ({"pdfa": "2b", "attachments": attachments(("a.csv", CSV))}, "options.pdfa"),
        ({"facturx": {"xml": CII, "profile": "basic"}}, "options.facturx.profile"),
        ({"facturx": {"xml": "<a><b></a>"}}, "options.facturx.xml"),
        ({"facturx": {"xml": "<Invoice/>"}}, "options.facturx.xml"),
        ({"output": "png", "pdfa": "3b"}, "options.pdfa"),
        ({"output": "png", "encrypt": {"owner_password": OWNER}}, "options.encrypt"),
        ({"attachments": attachments(("", CSV))}, "options.attachments[0].name"),
        ({"attachments": attachments(("a/b.csv", CSV))}, "options.attachments[0].name"),
        ({"attachments": attachments(("a.csv", CSV), ("a.csv", CSV))},
         "options.attachments[1].name"),
        ({"facturx": {"xml": CII}, "attachments": attachments(("factur-x.xml", CSV))},
         "options.attachments[0].name"),
        ({"attachments": attachments(("a.csv", "a,b"))}, "options.attachments[0].content"),
        ({"attachments": attachments(("a.csv", "data:text/csv;base64,@@"))},
         "options.attachments[0].content"),
        ({"attachments": attachments(*[(f"{i}.csv", CSV) for i in range(MAX_ATTACHMENTS + 1)])},
         "options.attachments"),
        ({"encrypt": {"owner_password": ""}}, "options.encrypt.owner_password"),
        ({"encrypt": {"owner_password": "seven77"}}, "options.encrypt.owner_password"),
        ({"encrypt": {"owner_password": "é" * 64}}, "options.encrypt.owner_password"),
        ({"encrypt": {"owner_password": OWNER, "user_password": "short"}},
         "options.encrypt.user_password"),
        ({"encrypt": {"owner_password": OWNER, "user_password": OWNER}},
         "options.encrypt.user_password"),
        ({"encrypt": {"owner_password": OWNER, "permissions": ["print", "all"]}},
         "options.encrypt.permissions[1]"),
        ({"pdfa": "3b", "encrypt": {"owner_password": OWNER}}, "options.encrypt"),
        ({"facturx": {"xml": CII}, "encrypt": {"owner_password": OWNER}}, "options.encrypt"),
    ],
)  # fmt: skip
def test_each_bad_finishing_option_is_refused_naming_it(fields: dict[str, Any], field: str) -> None:
    assert refused_field(**fields) == field


@pytest.mark.parametrize(
    "name",
    [
        "..",
        "../a.csv",
        "C:a.csv",
        "a\\b.csv",
        "a\uff0fb.csv",
        "aux.csv",
        "LPT\u00b2.txt",
        ".hidden",
        "a.csv.",
        "a\u202ecsv.exe",
        "a\u200b.csv",
        "a\tb.csv",
        "x" * 252 + ".csv",
    ],
)
def test_an_attachment_name_the_safe_name_rule_would_change_is_refused(name: str) -> None:
    assert refused_field(attachments=attachments((name, CSV))) == "options.attachments[0].name"


def test_attachment_names_may_not_differ_only_by_case_or_normalisation() -> None:
    for first, second in (("Data.csv", "data.CSV"), ("caf\u00e9.csv", "cafe\u0301.csv")):
        assert refused_field(attachments=attachments((first, CSV), (second, CSV))) == (
            "options.attachments[1].name"
        )
    with_invoice = {"facturx": {"xml": CII}, "attachments": attachments(("Factur-X.XML", CSV))}
    assert refused_field(**with_invoice) == "options.attachments[0].name"


def test_an_attachment_name_in_any_script_is_accepted() -> None:
    assert refused_field(attachments=attachments(("\u8acb\u6c42\u66f8 \u21161.csv", CSV))) is None


def test_an_attachment_over_the_size_limit_is_refused() -> None:
    big = "data:application/octet-stream;base64," + "A" * (MAX_ATTACHMENT_BYTES // 3 * 4 + 8)
    assert refused_field(attachments=attachments(("big.bin", big))) == (
        "options.attachments[0].content"
    )


def test_unknown_fields_inside_the_finishing_options_are_refused() -> None:
    for fields in (
        {"encrypt": {"owner_password": OWNER, "aes": True}},
        {"facturx": {"xml": CII, "lang": "de"}},
        {"attachments": [{"name": "a", "content": CSV, "mime": "text/csv"}]},
    ):
        with pytest.raises(msgspec.ValidationError, match="unknown field"):
            msgspec.convert(fields, OptionsRequest)


def test_a_data_url_gives_its_media_type_and_bytes() -> None:
    assert data_url("data:Text/CSV;charset=utf-8;base64,YSxi") == ("text/csv", b"a,b")
    assert data_url("data:text/csv,a,b") is None
    assert data_url("data:text/csv;base64,YSx") is None  # bad padding


def test_invoice_xml_with_a_doctype_is_refused_before_any_entity_is_expanded() -> None:
    laughs = (
        '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<rsm:CrossIndustryInvoice xmlns:rsm="urn:un:unece:uncefact:data:standard:'
        'CrossIndustryInvoice:100">&b;</rsm:CrossIndustryInvoice>'
    )
    assert "DOCTYPE" in (invoice_problem(laughs) or "")
    assert invoice_problem(INVOICE) is None
    assert "root element" in (invoice_problem('<CrossIndustryInvoice xmlns="urn:other"/>') or "")
