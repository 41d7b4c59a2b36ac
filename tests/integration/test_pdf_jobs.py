"""PDF-tools jobs through the whole stack: `POST /jobs` with `pdf` (inputs and steps),
checked by the gateway (400 naming the field, 404 for another tenant's job), carried by
the log, run by the renderer in the PDF workers, and what was stored read back by
readers that did not write it (qpdf, poppler, pikepdf); the report at
`/jobs/{id}/report`; hostile inputs fail their job with a clear error while the
service goes on.

Files are sent as users send them (multipart `POST /jobs`, stored assets); only a
forged file reference is published to the log directly, as no gateway would write it.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import aiohttp
import pikepdf

from services.core.log import bus
from services.core.model import events
from services.core.model.files import FileRef, digest_of
from services.core.model.pdfwork import PdfInput, PdfWork
from tests.conftest import Receiver, Stack, eventually
from tests.integration import hostile_pdfs
from tests.integration.pdf_inputs import TOOLS, chapters, pdfinfo, pdftotext, qpdf_check

pytestmark = TOOLS


async def download(stack: Stack, job: dict[str, Any]) -> tuple[bytes, str]:
    assert job["status"] == "done", job
    async with stack.client.get(job["url"]) as response:
        assert response.status == 200, await response.text()
        return await response.read(), response.content_type


async def done(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    job = await stack.finished((await stack.submit(body))["id"])
    assert job["status"] == "done", job
    return job


async def refusal(stack: Stack, body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
        assert response.status == status, (body, await response.text())
        error: dict[str, Any] = (await response.json())["error"]
        return error


async def test_earlier_jobs_merged_split_encrypted_and_reported(
    stack: Stack, tmp_path: Path, receiver: Receiver
) -> None:
    first = await done(stack, {"html": chapters(3)})
    second = await done(stack, {"html": chapters(2)})
    merged = await done(
        stack,
        {"pdf": {
            "inputs": [{"job": first["id"]}, {"job": second["id"]}],
            "steps": [{"step": "merge"}, {"step": "metadata", "title": "Both"},
                      {"step": "validate"}],
        }, "webhook_url": receiver.url},
    )  # fmt: skip
    data, content_type = await download(stack, merged)
    assert content_type == "application/pdf"
    qpdf_check(data, tmp_path)
    info = pdfinfo(data, tmp_path)
    assert (info["Pages"], info["Title"]) == ("5", "Both")
    assert "Chapter 3" in pdftotext(data, tmp_path)
    with pikepdf.open(io.BytesIO(data)) as pdf, pdf.open_outline() as outline:
        assert [item.title for item in outline.root] == [
            f"{first['id']}.pdf",
            f"{second['id']}.pdf",
        ]
    assert merged["pages"] == 5  # pages processed: what usage counts
    async with stack.client.get(f"{stack.url}/jobs/{merged['id']}/report") as response:
        assert response.status == 200, await response.text()
        report = (await response.json())["report"]
    assert report["pages_processed"] == 5
    assert [s["step"] for s in report["steps"]] == ["merge", "metadata", "validate"]
    assert report["outputs"] == [{"name": "merged.pdf", "pages": 5, "bytes": len(data)}]
    assert report["validations"][0]["pages"] == 5
    hook = await eventually(lambda: receiver.requests, what="the merge's webhook")
    assert (hook[0]["json"]["type"], hook[0]["json"]["data"]["id"]) == ("job.done", merged["id"])
    other = await stack.new_tenant()
    async with other.http.get(f"{stack.url}/jobs/{merged['id']}/report") as response:
        assert response.status == 404  # another tenant's report is no report

    secret = "owner-pass-77"
    split = await done(
        stack,
        {"pdf": {
            "inputs": [{"job": merged["id"]}],
            "steps": [{"step": "split", "every": 2},
                      {"step": "encrypt", "owner_password": secret}],
        }},
    )  # fmt: skip
    data, content_type = await download(stack, split)
    assert content_type == "application/zip"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        parts = [archive.read(name) for name in names]
    assert len(names) == 3, names
    for part, pages in zip(parts, ("2", "2", "1"), strict=True):
        qpdf_check(part, tmp_path)
        assert pdfinfo(part, tmp_path)["Pages"] == pages
        with pikepdf.open(io.BytesIO(part)) as pdf:
            assert pdf.is_encrypted and not pdf.allow.modify_other
    async with stack.client.get(f"{stack.url}/jobs/{split['id']}/events") as response:
        timeline = (await response.json())["events"]
    assert secret not in str(timeline)
    assert timeline[0]["pdf"]["steps"][1]["owner_password"] == "(hidden)"
    async with stack.client.get(f"{stack.url}/jobs/{first['id']}/report") as response:
        assert response.status == 404  # a rendered job has no report
    async with stack.client.delete(f"{stack.url}/jobs/{merged['id']}") as response:
        assert response.status == 200

    async def forgotten() -> bool:
        return (await stack.job(merged["id"]))["url"] is None

    await eventually(forgotten, what="the deletion projected")
    error = await refusal(
        stack, {"pdf": {"inputs": [{"job": merged["id"]}], "steps": [{"step": "optimise"}]}}, 409
    )
    assert error["field"] == "pdf.inputs[0].job"


async def test_bad_pdf_work_is_refused_naming_the_field(stack: Stack) -> None:
    mine = await done(stack, {"html": "<p>mine</p>"})
    other = await stack.new_tenant()
    theirs: dict[str, Any] = {"pdf": {"inputs": [{"job": mine["id"]}],
                                      "steps": [{"step": "optimise"}]}}  # fmt: skip
    async with other.http.post(f"{stack.url}/jobs", json=theirs) as response:
        assert response.status == 404
        leaked = (await response.json())["error"]
    unknown = {**theirs, "pdf": {**theirs["pdf"], "inputs": [{"job": uuid.uuid4().hex}]}}
    async with other.http.post(f"{stack.url}/jobs", json=unknown) as response:
        never = (await response.json())["error"]
    assert leaked["field"] == never["field"] == "pdf.inputs[0].job"
    assert leaked["message"].replace(mine["id"], "X") == never["message"].replace(
        unknown["pdf"]["inputs"][0]["job"], "X"
    )
    rotate = [{"step": "rotate", "angle": 90}]
    cases: dict[str, dict[str, Any]] = {
        "pdf.inputs": {"inputs": [], "steps": rotate},
        "pdf.inputs[0]": {"inputs": [{"file": "a.pdf", "job": mine["id"]}], "steps": rotate},
        "pdf.inputs[0].file": {"inputs": [{"file": "../a.pdf"}], "steps": rotate},
        "pdf.inputs[1].file": {"inputs": [{"job": mine["id"]}, {"file": "a.pdf"}],
                               "steps": rotate},
        "pdf.inputs[0].colour": {"inputs": [{"job": mine["id"], "colour": 1}], "steps": rotate},
        "pdf.steps[0].angle": {"inputs": [{"job": mine["id"]}],
                               "steps": [{"step": "rotate", "angle": 45}]},
        "pdf.steps[1]": {"inputs": [{"job": mine["id"]}],
                         "steps": [{"step": "pdfa"}, {"step": "rotate", "angle": 90}]},
        "pdf.steps": {"inputs": [{"job": mine["id"]}], "steps": []},
        "pdf.steps[0].files[0].source": {"inputs": [{"job": mine["id"]}], "steps": [
            {"step": "attach", "files": [{"name": "x.csv", "source": "x.csv"}]}]},
        "pdf.steps[0].owner_password": {"inputs": [{"job": mine["id"]}],
                                        "steps": [{"step": "encrypt", "owner_password": "x"}]},
    }  # fmt: skip
    for field, work in cases.items():
        error = await refusal(stack, {"pdf": work})
        assert (error["type"], error["field"]) == ("validation", field), (work, error)
    many = {"pdf": {"inputs": [{"job": mine["id"]}] * 501, "steps": rotate}}
    assert (await refusal(stack, many))["field"] == "pdf.inputs"
    unknown = await refusal(stack, {"pdf": {"inputs": [{"asset": "t.pdf"}], "steps": rotate}})
    assert (unknown["type"], unknown["field"]) == ("asset_missing", "pdf.inputs[0].asset")
    steps = [{"step": "shred"}]
    error = await refusal(stack, {"pdf": {"inputs": [{"job": mine["id"]}], "steps": steps}})
    assert error["field"].startswith("pdf.steps"), error
    both = {"html": "<p>x</p>", "pdf": {"inputs": [{"job": mine["id"]}], "steps": rotate}}
    assert (await refusal(stack, both))["field"] == "pdf"
    printed = {"pdf": {"inputs": [{"job": mine["id"]}], "steps": rotate},
               "options": {"format": "A4"}}  # fmt: skip
    assert (await refusal(stack, printed))["field"] == "options"


def form(files: dict[str, bytes], job: dict[str, Any]) -> aiohttp.FormData:
    """A multipart request: the part `job` (its JSON) first, then each file by its name."""
    data = aiohttp.FormData()
    data.add_field("job", json.dumps(job), content_type="application/json")
    for name, content in files.items():
        data.add_field("file", content, filename=name, content_type="application/octet-stream")
    return data


async def posted(stack: Stack, files: dict[str, bytes], job: dict[str, Any]) -> str:
    """A PDF-tools job sent as a user sends one: multipart, its files as parts."""
    async with stack.client.post(f"{stack.url}/jobs", data=form(files, job)) as response:
        assert response.status == 202, await response.text()
        job_id: str = (await response.json())["id"]
        return job_id


async def test_uploaded_inputs_and_hostile_ones_fail_clearly_while_the_service_goes_on(
    stack: Stack, tmp_path: Path
) -> None:
    files = {
        "plain.pdf": hostile_pdfs.plain(3),
        "truncated.pdf": hostile_pdfs.truncated(),
        "script.pdf": hostile_pdfs.javascript_open_action(),
        "loop.pdf": hostile_pdfs.looping_page_tree(),
        "locked.pdf": hostile_pdfs.encrypted("open-sesame-1"),
        "bomb.pdf": hostile_pdfs.flate_bomb(),
    }
    rotate: list[dict[str, Any]] = [{"step": "rotate", "angle": 90}]
    expected = {
        "truncated.pdf": ("pdf_invalid", "truncated.pdf is not a PDF that can be read"),
        "script.pdf": ("pdf_active_content", "script.pdf has JavaScript"),
        "loop.pdf": ("pdf_invalid", "loop.pdf"),
        "locked.pdf": ("pdf_encrypted", "locked.pdf"),
        "bomb.pdf": ("pdfa_not_possible", "errors while decoding content stream"),
    }
    for name, (kind, words) in expected.items():
        steps = [{"step": "pdfa"}] if name == "bomb.pdf" else rotate
        work = {"pdf": {"inputs": [{"file": name}], "steps": steps}}
        job = await stack.finished(await posted(stack, {name: files[name]}, work), timeout=90)
        assert (job["status"], job["attempts"]) == ("failed", 1), (name, job)
        assert job["error"]["type"] == kind and words in job["error"]["message"], (name, job)
    both = [{"file": "locked.pdf", "password": "open-sesame-1"}, {"file": "plain.pdf"}]
    work = {"pdf": {"inputs": both, "steps": [{"step": "merge"}, *rotate]}}
    data, _ = await download(stack, await stack.finished(await posted(stack, files, work)))
    qpdf_check(data, tmp_path)
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert [int(page.obj.get("/Rotate", 0)) for page in pdf.pages][-1] == 90
        with pikepdf.open(io.BytesIO(files["locked.pdf"]), password="open-sesame-1") as locked:
            assert len(pdf.pages) == 3 + len(locked.pages)
    garbage = {"pdf": {"inputs": [{"file": "g.pdf"}], "steps": rotate}}
    async with stack.client.post(
        f"{stack.url}/jobs", data=form({"g.pdf": b"\x89PNG\r\n\x1a\n" + bytes(64)}, garbage)
    ) as response:
        assert response.status == 400, await response.text()  # sniffed, not trusted
        assert (await response.json())["error"]["field"] == "g.pdf"  # a PNG named .pdf


async def test_a_stored_asset_is_an_input_and_a_forged_file_fails_the_job(
    stack: Stack, tmp_path: Path
) -> None:
    terms = hostile_pdfs.plain(2, text="Terms")
    assets = aiohttp.FormData()
    assets.add_field("file", terms, filename="terms.pdf", content_type="application/pdf")
    async with stack.client.post(f"{stack.url}/assets", data=assets) as response:
        assert response.status == 201, await response.text()
    work = {"pdf": {"inputs": [{"file": "invoice.pdf"}, {"asset": "terms.pdf"}],
                    "steps": [{"step": "merge"}]}}  # fmt: skip
    job = await stack.finished(await posted(stack, {"invoice.pdf": hostile_pdfs.plain(1)}, work))
    data, _ = await download(stack, job)
    assert "Terms 2" in pdftotext(data, tmp_path) and pdfinfo(data, tmp_path)["Pages"] == "3"
    other = await stack.new_tenant()  # another tenant's assets are not this one's
    missing = {"pdf": {"inputs": [{"asset": "terms.pdf"}], "steps": [{"step": "optimise"}]}}
    async with other.http.post(f"{stack.url}/jobs", json=missing) as response:
        assert response.status == 400, await response.text()
        assert (await response.json())["error"]["field"] == "pdf.inputs[0].asset"

    forged = FileRef(name="plain.pdf", digest=digest_of(b"other"), size=3,
                     content_type="application/pdf")  # fmt: skip
    job_id = uuid.uuid4().hex  # published as a gateway would: only the log can forge it
    event = events.JobSubmitted(
        job_id=job_id, tenant=stack.tenant.id, files=[forged],
        pdf=PdfWork([PdfInput(file="plain.pdf")], [{"step": "rotate", "angle": 90}]),
    )  # fmt: skip
    async with bus.open_bus(stack.settings, name="test") as (_, js):
        await bus.publish(js, event)
    job = await stack.finished(job_id)
    assert (job["status"], job["error"]["type"]) == ("failed", "pdf_invalid"), job
    assert "no longer stored" in job["error"]["message"]
