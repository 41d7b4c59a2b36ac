"""Hostile PDFs (`hostile_pdfs.CORPUS`, made in the test) through a real PDF-tools
worker: each ends in its clear, deterministic error within a time bound, or, when
passing it on harms no one (a bomb never decoded, an image never drawn), in a bounded
success; and after each the same worker pool still does a good job.

What each case verifies:
- a file cut short, garbage, nesting deeper than qpdf parses, a page tree that loops:
  `pdf_invalid`, naming the file and qpdf's reason;
- 20,000 pages: `too_many_pages`, naming PRESSROOM_PDF_MAX_PAGES;
- JavaScript in /OpenAction or a page's /AA, a launch action: `pdf_active_content`,
  naming where; reported, not refused, by a pipeline that only validates;
- a password-protected file without its password: `pdf_encrypted`;
- a broken cross-reference table: rebuilt by qpdf, with the repair in the report;
- a flate bomb (a few KB to 1 GiB): carried undecoded by a merge; a step that must
  decode it stops at qpdf's decoding limit with a clear error, even in a worker with
  less memory than that limit;
- a pipeline over the time limit: its worker is replaced, the next job is served.
"""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pikepdf
import pytest
import pytest_asyncio

from services.core.model.errors import (
    FinishingError,
    PdfActiveContent,
    PdfaNotPossible,
    PdfEncrypted,
    PdfInvalid,
    PressroomError,
    TooManyPages,
)
from services.core.sandbox.jail import Jail, TemplateLimits
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input, Result
from services.pdftools.steps import Merge, Optimise, PdfA, Step, Validate
from services.pdftools.worker import Tools
from tests.integration import hostile_pdfs
from tests.integration.pdf_inputs import TOOLS, qpdf_check

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIMITS = TemplateLimits(1024 * 2**20, 60.0, 50_000_000)
SMALL = 250 * 2**20  # less than qpdf's decoding limit (256 MiB) plus the worker itself
BOUND = 20.0  # seconds: each hostile file is dealt with well within it
REFUSED: dict[str, tuple[type[PressroomError], str]] = {
    "truncated": (PdfInvalid, r"truncated\.pdf is not a PDF that can be read: unable to find"),
    "garbage": (PdfInvalid, r"garbage\.pdf is not a PDF that can be read"),
    "deep_nesting": (PdfInvalid, r"deep_nesting\.pdf has no page .*nested"),
    "looping_page_tree": (PdfInvalid, r"looping_page_tree\.pdf .*[Ll]oop detected"),
    "many_pages": (TooManyPages, r"more than 5000 pages .*PRESSROOM_PDF_MAX_PAGES"),
    "javascript_open_action": (PdfActiveContent, r"JavaScript .*the catalog's /OpenAction"),
    "javascript_page_aa": (PdfActiveContent, r"page 1's /AA"),
    "launch_action": (PdfActiveContent, r"launch actions: the catalog's /OpenAction"),
    "encrypted": (PdfEncrypted, r"encrypted\.pdf is encrypted: give its password"),
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tools() -> AsyncIterator[Tools]:
    async with Jail(1, LIMITS, what="the PDF steps", error=FinishingError) as jail:
        yield Tools(jail, Context(), Limits())


async def timed(tools: Tools, name: str, data: bytes, *steps: Step, password: str = "") -> Result:
    started = time.monotonic()
    try:
        return await tools.run([Input(f"{name}.pdf", data, password)], list(steps))
    finally:
        assert time.monotonic() - started < BOUND, f"{name} took longer than {BOUND} s"


async def still_serves(tools: Tools) -> None:
    result = await tools.run([Input("good.pdf", hostile_pdfs.plain(3))], [Merge()])
    assert result.documents[0].pages == 3


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_a_hostile_pdf_gets_its_clear_error_and_the_pool_stays_usable(
    tools: Tools, case: str
) -> None:
    error, message = REFUSED[case]
    with pytest.raises(error, match=message) as raised:
        await timed(tools, case, hostile_pdfs.CORPUS[case](), Merge(), Optimise(recompress=True))
    assert raised.value.http_status in (413, 422)
    await still_serves(tools)


async def test_active_content_is_reported_by_a_pipeline_that_only_validates(tools: Tools) -> None:
    result = await timed(tools, "script", hostile_pdfs.javascript_open_action(), Validate())
    (found,) = result.report.validations
    assert found.document == "script.pdf" and result.documents[0].pages == 1


async def test_the_right_password_opens_an_encrypted_input_and_a_wrong_one_is_named(
    tools: Tools,
) -> None:
    data = hostile_pdfs.encrypted("open-sesame-1")
    result = await timed(tools, "locked", data, Merge(), password="open-sesame-1")
    assert result.documents[0].pages == 1
    with pytest.raises(PdfEncrypted, match="the password given is wrong"):
        await timed(tools, "locked", data, Merge(), password="not-it-at-all")


@TOOLS
async def test_a_broken_cross_reference_table_is_rebuilt_and_the_repair_reported(
    tools: Tools, tmp_path: Path
) -> None:
    result = await timed(tools, "xref", hostile_pdfs.broken_xref(), Optimise())
    assert result.documents[0].pages == 3
    assert "xref.pdf: file is damaged" in result.report.warnings
    qpdf_check(result.documents[0].data, tmp_path)


async def test_a_flate_bomb_is_carried_undecoded_or_stopped_at_the_decoding_limit(
    tools: Tools,
) -> None:
    bomb = hostile_pdfs.flate_bomb()
    assert len(bomb) < 10_000
    merged = await timed(tools, "bomb", bomb, Merge())
    assert len(merged.documents[0].data) < 10_000  # never inflated on the way through
    with pytest.raises(PdfaNotPossible, match="errors while decoding content stream"):
        await timed(tools, "bomb", bomb, PdfA(level="2b"))
    await still_serves(tools)


async def test_a_worker_with_less_memory_than_the_decoding_limit_still_refuses_a_bomb() -> None:
    """qpdf's decoding limit gives up before the worker's memory limit is reached."""
    small = TemplateLimits(SMALL, 60.0, 50_000_000)
    async with Jail(1, small, what="the PDF steps", error=FinishingError) as jail:
        tools = Tools(jail, Context(), Limits())
        with pytest.raises(PdfaNotPossible, match="errors while decoding content stream"):
            await timed(tools, "bomb", hostile_pdfs.flate_bomb(), PdfA(level="2b"))
        await still_serves(tools)


async def test_a_pipeline_over_the_time_limit_loses_only_its_worker() -> None:
    quick = TemplateLimits(LIMITS.memory_bytes, 0.05, 50_000_000)
    async with Jail(1, quick, what="the PDF steps", error=FinishingError) as jail:
        tools = Tools(jail, Context(), Limits())
        many = [Input(f"{n}.pdf", hostile_pdfs.plain(50)) for n in range(20)]
        with pytest.raises(FinishingError, match=r"the PDF steps took longer than 0\.05 s"):
            await tools.run(many, [Merge(), Validate()])
        jail.limits = LIMITS  # the replaced worker serves the next job
        await still_serves(tools)


async def test_a_huge_image_header_is_passed_on_without_being_decoded(tools: Tools) -> None:
    result = await timed(tools, "image", hostile_pdfs.huge_image(), Merge(), Optimise())
    with pikepdf.open(io.BytesIO(result.documents[0].data)) as pdf:
        (image,) = pdf.pages[0].get_images().values()
        assert (int(image.Width), int(image.Height)) == (1_000_000, 1_000_000)
