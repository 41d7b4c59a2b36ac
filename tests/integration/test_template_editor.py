"""The console's template editor as a person uses it, in real Chromium (`tests/browser.py`)
against the real stack: CodeMirror 6 editors, preview jobs, pdf.js drawing the PDF.

Verifies (issue 32):
- typing in the body's editor renders a new preview by itself (no button): a new preview
  job, drawn as one canvas per page of its PDF, whose text holds what was typed;
- a Jinja syntax error is marked at its line in the editor (and named in the message), an
  undefined variable at the line that uses it, one in the footer in the footer's editor,
  and an error thrown by the page's own script (the PDF still renders) at its line;
- "Save as new version" stores the editor's texts as the next version, and a job naming
  the template by its name renders that version; the versions are listed, one compared
  with the editor shows the lines that differ, and restoring one makes it the newest;
- the version's bundled files are listed in the Assets tab, go with every preview (an
  `<img src="logo.png">` is drawn) and are kept by a saved version unless dropped;
- "New template" in the templates list asks for a name, creates the template and opens it
  in the editor, whose preview renders; a name taken (409) or blank (400) is shown beside
  the name, and the template of the taken name gets no new version.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

from tests.browser import Page, open_page
from tests.conftest import Stack
from tests.integration.test_job_files import images, png

BODY = "<h1>Invoice {{ number }}</h1>\n<p>Thank you.</p>\n"
PAGE_BREAK = '<p>Typed in the editor</p><div style="break-after: page"></div><p>Second page</p>\n'


async def stored(stack: Stack, body: str = BODY, **more: Any) -> dict[str, Any]:
    template = {"name": "invoice", "body": body, **more}
    async with stack.client.post(f"{stack.url}/templates", json=template) as response:
        assert response.status == 201, await response.text()
        created: dict[str, Any] = await response.json()
        return created


async def pdf_text(stack: Stack, job_id: str, folder: Path) -> str:
    job = await stack.finished(job_id)
    assert job["status"] == "done", job
    async with stack.client.get(job["url"]) as response:
        path = folder / f"{job_id}.pdf"
        path.write_bytes(await response.read())
    done = await asyncio.to_thread(
        subprocess.run, ["pdftotext", str(path), "-"], capture_output=True, text=True, check=True
    )
    return done.stdout


def editor(part: str) -> str:
    """JavaScript for the root of `part`'s editor (a shadow root: `editor.js`)."""
    return f"document.getElementById('editor-{part}').shadowRoot"


async def signed_in(page: Page, stack: Stack) -> None:
    """The console open and signed in with the tenant's key, policy violations recorded
    in `window.violations`."""
    await page.goto(f"{stack.url}/console")
    await page.js(
        "window.violations = []; document.addEventListener('securitypolicyviolation',"
        " (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`))"
    )
    await page.until("document.getElementById('api-key')", "the sign-in form")
    await page.type("#api-key", stack.tenant.key)
    await page.press_enter()
    await page.until("location.hash.startsWith('#/jobs')", "the jobs view after sign-in")


async def in_editor(page: Page, stack: Stack, template_id: str) -> None:
    await signed_in(page, stack)
    await page.js(f"location.hash = '#/templates/{template_id}/edit'")
    await page.until(
        "document.getElementById('editor-body')?.shadowRoot?.querySelector('.cm-content')",
        "the editor",
        60,
    )


async def previews(page: Page) -> int:
    return int(await page.js("document.getElementById('preview-pages').dataset.previews || 0"))


async def type_in(page: Page, part: str, text: str) -> None:
    """Open `part`'s tab, put the cursor in its editor (at its start) and type `text`."""
    await page.click(f"#tab-{part}")
    await page.js(f"{editor(part)}.querySelector('.cm-content').focus()")
    await page.session.send("Input.insertText", {"text": text})


