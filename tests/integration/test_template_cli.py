"""`pressroom templates list|show|push|pull|preview|diff` against the real stack.

Verifies: pushing a folder stores its body, header, footer and `assets/` files as the
next version (a second push, version 2); list and show print them (a table, or JSON with
`--json`), messages go to stderr; pull writes the version back into a folder; preview
renders a folder with its sample.json, and a stored template by name, into a PDF that
holds the sample's text, storing nothing and listing no job (a preview); diff prints a
unified diff of two versions; an unknown name exits 3 (the API refuses), an unreachable
gateway 4, a folder without body.html or a name that is not a safe file name 2 (usage),
each with nothing on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

from pressroom import cli
from tests.conftest import Stack
from tests.integration.test_cli import flags, pressroom
from tests.integration.test_pipeline import pdf_text

BODY = '<link rel="stylesheet" href="style.css"><h1>Invoice {{ number }} for {{ who }}</h1>\n'


def write_folder(folder: Path, body: str = BODY) -> Path:
    (folder / "assets").mkdir(parents=True, exist_ok=True)
    (folder / "body.html").write_text(body)
    (folder / "footer.html").write_text('<div style="font-size:8px">Acme</div>')
    (folder / "sample.json").write_text(json.dumps({"number": 42, "who": "Ana"}))
    (folder / "assets" / "style.css").write_text("h1 { color: #123456 }")
    return folder


async def test_push_list_show_pull_and_diff_a_template_folder(stack: Stack, tmp_path: Path):
    folder = write_folder(tmp_path / "invoice")
    status, out, err = await pressroom(tmp_path, "templates", "push", "invoice", *flags(stack))
    assert status == 0, err
    assert "version 1" in out and "stored invoice version 1" in err
    (folder / "body.html").write_text(BODY + "<p>Thank you, {{ who }}.</p>\n")
    status, out, err = await pressroom(
        tmp_path, "templates", "push", "invoice", "--json", *flags(stack)
    )
    pushed = json.loads(out)
    assert status == 0 and (pushed["name"], pushed["version"]) == ("invoice", 2), err

    status, out, _ = await pressroom(tmp_path, "templates", "list", *flags(stack))
    assert status == 0 and out.splitlines()[0].split() == ["NAME", "VERSION", "ID", "UPDATED"]
    assert out.splitlines()[1].split()[:3] == ["invoice", "2", pushed["id"]]

    status, out, _ = await pressroom(
        tmp_path, "templates", "show", "invoice", "--version", "1", "--json", *flags(stack)
    )
    shown = json.loads(out)
    assert status == 0 and shown["version"] == 1 and shown["body"] == BODY
    assert shown["footer"] == '<div style="font-size:8px">Acme</div>'
    assert [f["name"] for f in shown["files"]] == ["style.css"]

    status, out, err = await pressroom(
        tmp_path, "templates", "pull", "invoice", "copy", "--version", "1", *flags(stack)
    )
    assert status == 0, err
    assert (tmp_path / "copy" / "body.html").read_text() == BODY
    assert not (tmp_path / "copy" / "header.html").exists()
    manifest = json.loads((tmp_path / "copy" / "template.json").read_text())
    assert (manifest["id"], manifest["version"]) == (pushed["id"], 1)
    assert (tmp_path / "copy" / "assets" / "style.css").read_text() == "h1 { color: #123456 }"
    assert [f["name"] for f in manifest["files"]] == ["style.css"]
    assert "url" not in manifest["files"][0]  # a link that expires is not kept

    status, out, err = await pressroom(tmp_path, "templates", "diff", "invoice", "1", *flags(stack))
    assert status == 0, err
    assert "--- invoice/body.html@1" in out and "+++ invoice/body.html@2" in out
    assert "+<p>Thank you, {{ who }}.</p>" in out and "footer" not in out

    status, out, err = await pressroom(
        tmp_path, "templates", "rename", "invoice", "invoice-2027", "--json", *flags(stack)
    )
    renamed = json.loads(out)
    assert status == 0 and (renamed["id"], renamed["name"]) == (pushed["id"], "invoice-2027")
    assert "renamed invoice to invoice-2027" in err
    status, out, err = await pressroom(tmp_path, "templates", "show", "invoice", *flags(stack))
    assert (status, out) == (cli.API_ERROR, "")


async def test_preview_renders_a_folder_or_a_stored_name_with_sample_data(
    stack: Stack, tmp_path: Path
):
    write_folder(tmp_path / "letter", "<p>Dear {{ who }}, number {{ number }}</p>")
    status, out, err = await pressroom(
        tmp_path, "templates", "preview", "letter", "--json", *flags(stack)
    )
    assert status == 0, err
    job = json.loads(out)
    assert job["file"] == str(tmp_path / "letter-preview.pdf")
    assert "Dear Ana, number 42" in await pdf_text(stack, job["url"])
    status, out, _ = await pressroom(tmp_path, "templates", "list", "--json", *flags(stack))
    assert json.loads(out) == []  # a folder's preview stores nothing
    status, out, _ = await pressroom(tmp_path, "jobs", "ls", "--json", *flags(stack))
    assert json.loads(out) == []  # and is a preview, not a job

    assert (await pressroom(tmp_path, "templates", "push", "letter", *flags(stack)))[0] == 0
    (tmp_path / "other.json").write_text(json.dumps({"who": "Bo", "number": 7}))
    status, out, err = await pressroom(
        tmp_path, "templates", "preview", "letter-stored", *flags(stack)
    )
    assert status == cli.API_ERROR and out == "" and "letter-stored" in err
    status, out, err = await pressroom(
        tmp_path, "templates", "preview", "letter", "--data", "other.json", "-o", "named.pdf",
        "--json", *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    assert "Dear Bo, number 7" in await pdf_text(stack, json.loads(out)["url"])
    assert (tmp_path / "named.pdf").read_bytes()[:5] == b"%PDF-"


async def test_template_commands_exit_statuses(stack: Stack, tmp_path: Path):
    status, out, err = await pressroom(tmp_path, "templates", "show", "nope", *flags(stack))
    assert (status, out) == (cli.API_ERROR, "") and "no template named 'nope'" in err
    (tmp_path / "empty").mkdir()
    status, out, err = await pressroom(tmp_path, "templates", "push", "empty", *flags(stack))
    assert (status, out) == (cli.USAGE, "") and "no body.html" in err
    write_folder(tmp_path / "t")
    assert (await pressroom(tmp_path, "templates", "push", "t", "--name", "../up", *flags(stack)))[
        0
    ] == 0
    status, out, err = await pressroom(tmp_path, "templates", "pull", "../up", *flags(stack))
    assert (status, out) == (cli.USAGE, "") and "cannot be a file name" in err
    assert not (tmp_path.parent / "up").exists()
    gone = ["--url", "http://127.0.0.1:9", "--key", "k"]
    assert (await pressroom(tmp_path, "templates", "list", *gone))[0] == cli.UNAVAILABLE
