"""Gotenberg's field values read as Gotenberg reads them: lengths in each unit, Go
durations, ExifTool's dates and sizes, a split span's pages, and `failOnHttpStatusCodes`
as the job's `fail_on_status`."""

from __future__ import annotations

import json

import pytest

from services.core.model import hooks
from services.core.model.errors import RequestError
from services.gateway.gotenberg import chromium, exiftool, forms, pdfengines, routes
from services.gateway.gotenberg.forms import Form, Upload


@pytest.mark.parametrize(
    ("value", "inches"),
    [("8.5", 8.5), ("8.5in", 8.5), ("210mm", 210 / 25.4), ("21cm", 21 / 2.54),
     ("612pt", 8.5), ("816px", 8.5), ("51pc", 8.5), (".5", 0.5), (" 1in ", 1.0)],
)  # fmt: skip
def test_lengths_in_every_unit(value: str, inches: float) -> None:
    assert forms.inches(Form(fields={"marginTop": value}), "marginTop", 0.39) == pytest.approx(
        inches
    )


@pytest.mark.parametrize("value", ["1em", "-1in", "1 in in", "1e3mm", "in", "٣in"])
def test_a_length_gotenberg_would_refuse_names_the_field(value: str) -> None:
    with pytest.raises(RequestError) as refused:
        forms.inches(Form(fields={"paperWidth": value}), "paperWidth", 8.5)
    assert refused.value.field == "paperWidth"


def test_defaults_and_durations() -> None:
    form = Form(fields={"a": "", "waitDelay": "1m30.5s", "b": "500ms"})
    assert forms.inches(form, "a", 0.39) == 0.39  # empty is unset, as in Go's FormValue
    assert forms.seconds(form, "waitDelay") == pytest.approx(90.5)
    assert forms.seconds(form, "b") == pytest.approx(0.5)
    with pytest.raises(RequestError):
        forms.seconds(Form(fields={"waitDelay": "5"}), "waitDelay")


def test_exiftool_dates_sizes_and_answer() -> None:
    assert exiftool.exif_date("D:20181206175006+00'00'") == "2018:12:06 17:50:06+00:00"
    assert exiftool.exif_date("D:20181206175006Z") == "2018:12:06 17:50:06Z"
    assert exiftool.file_size(213_000) == "213 kB"
    assert exiftool.file_size(512) == "512 bytes"
    report = {
        "metadata": [{"document": "a.pdf", "info": {"/Creator": "Chromium", "/Trapped": "/True",
                      "/CreationDate": "D:20181206175006+00'00'"}}],
        "validations": [{"document": "a.pdf", "version": "1.4", "pages": 3}],
    }  # fmt: skip
    answer = exiftool.answer(report, {"a.pdf": 213_000}, {"a.pdf": False})["a.pdf"]
    assert answer["Linearized"] == "No"
    assert exiftool.linearized(b"%PDF-1.7\n1 0 obj <</Linearized 1 /L 2000>>")
    assert answer["Creator"] == "Chromium" and answer["Trapped"] == "True"
    assert answer["CreateDate"] == "2018:12:06 17:50:06+00:00"
    assert (answer["PageCount"], answer["PDFVersion"], answer["FileSize"]) == (3, 1.4, "213 kB")


def test_a_split_span_as_pages() -> None:
    assert pdfengines.span_pages("1-3, 5") == ["1", "2", "3", "5"]
    assert pdfengines.span_pages("4-") == ["4-"]


def test_a_documents_content_type_by_its_key() -> None:
    """What an answer and a file webhook send: a ZIP of several outputs too (it was
    told as a PDF by the webhook before)."""
    assert hooks.content_type("jobs/t/j.zip") == "application/zip"
    assert hooks.content_type("jobs/t/j.jpg") == "image/jpeg"
    assert hooks.content_type("jobs/t/j.pdf") == "application/pdf"


def _url_form(**fields: str) -> Form:
    return Form(fields={"url": "https://example.com/", **fields})


@pytest.mark.parametrize(
    ("value", "statuses"),
    [("[]", []), ("[499, 599]", [499, 599]), ("[200]", [200]), ("", None)],
)
def test_fail_on_http_status_codes_is_the_jobs_fail_on_status(
    value: str, statuses: list[int] | None
) -> None:
    """Absent or empty: Pressroom's default, every 4xx and 5xx (Gotenberg's [499, 599]);
    a list, the statuses of the page's document that fail the job."""
    page = Form(fields={"failOnHttpStatusCodes": value},
                files=[Upload("files", "index.html", b"<p>x</p>")])  # fmt: skip
    for form, kind in ((_url_form(failOnHttpStatusCodes=value), "url"), (page, "html")):
        job = routes.as_job(chromium.convert(form, kind))
        assert job.options is not None and job.options.fail_on_status == statuses
    shot = routes.as_job(chromium.screenshot(_url_form(failOnHttpStatusCodes=value), "url"))
    assert shot.options is not None and shot.options.fail_on_status == statuses


@pytest.mark.parametrize(
    "value", ["[700]", "[99]", '["404"]', "404", "[true]", "[404.5]", '{"404": 1}', "[404",
              json.dumps(list(range(200, 301)))],
)  # fmt: skip
def test_a_bad_fail_on_http_status_codes_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(RequestError) as refused:
        routes.as_job(chromium.convert(_url_form(failOnHttpStatusCodes=value), "url"))
    assert refused.value.field == "failOnHttpStatusCodes", refused.value.message
    assert refused.value.http_status == 400