async def select_all_and_type(page: Page, part: str, text: str) -> None:
    """Open `part`'s tab, focus its editor, select everything with Ctrl+A, type `text`."""
    await page.click(f"#tab-{part}")
    await page.js(f"{editor(part)}.querySelector('.cm-content').focus()")
    key = {
        "key": "a",
        "code": "KeyA",
        "windowsVirtualKeyCode": 65,
        "modifiers": 2,
        "commands": ["selectAll"],
    }
    await page.session.send("Input.dispatchKeyEvent", {"type": "rawKeyDown", **key})
    await page.session.send("Input.dispatchKeyEvent", {"type": "keyUp", **key})
    await page.session.send("Input.insertText", {"text": text})


async def marked_line(page: Page, part: str) -> int | None:
    """The 1-based line of `part`'s editor holding an error mark, None if none has one."""
    return await page.js(
        f"(() => {{ const lines = [...{editor(part)}.querySelectorAll('.cm-line')];"
        " const i = lines.findIndex((l) => l.querySelector('.cm-lintRange-error'));"
        " return i < 0 ? null : i + 1; })()"
    )


async def test_typing_renders_a_new_pdf_preview_drawn_page_by_page(
    stack: Stack, chromium: str, tmp_path: Path
):
    template = await stored(stack)
    async with open_page(chromium) as page:
        await in_editor(page, stack, template["id"])
        await select_all_and_type(page, "data", '{"number": 7}')
        await page.until("document.getElementById('preview-pages').dataset.job &&"
                         " document.querySelectorAll('#preview-pages canvas.pdf-page').length"
                         " === 1", "the first preview drawn", 90)  # fmt: skip
        first = await page.js("document.getElementById('preview-pages').dataset.job")
        assert "Invoice 7" in await pdf_text(stack, first, tmp_path)
        shown = await previews(page)

        await type_in(page, "body", PAGE_BREAK)  # at the start of the body
        await page.until(f"Number(document.getElementById('preview-pages').dataset.previews)"
                         f" > {shown}", "a new preview after typing", 90)  # fmt: skip
        second = await page.js("document.getElementById('preview-pages').dataset.job")
        assert second != first
        assert (
            await page.js("document.querySelectorAll('#preview-pages canvas.pdf-page').length") == 2
        )
        text = await pdf_text(stack, second, tmp_path)
        assert "Typed in the editor" in text and "Second page" in text and "Invoice 7" in text
        drawn = await page.js(
            "[...document.querySelectorAll('#preview-pages canvas')].map((c) =>"
            " c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some((v, i) =>"
            " i % 4 !== 3 && v < 128))"
        )  # fmt: skip
        assert drawn == [True, True], "a page canvas holds no dark pixel: nothing was drawn"
        async with stack.client.get(f"{stack.url}/jobs") as response:
            listed = [j["id"] for j in (await response.json())["jobs"]]
        assert first not in listed and second not in listed  # previews are not listed
        beside = await page.js(
            f"{editor('body')}.querySelector('.cm-content').getBoundingClientRect().left >="
            f" {editor('body')}.querySelector('.cm-gutters').getBoundingClientRect().right"
        )
        assert beside, "the editor is unstyled: its text is not beside the line numbers"
        assert await page.js("window.violations") == []  # nothing the policy refused


async def test_errors_are_marked_at_their_line_in_the_editor_they_came_from(
    stack: Stack, chromium: str
):
    template = await stored(stack, footer="<p>Page footer</p>")
    async with open_page(chromium) as page:
        await in_editor(page, stack, template["id"])
        await select_all_and_type(page, "data", '{"number": 7}')
        await page.until("document.querySelector('#preview-pages canvas')", "a preview", 90)

        await page.click("#tab-body")
        await select_all_and_type(page, "body", "<p>ok</p>\n<p>{{ number }</p>")
        await page.until("document.getElementById('editor-error').dataset.line === '2'",
                         "the syntax error's line", 90)  # fmt: skip
        assert "syntax error at line 2" in await page.js(
            "document.getElementById('editor-error').textContent"
        )
        assert await marked_line(page, "body") == 2

        await select_all_and_type(page, "body", "<p>a</p>\n<p>b</p>\n{{ nope }}")
        await page.until("document.getElementById('editor-error').dataset.line === '3'",
                         "the undefined variable's line", 90)  # fmt: skip
        assert "'nope' is undefined" in await page.js(
            "document.getElementById('editor-error').textContent"
        )
        assert await marked_line(page, "body") == 3

        await select_all_and_type(page, "body", "<p>fine</p>")
        await page.click("#tab-footer")
        await select_all_and_type(page, "footer", "<p>x</p>\n{{ total }}")
        await page.until("document.getElementById('editor-error').dataset.part === 'footer'",
                         "the footer's error", 90)  # fmt: skip
        assert await page.js("document.getElementById('editor-error').dataset.line") == "2"
        assert await marked_line(page, "footer") == 2
        assert await marked_line(page, "body") is None

        await select_all_and_type(page, "footer", "<p>x</p>")
        script = "<p>a</p>\n<p>b</p>\n<script>\n  let x = 1;\n  null.boom();\n</script>"
        await select_all_and_type(page, "body", script)
        await page.until("document.querySelector('#page-errors li')", "the page's error", 90)
        assert await page.js("document.querySelector('#page-errors li').dataset.line") == "5"
        assert "boom" in await page.js("document.getElementById('page-errors').textContent")
        assert await marked_line(page, "body") == 5
        assert await marked_line(page, "footer") is None


