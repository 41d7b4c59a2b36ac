"""A pipeline's steps as JSON: requests refuse unknown fields (naming them) while the log's
decoder tolerates them; every rule beyond the types refuses with the step and field it
concerns; output names are safe to save and unique."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.core.model.errors import RequestError
from services.pdftools import identity
from services.pdftools.names import pdf_name, unique
from services.pdftools.requests import StepRequest
from services.pdftools.rules import check_steps
from services.pdftools.signer import SigningKey
from services.pdftools.steps import AnyStep, Merge, Rotate, Sign, Validate
from tests.pki import signing_key


def requested(*steps: dict[str, Any]) -> list[Any]:
    return msgspec.convert(list(steps), list[StepRequest])


def refused(*steps: dict[str, Any], files: tuple[str, ...] = ()) -> RequestError:
    with pytest.raises(RequestError) as raised:
        check_steps(requested(*steps), files)
    return raised.value


def test_a_request_names_an_unknown_field_and_the_log_ignores_it() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"unknown field `key` - at `\$\[0\]`"):
        requested({"step": "sign", "key": "-----BEGIN PRIVATE KEY-----"})
    with pytest.raises(
        msgspec.ValidationError, match=r"unknown field `x` - at `\$\[0\].files\[0\]`"
    ):
        requested({"step": "attach", "files": [{"name": "a.csv", "source": "a", "x": 1}]})
    logged = msgspec.json.decode(
        b'[{"step": "sign", "key": "k"}, {"step": "merge"}]', type=list[AnyStep]
    )
    assert logged == [Sign(), Merge()]


def test_an_unknown_step_is_refused_naming_it() -> None:
    with pytest.raises(msgspec.ValidationError, match="Invalid value 'explode'"):
        requested({"step": "explode"})


def test_steps_round_trip_as_their_tags() -> None:
    steps = [Rotate(angle=90, pages="1-2"), Validate()]
    encoded = msgspec.json.encode(steps)
    assert encoded == b'[{"step":"rotate","angle":90,"pages":"1-2"},{"step":"validate"}]'
    assert msgspec.json.decode(encoded, type=list[AnyStep]) == steps


@pytest.mark.parametrize(
    ("steps", "field", "rule"),
    [
        ([{"step": "rotate", "angle": 45}], "steps[0].angle", "90, 180 or 270"),
        ([{"step": "rotate", "angle": 90, "pages": "3-1"}], "steps[0].pages", "pages and ranges"),
        ([{"step": "split"}], "steps[0]", "exactly one of ranges, every or outline"),
        ([{"step": "split", "every": 2, "outline": True}], "steps[0]", "exactly one"),
        ([{"step": "split", "every": 0}], "steps[0].every", "from 1 to"),
        ([{"step": "split", "ranges": ["1-2", "x"]}], "steps[0].ranges[1]", "pages and ranges"),
        ([{"step": "metadata", "created": "yesterday"}], "steps[0].created", "ISO 8601"),
        ([{"step": "pdfa", "level": "4"}], "steps[0].level", "1b, 2b, 3b"),
        ([{"step": "facturx", "xml": "<x/>", "profile": "GOLD"}], "steps[0].profile", "MINIMUM"),
        ([{"step": "attach", "files": []}], "steps[0].files", "at least one"),
        (
            [{"step": "attach", "files": [{"name": "a", "source": "nowhere"}]}],
            "steps[0].files[0].source",
            "one of the job's files",
        ),
        ([{"step": "stamp"}], "steps[0]", "exactly one of text, image or pdf"),
        ([{"step": "stamp", "pdf": "nowhere"}], "steps[0].pdf", "one of the job's files"),
        ([{"step": "encrypt", "owner_password": "short"}], "steps[0].owner_password", "at least 8"),
        (
            [{"step": "encrypt", "owner_password": "owner-pass-1", "permissions": ["all"]}],
            "steps[0].permissions[0]",
            "must be one of",
        ),
        ([{"step": "sign", "visible": True}], "steps[0].box", "is needed"),
        ([{"step": "sign"}, {"step": "rotate", "angle": 90}], "steps[1]", "cannot follow sign"),
        ([{"step": "pdfa"}, {"step": "rotate", "angle": 90}], "steps[1]", "cannot follow pdfa"),
        (
            [{"step": "pdfa"}, {"step": "encrypt", "owner_password": "owner-pass-1"}],
            "steps[1]",
            "cannot follow pdfa",
        ),
        (
            [{"step": "encrypt", "owner_password": "owner-pass-1"}, {"step": "pdfa"}],
            "steps[0]",
            "PDF/A forbids",
        ),
        (
            [{"step": "pdfa"}, {"step": "sign", "visible": True, "box": [40, 40, 300, 110]}],
            "steps[1].visible",
            "not embedded",
        ),
    ],
)
def test_each_rule_refuses_naming_the_step_and_field(
    steps: list[dict[str, Any]], field: str, rule: str
) -> None:
    error = refused(*steps)
    assert error.field == field, error.message
    assert rule in error.message and error.message.startswith(field)


def test_a_valid_pipeline_passes_and_signed_documents_may_still_be_validated() -> None:
    check_steps(
        requested(
            {"step": "merge"},
            {"step": "stamp", "pdf": "logo", "pages": "1"},
            {
                "step": "attach",
                "files": [{"name": "data.csv", "source": "data", "mime": "text/csv"}],
            },
            {"step": "pdfa", "level": "3b"},
            {"step": "sign", "reason": "Approved"},
            {"step": "validate"},
        ),
        files=("logo", "data"),
    )


def test_an_empty_or_huge_pipeline_is_refused() -> None:
    with pytest.raises(RequestError, match="at least one step"):
        check_steps([])
    with pytest.raises(RequestError, match="at most 50 steps"):
        check_steps([Validate()] * 51)


@pytest.mark.parametrize(
    ("given", "safe_name"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "_.._etc_passwd.pdf"),
        ("a\x00b\nc.PDF", "abc.PDF"),
        ("...", "document.pdf"),
        ("Chapter 1: Intro?", "Chapter 1_ Intro_.pdf"),
        ("x" * 300, "x" * 251 + ".pdf"),
    ],
)
def test_output_names_follow_the_file_name_rule_and_end_in_pdf(given: str, safe_name: str) -> None:
    assert pdf_name(given) == safe_name


def test_equal_output_names_are_numbered_ignoring_case() -> None:
    assert unique(["a.pdf", "A.pdf", "a.pdf", "b"]) == ["a.pdf", "A (2).pdf", "a (3).pdf", "b.pdf"]


def test_a_sign_steps_identity_sent_to_post_jobs_is_checked_before_any_job_exists() -> None:
    own, other = signing_key("ec"), signing_key("ec")
    check_steps([Sign(identity=identity.carried(own))])  # a certificate with its own key
    mismatched = SigningKey(certificate=own.certificate, key=other.key)
    for text, says in (
        ("not base64 at all", "cannot be read"),
        (identity.carried(SigningKey(certificate=b"x", key=b"y")), "not a certificate"),
        (identity.carried(mismatched), "not the key of the certificate"),
    ):
        with pytest.raises(RequestError) as refused:
            check_steps([Sign(identity=text)])
        assert refused.value.field == "steps[0].identity"
        assert says in refused.value.message
