"""Pressroom's Gotenberg-compatible routes driven by Gotenberg clients other people
wrote, pinned: gotenberg-client from PyPI (pyproject.toml) and chromiumly from npm
(tests/integration/chromiumly/package.json, installed by `make`). What they get back is
read by pikepdf and poppler, not by Pressroom's own reader."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pikepdf
import pytest
from gotenberg_client import SyncGotenbergClient
from gotenberg_client.options import Measurement, MeasurementUnitType, PageMarginsType, PageSize
from httpx import BasicAuth

from tests.conftest import Stack

CHROMIUMLY = Path(__file__).parent / "chromiumly"


def pdftotext(data: bytes) -> str:
    done = subprocess.run(["pdftotext", "-", "-"], input=data, capture_output=True, check=True)
    return done.stdout.decode()


def size_pt(data: bytes) -> tuple[float, float]:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        box = [float(v) for v in pdf.pages[0].mediabox]
    return box[2] - box[0], box[3] - box[1]


def near(size: tuple[float, float], expected: tuple[float, float]) -> bool:
    """Within 1.5 pt: Chromium rounds a paper size to whole device pixels."""
    return all(abs(a - b) <= 1.5 for a, b in zip(size, expected, strict=True))


def python_client(stack: Stack, tmp_path: Path) -> list[bytes]:
    """gotenberg-client, synchronous, with Basic auth: the calls of its README."""
    index = tmp_path / "index.html"
    index.write_text(
        "<html><head><link rel=stylesheet href=style.css></head>"
        "<body><h1>Quarterly report</h1><p class=x>styled</p></body></html>"
    )
    style = tmp_path / "style.css"
    style.write_text(".x { color: #0a0 }")
    footer = tmp_path / "footer.html"
    footer.write_text('<p style="font-size:8px">page <span class="pageNumber"></span></p>')
    auth = BasicAuth("any", stack.tenant.key)
    with SyncGotenbergClient(stack.url, auth=auth, timeout=60) as client:
        assert client.health.health().chromium is not None
        with client.chromium.html_to_pdf() as route:
            margins = PageMarginsType(*(Measurement(1, MeasurementUnitType.Centimeters),) * 4)
            a4 = PageSize(width=Measurement(8.27), height=Measurement(11.7))
            first = (
                route.index(index).resource(style).footer(footer)
                .size(a4).margins(margins).trace_id("py-trace").run()
            )  # fmt: skip
            assert first.headers["Gotenberg-Trace"] == "py-trace"
        with client.chromium.screenshot_html() as route:
            shot = route.index(index).output_format("jpeg").quality(70).run()
            assert shot.headers["Content-Type"] == "image/jpeg"
        return [first.content, shot.content]


async def test_gotenberg_client_converts_and_screenshots_with_basic_auth(
    stack: Stack, tmp_path: Path
) -> None:
    pdf, jpeg = await asyncio.to_thread(python_client, stack, tmp_path)
    assert near(size_pt(pdf), (595.4, 842.4))
    assert "Quarterly report" in pdftotext(pdf) and "page 1" in pdftotext(pdf)
    assert jpeg.startswith(b"\xff\xd8\xff")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_chromiumly_from_npm(stack: Stack, tmp_path: Path) -> None:
    assert (CHROMIUMLY / "node_modules" / "chromiumly").is_dir(), "run make (npm ci)"
    env = {**os.environ, "ENDPOINT": stack.url, "KEY": stack.tenant.key, "OUT": str(tmp_path),
           "PAGE_URL": f"{stack.url}/docs"}  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, ["node", str(CHROMIUMLY / "convert.js"), "html", "url", "page", "refused"],
        env=env, capture_output=True, check=True, timeout=180,
    )  # fmt: skip
    results = {r["name"]: r for r in map(json.loads, done.stdout.decode().splitlines())}
    assert results["html"]["ok"] and results["url"]["ok"] and results["page"]["ok"], results
    html = (tmp_path / "html.pdf").read_bytes()
    assert near(size_pt(html), (841.9, 595.3))  # A4, landscape
    assert "INV-2026-0099" in pdftotext(html)
    with pikepdf.open(io.BytesIO(html)) as pdf:
        assert str(pdf.docinfo["/Title"]) == "From chromiumly"
    assert not results["refused"]["ok"] and "400" in results["refused"]["error"]