async def test_saving_makes_a_new_version_that_a_job_by_name_renders(
    stack: Stack, chromium: str, tmp_path: Path
):
    template = await stored(stack)
    async with open_page(chromium) as page:
        await in_editor(page, stack, template["id"])
        await type_in(page, "body", "<p>Saved from the editor</p>\n")
        await page.click("#save-version")
        await page.until("location.hash.endsWith('/edit?version=2')", "the saved version", 60)
        await page.until("document.querySelector('#editor-versions [aria-current]')"
                         "?.textContent.startsWith('Version 2')", "version 2 listed")  # fmt: skip
        async with stack.client.get(f"{stack.url}/templates/{template['id']}") as response:
            latest = await response.json()
        assert latest["version"] == 2 and latest["body"].startswith("<p>Saved from the editor")
        job = await stack.submit({"template_name": "invoice", "data": {"number": 9}})
        text = await pdf_text(stack, job["id"], tmp_path)
        assert "Saved from the editor" in text and "Invoice 9" in text

        await page.click("#editor-versions li[data-version='1'] button")  # Compare
        await page.until("document.getElementById('compare-title')", "the comparison")
        added = await page.js(
            "[...document.querySelectorAll('#version-compare .diff-added')]"
            ".map((e) => e.textContent)"
        )
        assert added == ["+ <p>Saved from the editor</p>\n"]

        await page.click("#editor-versions li[data-version='1'] button + button")  # Restore
        await page.until("location.hash.endsWith('/edit?version=3')", "the restored version", 60)
        async with stack.client.get(f"{stack.url}/templates/{template['id']}") as response:
            restored = await response.json()
        assert restored["version"] == 3 and restored["body"] == BODY


