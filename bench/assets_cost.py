"""What serving a job's files by request interception costs, against the same document
with the files inlined as `data:` URLs, in one run, on one browser.

The document: a stylesheet, a PNG logo of random pixels and a WOFF font (DejaVu Sans
renamed, about as large as a real brand font), all used. Three variants, alternating by round:

- `data:`  the HTML with the stylesheet in a `<style>` and the logo and font as `data:`
  URLs, as a client had to send them before files (the bytes inside the HTML);
- `files`  the HTML naming `style.css`, `logo.png`, `fonts/brand.woff`, served from
  (local) storage through one shared `FileCache`, as a renderer serves them (read once,
  then from memory);
- `files, cold`  the same with a new cache per job: every file read from storage.

It measures the renderer's side (Chromium's load and print, the interception, the
storage reads); the gateway's (reading the multipart body, writing the files once) is
paid once per file, not per render. Prints the median wall time of a render and the
ratio of each variant to `data:`.

    .venv/bin/python bench/assets_cost.py [--rounds 5] [--count 20]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.core.model.pageoptions import PageOptions  # noqa: E402
from services.core.objectstore.filestore import store_file  # noqa: E402
from services.core.objectstore.storage import LocalStorage  # noqa: E402
from services.core.runtime.settings import Settings  # noqa: E402
from services.renderer.browser import BrowserPool, Html  # noqa: E402
from services.renderer.jobfiles import FileCache, JobFiles  # noqa: E402
from tests.integration.test_job_files import brand_font  # noqa: E402

CSS = (
    "@font-face { font-family: Brand; src: url(%s) }\n"
    "body { font-family: Brand; margin: 2cm } h1 { color: #235 } img { width: 4cm }"
)
BODY = "<h1>Invoice 2041</h1><img src=%s>" + "<p>Line of the invoice, with a price.</p>" * 40


def noisy_png(width: int, height: int) -> bytes:
    """A PNG of random pixels: about `3 * width * height` bytes, as a photo-like logo is
    (a flat one compresses to almost nothing)."""
    raw = b"".join(b"\x00" + os.urandom(3 * width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = chunk(b"IDAT", zlib.compress(raw))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + idat + chunk(b"IEND", b"")


def documents(logo: bytes, font: bytes) -> tuple[str, str]:
    """The document inlined (`data:` URLs) and naming its files."""
    font_url = "data:font/woff;base64," + base64.b64encode(font).decode()
    logo_url = "data:image/png;base64," + base64.b64encode(logo).decode()
    inlined = f"<style>{CSS % font_url}</style>" + BODY % logo_url
    named = '<link rel="stylesheet" href="style.css">' + BODY % "logo.png"
    return inlined, named


async def main(rounds: int, count: int) -> None:
    logo, font = noisy_png(200, 100), brand_font()
    inlined, named = documents(logo, font)
    with tempfile.TemporaryDirectory() as folder:
        storage = LocalStorage(folder, "http://bench", "secret")
        refs = [
            await store_file(storage, "bench", "style.css", (CSS % "fonts/brand.woff").encode()),
            await store_file(storage, "bench", "logo.png", logo),
            await store_file(storage, "bench", "fonts/brand.woff", font),
        ]
        shared = FileCache(storage, 64 * 2**20)
        times: dict[str, list[float]] = {"data:": [], "files": [], "files, cold": []}
        chromium = Settings().chromium_path()
        async with BrowserPool(chromium, pages=1, timeout=30, max_output_bytes=10**8) as pool:
            for _ in range(2):  # warm the browser and the shared cache
                await pool.render(Html(named), PageOptions(), None, JobFiles(shared, "bench", refs))
            for _ in range(rounds):
                for variant in times:
                    for _ in range(count):
                        cache = FileCache(storage, 64 * 2**20) if "cold" in variant else shared
                        files = None if variant == "data:" else JobFiles(cache, "bench", refs)
                        html = inlined if variant == "data:" else named
                        started = time.perf_counter()
                        await pool.render(Html(html), PageOptions(), None, files)
                        times[variant].append(time.perf_counter() - started)
    base = statistics.median(times["data:"])
    print(f"document: logo {len(logo)} B, font {len(font)} B, inlined HTML {len(inlined)} B")
    print(f"{'variant':<14}{'renders':>8}{'median ms':>11}{'ratio':>8}")
    for variant, found in times.items():
        median = statistics.median(found)
        print(f"{variant:<14}{len(found):>8}{median * 1000:>11.1f}{median / base:>8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.count))
