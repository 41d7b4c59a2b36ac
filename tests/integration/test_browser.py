"""BrowserPool against a real Chromium: output, options, limits, timeouts, crashes, exit.

Chromium is required (`/usr/bin/chromium`, or `PRESSROOM_CHROMIUM`). One pool serves the
tests that do not need special settings; tests that break or close a browser start their
own. Waits are polls with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytest_asyncio
from pypdf import PdfReader

from services.core.model.errors import (
    BrowserError,
    OutputTooLarge,
    PageCrashed,
    RenderTimeout,
    RequestError,
    WaitTimeout,
)
from services.core.model.pageoptions import Margin, PageOptions, WaitFor
from services.core.runtime.settings import Settings
from services.renderer.browser import BrowserPool, Html, count_pages, privileges
from services.renderer.browser import output as output_module
from services.renderer.browser.privileges import confine
from tests.conftest import eventually

# Tests that use the shared `pool` run in its event loop; the others get their own.
shared_loop = pytest.mark.asyncio(loop_scope="module")

CHROMIUM = Settings().chromium_path()  # the headless shell where installed, as deployed
A4 = PageOptions()
ENDLESS = "<p>never printed</p><script>while (true) {}</script>"


def pool_of(**overrides: float) -> BrowserPool:
    settings: dict[str, float] = {"pages": 2, "timeout": 15.0, "max_output_bytes": 50_000_000}
    settings.update(overrides)
    return BrowserPool(
        CHROMIUM,
        pages=int(settings["pages"]),
        timeout=settings["timeout"],
        max_output_bytes=int(settings["max_output_bytes"]),
        recycle_after=int(settings.get("recycle_after", 1000)),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_pool() -> AsyncIterator[BrowserPool]:
    async with pool_of() as pool:
        yield pool


@pytest_asyncio.fixture(loop_scope="module")
async def pool(shared_pool: BrowserPool) -> AsyncIterator[BrowserPool]:
    """The module's pool; what a test leaves it doing (a context replaced after a job
    that went to the network) is finished before the module's loop is left for others."""
    yield shared_pool
    await shared_pool.settle()


def text_of(pdf: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)