async def test_the_versions_files_go_with_previews_and_saved_versions(
    stack: Stack, chromium: str, tmp_path: Path
):
    """A version bundling files (sent with it): the Assets tab lists them; the preview of
    `<img src="logo.png">` draws the bundled image (in the preview job's PDF and on the
    canvas); a saved version keeps the files not dropped, by reference."""
    data = aiohttp.FormData()
    body = '<img src="logo.png" style="width: 300px">\n<p>Invoice {{ number }}</p>\n'
    data.add_field("template", json.dumps({"name": "invoice", "body": body}))
    data.add_field("file", png(60, 30, (220, 20, 20)), filename="logo.png")
    data.add_field("file", b"p { color: #333 }", filename="style.css")
    async with stack.client.post(f"{stack.url}/templates", data=data) as response:
        assert response.status == 201, await response.text()
        template = await response.json()
    async with open_page(chromium) as page:
        await in_editor(page, stack, template["id"])
        await page.click("#tab-assets")
        listed = await page.js("[...document.querySelectorAll('#editor-files li')]"
                               ".map((li) => li.dataset.name)")  # fmt: skip
        assert listed == ["logo.png", "style.css"]
        await select_all_and_type(page, "data", '{"number": 7}')
        await page.until("document.getElementById('preview-pages').dataset.job &&"
                         " document.querySelector('#preview-pages canvas.pdf-page')",
                         "a preview drawn", 90)  # fmt: skip
        job = await page.js("document.getElementById('preview-pages').dataset.job")
        finished = await stack.finished(job)
        assert finished["status"] == "done", finished
        async with stack.client.get(finished["url"]) as response:
            assert images(await response.read(), tmp_path) == [(60, 30)]
        red = await page.js(
            "(() => { const c = document.querySelector('#preview-pages canvas');"
            " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            " for (let i = 0; i < d.length; i += 4)"
            "   if (d[i] > 180 && d[i + 1] < 80 && d[i + 2] < 80) return true;"
            " return false; })()"
        )
        assert red, "the preview's canvas shows no red pixel: the logo was not drawn"

        await page.click("#tab-assets")
        await page.click("#editor-files li[data-name='style.css'] button")  # Drop
        await type_in(page, "body", "<p>Saved with its logo</p>\n")
        await page.click("#save-version")
        await page.until("location.hash.endsWith('/edit?version=2')", "the saved version", 60)
    async with stack.client.get(f"{stack.url}/templates/{template['id']}") as response:
        saved = await response.json()
    assert saved["version"] == 2 and saved["body"].startswith("<p>Saved with its logo")
    assert [f["name"] for f in saved["files"]] == ["logo.png"]
    job = await stack.submit({"template_id": template["id"], "data": {"number": 9}})
    finished = await stack.finished(job["id"])
    assert finished["status"] == "done", finished
    async with stack.client.get(finished["url"]) as response:
        assert images(await response.read(), tmp_path) == [(60, 30)]


async def template_names(stack: Stack) -> dict[str, int]:
    async with stack.client.get(f"{stack.url}/templates") as response:
        page = await response.json()
    return {t["name"]: t["latest_version"] for t in page["templates"]}


async def create_in_console(page: Page, name: str) -> None:
    """Type `name` as the new template's (replacing what the field holds) and submit."""
    await page.js("document.getElementById('new-template-name').value = ''")
    await page.type("#new-template-name", name)
    await page.click("#create-template")


async def test_new_template_asks_a_name_creates_it_and_opens_the_editor(
    stack: Stack, chromium: str, tmp_path: Path
):
    await stored(stack)  # "invoice"
    async with open_page(chromium) as page:
        await signed_in(page, stack)
        await page.js("location.hash = '#/templates'")
        await page.until("document.querySelector('#templates table')", "the templates list")
        assert await page.js("document.getElementById('new-template-form').hidden")
        await page.click("#new-template")
        await page.until("document.activeElement?.id === 'new-template-name'", "the name asked")

        await create_in_console(page, "invoice")
        error = "document.getElementById('new-template-error').textContent"
        await page.until(f"{error}.includes('already')", "the name taken shown")
        assert '"invoice"' in await page.js(error)
        name = "document.getElementById('new-template-name')"
        assert await page.js(f"{name}.getAttribute('aria-invalid')") == "true"
        assert await template_names(stack) == {"invoice": 1}  # no version 2 of it

        await create_in_console(page, "   ")
        await page.until(f"{error}.includes('name must not be empty')", "the blank name shown")
        assert await page.js("location.hash") == "#/templates"

        await create_in_console(page, "receipt")
        await page.until("/^#\\/templates\\/[0-9a-f]+\\/edit$/.test(location.hash)",
                         "the new template's editor", 60)  # fmt: skip
        await page.until(
            "document.getElementById('editor-body')?.shadowRoot?.querySelector('.cm-content')",
            "the editor",
            60,
        )
        assert await template_names(stack) == {"invoice": 1, "receipt": 1}
        body = await page.js(f"{editor('body')}.querySelector('.cm-content').textContent")
        assert "Start writing the template here." in body
        await select_all_and_type(page, "data", '{"title": "Receipt 12"}')
        await page.until("document.getElementById('preview-pages').dataset.job &&"
                         " document.querySelector('#preview-pages canvas.pdf-page')",
                         "the new template's preview", 90)  # fmt: skip
        job = await page.js("document.getElementById('preview-pages').dataset.job")
        assert "Receipt 12" in await pdf_text(stack, job, tmp_path)
        assert await page.js("window.violations") == []