def profile_of(pid: int) -> str:
    """The --user-data-dir of a running Chromium: every one of its processes names it."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    flag = next(arg for arg in args if arg.startswith(b"--user-data-dir="))
    return flag.split(b"=", 1)[1].decode()


def family(pid: int) -> list[psutil.Process]:
    """A running Chromium's browser process and every process under it (the headless
    shell's helpers do not name the profile on their command lines)."""
    browser = psutil.Process(pid)
    return [browser, *browser.children(recursive=True)]


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of `processes` still running (not a zombie, and not a new process that got
    the same pid: psutil compares start times)."""
    running = []
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
    return running


def processes_using(profile: str) -> list[int]:
    """Live (non-zombie: a zombie's cmdline is empty) processes started with `profile`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and profile.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # exited while we looked
            continue
    return found


# --- output and options -------------------------------------------------------------------


@shared_loop
async def test_pdf_contains_the_text_and_one_page(pool: BrowserPool) -> None:
    result = await pool.render(Html("<h1>Hi Ana</h1>"), A4)
    assert result.data.startswith(b"%PDF-")
    assert "Hi Ana" in text_of(result.data)
    assert result.pages == 1


@shared_loop
async def test_chromium_listens_on_no_port_for_its_devtools(pool: BrowserPool) -> None:
    """The DevTools protocol runs over a pipe: no process of the browser listens on a
    socket a page (or anyone on the machine) could reach to drive it."""
    await pool.render(Html("<p>x</p>"), A4)
    processes = browser_and_helpers(pool)
    assert "--remote-debugging-pipe" in next(iter(processes.values()))
    listening = [
        (proc.pid, conn.laddr)
        for proc in processes
        for conn in _connections(proc)
        if conn.status == psutil.CONN_LISTEN
    ]
    assert listening == []


def _connections(proc: psutil.Process) -> list[Any]:
    with contextlib.suppress(psutil.Error):
        return list(proc.net_connections(kind="inet"))
    return []


@shared_loop
async def test_a4_portrait_by_default_and_landscape_when_asked(pool: BrowserPool) -> None:
    portrait = (
        PdfReader(io.BytesIO((await pool.render(Html("<p>x</p>"), A4)).data)).pages[0].mediabox
    )
    landscape_pdf = (await pool.render(Html("<p>x</p>"), PageOptions(landscape=True))).data
    landscape = PdfReader(io.BytesIO(landscape_pdf)).pages[0].mediabox
    assert portrait.width == pytest.approx(595, abs=2)  # A4 is 595 x 842 pt
    assert portrait.height == pytest.approx(842, abs=2)
    assert landscape.width > landscape.height


def positions(pdf: bytes) -> dict[str, tuple[float, float]]:
    """Where each text run of the first page starts, in PDF points from the bottom left:
    the text matrix's origin carried through the current transformation matrix."""
    found: dict[str, tuple[float, float]] = {}

    def visit(text: str, cm: list[float], tm: list[float], *_: object) -> None:
        if text.strip():
            x, y = tm[4], tm[5]
            found[text.strip()] = (cm[0] * x + cm[2] * y + cm[4], cm[1] * x + cm[3] * y + cm[5])

    PdfReader(io.BytesIO(pdf)).pages[0].extract_text(visitor_text=visit)
    return found


@shared_loop
async def test_format_margin_and_scale_are_applied(pool: BrowserPool) -> None:
    """A 1 in left and top margin moves the text 72 pt in; scale 0.5 halves a 400 px
    indent (300 pt at scale 1) to 150 pt."""
    html = (
        "<style>body { margin: 0; font: 40px/40px monospace } p { margin: 0 }</style>"
        "<p>L</p><p style='padding-left: 400px'>R</p>"
    )
    options = PageOptions(format="Letter", margin=Margin(top="1in", left="1in"), scale=0.5)
    result = await pool.render(Html(html), options)
    box = PdfReader(io.BytesIO(result.data)).pages[0].mediabox
    assert box.width == pytest.approx(612, abs=2)  # US Letter is 612 x 792 pt
    assert box.height == pytest.approx(792, abs=2)
    at = positions(result.data)
    assert at["L"][0] == pytest.approx(72, abs=1)
    assert 792 - 72 - 20 < at["L"][1] < 792 - 72  # the first baseline, just under 1 in
    assert at["R"][0] - at["L"][0] == pytest.approx(400 * 0.75 * 0.5, abs=1)


@shared_loop
async def test_long_document_page_count_matches_pypdf(pool: BrowserPool) -> None:
    html = "".join(f"<p>paragraph {i}</p>" for i in range(400))
    result = await pool.render(Html(html), A4)
    assert result.pages > 1
    assert result.pages == len(PdfReader(io.BytesIO(result.data)).pages)
    assert count_pages(result.data) == result.pages


@shared_loop
async def test_concurrent_renders_share_the_tabs(pool: BrowserPool) -> None:
    results = await asyncio.gather(*(pool.render(Html(f"<p>doc {i}</p>"), A4) for i in range(6)))
    assert [f"doc {i}" in text_of(r.data) for i, r in enumerate(results)] == [True] * 6


@shared_loop
async def test_each_render_starts_in_a_fresh_javascript_realm(pool: BrowserPool) -> None:
    """A reused tab must not let one job's globals be read by the next job."""
    for _ in range(2):  # make sure both tabs have run the first document
        await asyncio.gather(
            *(pool.render(Html("<script>window.secret = 'A'</script>"), A4) for _ in range(2))
        )
    probe = "<p id=out></p><script>out.textContent = 'secret is ' + typeof window.secret</script>"
    results = await asyncio.gather(*(pool.render(Html(probe), A4) for _ in range(2)))
    assert all("secret is undefined" in text_of(r.data) for r in results)


@shared_loop
async def test_a_javascript_dialog_does_not_block_the_render(pool: BrowserPool) -> None:
    result = await pool.render(
        Html("<script>alert('hi'); confirm('sure?')</script><p>after</p>"), A4
    )
    assert "after" in text_of(result.data)


# --- what a page may fetch ----------------------------------------------------------------


@shared_loop
async def test_disallowed_schemes_are_aborted_and_http_continues(
    pool: BrowserPool, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request passes the egress filter: ftp, file and (private networks being
    forbidden by default) loopback http are refused, and the render still completes."""
    html = (
        '<img src="ftp://127.0.0.1:1/x.png"><img src="http://127.0.0.1:1/x.png">'
        '<iframe src="file:///etc/passwd"></iframe><p>still rendered</p>'
    )
    with caplog.at_level(logging.INFO, logger="services.renderer.egress"):
        result = await pool.render(Html(html), A4)
    text = text_of(result.data)
    assert "still rendered" in text
    assert "root:" not in text
    assert "refused a page request to ftp://127.0.0.1:1/x.png" in caplog.text
    assert "refused a page request to http://127.0.0.1:1/x.png" in caplog.text
    # The file: iframe never even reaches the filter: Chromium itself will not load it,
    # and only its security log says so. It is still recorded as refused, with the
    # policy's reason (issue 30's audit), like every other refusal.
    reasons = {refusal["url"]: refusal["reason"] for refusal in result.refused}
    assert reasons["file:///etc/passwd"] == "scheme file: is not allowed", result.refused
    assert reasons["ftp://127.0.0.1:1/x.png"] == "scheme ftp: is not allowed"
    assert "loopback" in reasons["http://127.0.0.1:1/x.png"]
    assert all(reasons.values()), result.refused
    assert len(result.refused) == len(reasons) == 3, result.refused  # each once


# --- limits -------------------------------------------------------------------------------


async def test_output_over_the_limit_raises_output_too_large() -> None:
    async with pool_of(pages=1, max_output_bytes=1000) as small:
        with pytest.raises(OutputTooLarge, match=r"PDF is over the limit of 1000 bytes"):
            await small.render(Html("<h1>Hi Ana</h1>"), A4)
        # The stream was closed and the tab kept: the next job renders at once.
        small.max_output_bytes = 50_000_000
        assert "Hi Ana" in text_of((await small.render(Html("<h1>Hi Ana</h1>"), A4)).data)


async def test_a_pdf_streamed_in_many_chunks_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_module, "STREAM_CHUNK", 1024)
    async with pool_of(pages=1) as pool:
        html = "".join(f"<p style='page-break-after: always'>page {i}</p>" for i in range(5))
        result = await pool.render(Html(html), A4)
        assert len(result.data) > 5 * 1024
        assert result.pages == 5 == len(PdfReader(io.BytesIO(result.data)).pages)
        assert "page 4" in text_of(result.data)


async def test_endless_script_times_out_and_the_tab_is_replaced() -> None:
    async with pool_of(pages=1, timeout=1.0) as quick:
        started = time.monotonic()
        with pytest.raises(RenderTimeout, match="render took longer than 1 s"):
            await quick.render(Html(ENDLESS), A4)
        assert time.monotonic() - started < 8
        # One tab only: this render proves the stuck tab was replaced.
        assert "next job" in text_of((await quick.render(Html("<p>next job</p>"), A4)).data)

        # A caller cancelled mid-render (shutdown) must not cost the pool its tab either.
        stuck = asyncio.ensure_future(quick.render(Html(ENDLESS), A4))
        await asyncio.sleep(0)  # one loop turn: the render takes the only tab
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        assert "after cancel" in text_of((await quick.render(Html("<p>after cancel</p>"), A4)).data)
        assert quick.alive


async def test_screenshots_on_every_tab_also_after_a_tab_was_replaced() -> None:
    """A headless tab in the background may never paint, and a screenshot waits for paint:
    PNGs on both tabs at once, before and after one tab was replaced (which puts the other
    one in the background), all come back.

    A screenshot that never comes ends in RenderTimeout: the limit only guards against
    that hang (a loaded machine takes seconds per shot); the tab is replaced by a render
    that times out under a limit lowered for it alone."""
    tall = "<style>body { margin: 0 } div { height: 1500px }</style><div>tall</div>"
    png = PageOptions(output="png", width="400px", scale=2)
    async with pool_of(pages=2, timeout=30.0) as pool:
        for _ in range(2):
            shots = await asyncio.gather(
                *(pool.render(Html(f"{tall}<p>{i}</p>"), png) for i in range(4))
            )
            assert [shot.data[:8] for shot in shots] == [b"\x89PNG\r\n\x1a\n"] * 4
            pool.timeout = 1.0
            with pytest.raises(RenderTimeout):
                await pool.render(Html(ENDLESS), A4)
            pool.timeout = 30.0


async def test_every_render_gets_a_context_of_its_own_that_is_gone_before_the_next() -> None:
    """Success or the job's own failure (a wait in vain, a page range past the end): each
    render runs on a tab made for it in a browser context no render used before, and that
    context is disposed, every target in it, before its replacement is queued."""
    async with pool_of(pages=1, timeout=5.0) as pool:
        never = PageOptions(wait_for=WaitFor(selector="#never", timeout=0.3))
        used: set[str] = set()
        for options in (never, PageOptions(page_ranges="5"), A4):
            assert pool.chromium is not None
            idle = {tab.context_id for tab in pool.chromium.idle_tabs()}
            assert idle and not idle & used, "a context that served a render is never reused"
            with contextlib.suppress(WaitTimeout, RequestError):
                await pool.render(Html("<p>x</p>"), options)
            await pool.settle()
            now = {tab.context_id for tab in pool.chromium.idle_tabs()}
            (taken,) = idle - now
            contexts = await pool.chromium.connection.browser.send("Target.getBrowserContexts")
            assert taken not in contexts["browserContextIds"]
            targets = await pool.chromium.connection.browser.send("Target.getTargets")
            assert not [t for t in targets["targetInfos"] if t.get("browserContextId") == taken]
            used.add(taken)
        assert len(used) == 3


async def test_renders_leave_no_context_door_or_session_behind() -> None:
    """A context, a door and sessions per render: after many renders (with frames and
    script), only the idle tabs' are left, and the browser-wide door."""
    page = "<iframe srcdoc='<p>frame</p>'></iframe><script>console.log('x')</script><p>x</p>"
    async with pool_of(pages=2) as pool:
        await asyncio.gather(*(pool.render(Html(page), A4) for _ in range(12)))
        await asyncio.gather(*(pool.render(Html("<p>static</p>"), A4) for _ in range(8)))
        await pool.settle()
        assert pool.chromium is not None
        idle = pool.chromium.idle_tabs()
        contexts = await pool.chromium.connection.browser.send("Target.getBrowserContexts")
        assert sorted(contexts["browserContextIds"]) == sorted(tab.context_id for tab in idle)
        assert pool.proxy.doors == len(idle) + 1
        sessions = {tab.session.id for tab in idle} | {None}
        assert pool.chromium.connection.listening == sessions


# --- crashes, recycling, exit -------------------------------------------------------------


async def test_killed_chromium_is_relaunched() -> None:
    async with pool_of(pages=2) as pool:
        await pool.render(Html("<p>before</p>"), A4)
        old = pool.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        with contextlib.suppress(BrowserError):  # it may meet the dead browser or a new one
            await pool.render(Html("<p>during</p>"), A4)
        result = await pool.render(Html("<p>after</p>"), A4)
        assert "after" in text_of(result.data)
        assert pool.alive
        assert pool.pid != old


async def test_renders_in_flight_on_a_killed_chromium_fail_at_once_with_browser_error() -> None:
    """Not a RenderTimeout after 30 s: the wait ends when the DevTools connection drops."""
    async with pool_of(pages=2, timeout=30.0) as pool:
        slow = (
            "<p>slow</p><script>const end = Date.now() + 3000; while (Date.now() < end) {}</script>"
        )
        renders = [asyncio.ensure_future(pool.render(Html(slow), A4)) for _ in range(3)]
        await asyncio.sleep(0)  # one loop turn: two renders take the tabs, one waits
        pid = pool.pid
        assert pid is not None
        started = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        outcomes = await asyncio.gather(*renders, return_exceptions=True)
        assert time.monotonic() - started < 10
        assert all(isinstance(o, BrowserError) for o in outcomes[:2]), outcomes
        assert isinstance(outcomes[2], BrowserError) or outcomes[2].pages == 1, outcomes
        assert "recovered" in text_of((await pool.render(Html("<p>recovered</p>"), A4)).data)


async def test_browser_is_recycled_after_n_renders() -> None:
    async with pool_of(pages=1, recycle_after=2) as pool:
        first = pool.pid
        assert first is not None
        profile = profile_of(first)
        old = family(first)
        for i in range(3):
            await pool.render(Html(f"<p>{i}</p>"), A4)
        assert pool.pid != first

        def old_browser_gone() -> bool:
            return not still_running(old) and not Path(profile).exists()

        await eventually(old_browser_gone, 10, "old_browser_gone")


async def test_exit_leaves_no_chromium_process_or_profile_behind() -> None:
    async with pool_of(pages=2) as pool:
        await pool.render(Html("<p>x</p>"), A4)
        pid = pool.pid
        assert pid is not None
        profile = profile_of(pid)
        processes = family(pid)
        assert len(processes) > 1  # browser, zygotes, renderers, GPU…
    assert not pool.alive
    assert pool.pid is None

    def all_gone() -> bool:
        return not still_running(processes) and not processes_using(profile)

    await eventually(all_gone, 10, "all_gone")
    assert not Path(profile).exists()


async def test_startup_cancelled_midway_leaves_no_chromium_behind() -> None:
    """Cancelling `__aenter__` (SIGTERM during start-up) must not orphan a Chromium."""
    tmp = Path(tempfile.gettempdir())

    def profiles() -> set[Path]:
        return set(tmp.glob("pressroom-chromium-*"))

    before = profiles()
    pool = pool_of(pages=1)
    starting = asyncio.ensure_future(pool.__aenter__())

    def profile_created() -> bool:
        return bool(profiles() - before)

    await eventually(profile_created, 10, "profile_created")  # Chromium is starting
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    (profile,) = profiles() - before

    def browser_closed() -> bool:
        # The profile is removed last, after the browser process has been reaped.
        return not profile.exists() and not processes_using(str(profile))

    await eventually(browser_closed, 10, "browser_closed")


async def test_pdf_outside_the_context_manager_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await pool_of().render(Html("<p>x</p>"), A4)


@shared_loop
async def test_a_page_that_eats_memory_fails_fast_without_harming_others(
    pool: BrowserPool,
) -> None:
    """The JS heap cap makes the page's renderer die quickly; the render fails as a
    (transient) PageCrashed at once, not after the timeout; the job beside it and the
    next jobs on the pool render fine."""
    eater = "<script>let a = []; while (true) a.push(new Array(1e6).fill(1.5));</script>"
    started = time.monotonic()
    eaten, fine = await asyncio.gather(
        pool.render(Html(eater), A4), pool.render(Html("<p>beside</p>"), A4), return_exceptions=True
    )
    assert isinstance(eaten, PageCrashed) and "crashed its tab" in str(eaten)
    assert time.monotonic() - started < 10
    assert "beside" in text_of(fine.data)
    after = await asyncio.gather(*(pool.render(Html(f"<p>after {i}</p>"), A4) for i in range(3)))
    assert all(f"after {i}" in text_of(r.data) for i, r in enumerate(after))


async def test_chromium_gets_none_of_the_renderers_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chromium's processes see the locale and PATH, HOME in their profile, and no
    `PRESSROOM_*` variable (signing keys, S3 secrets, the database URL)."""
    monkeypatch.setenv("PRESSROOM_URL_SECRET", "do-not-leak-this")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak-this-either")
    before = set(chromium_processes())  # the module's shared pool, if it runs
    async with pool_of() as fresh:
        await fresh.render(Html("<p>env</p>"), A4)
        chromiums = {pid: args for pid, args in chromium_processes().items() if pid not in before}
        browser = [pid for pid, args in chromiums.items() if not any("--type=" in a for a in args)]
        assert len(browser) == 1 and len(chromiums) > 1, chromiums
        env = psutil.Process(browser[0]).environ()
        assert env["HOME"] == profile_of(browser[0]) and "PATH" in env
        # Zygote children write their title over the environment block: read it raw.
        for pid in chromiums:
            with contextlib.suppress(OSError):  # a helper process that just ended
                raw = Path(f"/proc/{pid}/environ").read_bytes()
                assert b"PRESSROOM_" not in raw and b"AWS_" not in raw
                assert b"do-not-leak" not in raw


def chromium_processes() -> dict[int, list[str]]:
    """The live Chromium processes this test process started: pid -> command line."""
    found = {}
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            args = proc.cmdline()
            if proc.status() != psutil.STATUS_ZOMBIE and args and "chrom" in Path(args[0]).name:
                found[proc.pid] = args
    return found


@shared_loop
async def test_popups_are_blocked_and_sites_isolated(pool: BrowserPool) -> None:
    """A page's `window.open` gets no window (Chromium's popup blocker is on: pyppeteer
    turns it off by default), and Chromium runs with site isolation."""
    page = (
        "<p id=r>not run</p><script>"
        "r.textContent = 'popup ' + (window.open('http://127.0.0.1:9/x') === null "
        "? 'blocked' : 'opened');</script>"
    )
    assert "popup blocked" in text_of((await pool.render(Html(page), A4)).data)
    browser = [
        args for args in chromium_processes().values() if not any("--type=" in a for a in args)
    ]
    assert browser, "no Chromium found"
    flags = browser[0]
    assert "--disable-popup-blocking" not in flags
    assert "--disable-features=site-per-process" not in flags


# --- who Chromium runs as, and its sandbox ------------------------------------------------

CHROMIUM_UID = Settings.chromium_uid
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="Chromium changes user only when the renderer is root"
)


def browser_and_helpers(pool: BrowserPool) -> dict[psutil.Process, list[str]]:
    """The pool's Chromium browser process, then every live process it started, each with
    its command line."""
    assert pool.pid is not None
    browser = psutil.Process(pool.pid)
    found = {}
    for proc in [browser, *browser.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a helper that ended (or is a zombie)
            found[proc] = proc.cmdline()
    return found


def status_of(proc: psutil.Process) -> dict[str, str]:
    lines = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
    return {name: value.strip() for name, _, value in (line.partition(":") for line in lines)}


@as_root
@shared_loop
async def test_as_root_every_chromium_process_runs_as_an_unprivileged_user(
    pool: BrowserPool,
) -> None:
    """With the renderer as root, the pool renders and every Chromium process runs as
    `PRESSROOM_CHROMIUM_UID` (real, effective and saved user and group, no supplementary
    groups): none is root, so a page that takes one over cannot read a root-only file.
    Chromium's user owns its profile, not the launcher root ran."""
    assert "unprivileged" in text_of((await pool.render(Html("<p>unprivileged</p>"), A4)).data)
    processes = list(browser_and_helpers(pool))
    assert len(processes) > 1
    for proc in processes:
        with contextlib.suppress(OSError):  # a helper that just ended
            status = status_of(proc)
            assert status["Uid"].split() == [str(CHROMIUM_UID)] * 4, (proc, status["Uid"])
            assert status["Gid"].split() == [str(CHROMIUM_UID)] * 4, (proc, status["Gid"])
            assert status["Groups"] == "", (proc, status["Groups"])
    profile = Path(profile_of(processes[0].pid))
    assert profile.stat().st_uid == CHROMIUM_UID
    assert (profile.parent / "chromium.log").stat().st_uid == 0
    assert profile.parent.stat().st_uid == 0


@shared_loop
async def test_chromium_runs_at_a_lower_cpu_priority_than_the_services(pool: BrowserPool) -> None:
    """Chromium and every process it starts run at niceness `PRESSROOM_CHROMIUM_NICE`,
    and so does the scheduler's group for its session: a busy browser leaves a core to
    the gateway and the pipeline first, while this process keeps its own priority."""
    assert "niced" in text_of((await pool.render(Html("<p>niced</p>"), A4)).data)
    processes = list(browser_and_helpers(pool))
    assert len(processes) > 1
    for proc in processes:
        with contextlib.suppress(psutil.Error):  # a helper that just ended
            assert proc.nice() == Settings.chromium_nice, proc
    autogroup = Path(f"/proc/{pool.pid}/autogroup")
    if autogroup.exists():  # a kernel with autogroups
        assert autogroup.read_text().split()[-1] == str(Settings.chromium_nice)
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0


@shared_loop
async def test_chromium_sandboxes_its_renderers_where_user_namespaces_work(
    pool: BrowserPool,
) -> None:
    """Where Chromium's user may create user namespaces (as the renderer finds at start),
    Chromium runs without `--no-sandbox`, and each of its renderer processes (which run
    pages) is under seccomp-bpf in a user namespace other than the browser's."""
    if not confine(CHROMIUM_UID).sandboxed:
        pytest.skip(f"no sandbox here: {confine(CHROMIUM_UID).why_unsandboxed}")
    await pool.render(Html("<p>sandboxed</p>"), A4)
    (browser, flags), *helpers = browser_and_helpers(pool).items()
    assert "--no-sandbox" not in flags
    renderers = [proc for proc, args in helpers if "--type=renderer" in args]
    assert renderers, [args[:2] for _, args in helpers]
    browser_userns = os.readlink(f"/proc/{browser.pid}/ns/user")
    for proc in renderers:
        assert status_of(proc)["Seccomp"] == "2", proc  # 2: a seccomp-bpf filter
        assert os.readlink(f"/proc/{proc.pid}/ns/user") != browser_userns, proc


async def test_without_user_namespaces_chromium_runs_unsandboxed_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where user namespaces are refused, Chromium still starts and renders, with
    `--no-sandbox`, as the same unprivileged user, and one warning says why."""
    monkeypatch.setattr(privileges, "namespaces_refusal", lambda uid: "refused by the test")
    privileges.confine.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=privileges.__name__):
            async with pool_of(pages=1, recycle_after=1) as fresh:
                for word in ("unsandboxed", "relaunched"):  # the second is on a new browser
                    assert word in text_of((await fresh.render(Html(f"<p>{word}</p>"), A4)).data)
                browser = psutil.Process(fresh.pid)
                assert "--no-sandbox" in browser.cmdline()
                assert browser.uids().effective == (
                    CHROMIUM_UID if os.geteuid() == 0 else os.geteuid()
                )
    finally:
        privileges.confine.cache_clear()
    warnings = [
        r.getMessage() for r in caplog.records if "without its own sandbox" in r.getMessage()
    ]
    assert len(warnings) == 1 and "refused by the test" in warnings[0], warnings


KEEP_A_POOL = """import asyncio, sys
from services.renderer.browser import BrowserPool

async def main():
    async with BrowserPool(sys.argv[1], pages=1, timeout=15, max_output_bytes=10**8) as pool:
        print(pool.pid, flush=True)
        await asyncio.sleep(120)

asyncio.run(main())
"""


async def test_chromium_dies_with_a_sigkilled_renderer() -> None:
    """A renderer killed with SIGKILL (no cleanup runs) takes its Chromium with it: the
    parent-death signal survives Chromium's change of user."""
    renderer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KEEP_A_POOL, CHROMIUM,
        cwd=Path(__file__).parents[2], stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert renderer.stdout is not None
        browser = int(await asyncio.wait_for(renderer.stdout.readline(), 30))
        profile = profile_of(browser)
        renderer.kill()
        await renderer.wait()

        def all_gone() -> bool:
            return not processes_using(profile)

        await eventually(all_gone, 10, "all_gone")
    finally:
        if renderer.returncode is None:
            renderer.kill()
            await renderer.wait()
    shutil.rmtree(Path(profile).parent)  # left behind, as after any SIGKILL
