"""`pressroom templates list|show|push|pull|preview|diff`: stored templates from the
command line, through `Client`.

    pressroom templates list
    pressroom templates show invoice [--version N]
    pressroom templates push ./invoice [--name invoice]   # body.html, header.html,
                                                          # footer.html, assets/…
    pressroom templates pull invoice [DIR] [--version N]  # texts, assets/…, template.json
    pressroom templates preview ./invoice | invoice [--data FILE] [-o FILE] [--open]
    pressroom templates diff invoice 1 [2]                # unified diff, default the latest
    pressroom templates rename invoice invoice-2027       # id and versions kept

A template folder holds `body.html` (required), `header.html` and `footer.html` (optional),
`sample.json` (the data `preview` renders with; never stored) and `assets/`, whose files
the version bundles, named by their path under `assets/`. Data on stdout (JSON with
`--json`), messages on stderr; the exit statuses are `cli.py`'s.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pressroom.clibase import ENDED_BADLY, Command, Io, Outcome, UsageError, table
from pressroom.client import Client, Template
from pressroom.client.models import to_dict

Add = Callable[[Any, str, Command, str], argparse.ArgumentParser]

PARTS = ("body", "header", "footer")
"""The texts of a version, each `<part>.html` in a template folder."""
SAMPLE = "sample.json"
ASSETS = "assets"


def _safe_name(name: str, what: str) -> str:
    """`name` as a file name in the current folder: no path, no hidden or parent entry."""
    if not name or Path(name).name != name or name.startswith(".") or "\\" in name:
        raise UsageError(f"{what} {name!r} cannot be a file name here; give the path to use")
    return name


def _folder(path: str) -> Path:
    folder = Path(path)
    if not (folder / "body.html").is_file():
        raise UsageError(f"{path} is not a template folder: it has no body.html")
    return folder


def _read(path: Path) -> str | None:
    try:
        return path.read_text() if path.is_file() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def folder_texts(folder: Path) -> dict[str, str | None]:
    """body, header and footer of a template folder (None where a file is missing)."""
    return {part: _read(folder / f"{part}.html") for part in PARTS}


def folder_assets(folder: Path) -> dict[str, bytes]:
    """The files under `assets/`, named by their path there (`fonts/brand.woff2`)."""
    root = folder / ASSETS
    if not root.is_dir():
        return {}
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                found[path.relative_to(root).as_posix()] = path.read_bytes()
            except OSError as exc:
                raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return found


def folder_sample(folder: Path, given: str | None) -> dict[str, Any]:
    """The data to preview with: `--data FILE`, else the folder's sample.json, else {}."""
    path = Path(given) if given else folder / SAMPLE
    if not path.is_file():
        if given:
            raise UsageError(f"cannot read {given}: no such file")
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object (the template's variables)")
    return data


def _listing(template: Template) -> dict[str, Any]:
    return to_dict(template)


def list_(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    found = list(client.templates())
    rows = [
        (
            t.name,
            t.latest_version,
            t.id,
            t.updated_at and t.updated_at.isoformat(timespec="seconds"),
        )
        for t in found
    ]
    text = table(rows, ("NAME", "VERSION", "ID", "UPDATED")) if rows else "no templates"
    return Outcome([_listing(t) for t in found], text)


def _template_text(template: Template) -> str:
    lines = [
        f"name: {template.name}",
        f"id: {template.id}",
        f"version: {template.version} of {', '.join(str(v.version) for v in template.versions)}",
    ]
    lines += [f"file: {f.name} ({f.size} bytes, {f.content_type})" for f in template.files]
    for part in PARTS:
        text = getattr(template, part)
        if text is not None:
            lines += [f"--- {part}", text.rstrip("\n")]
    return "\n".join(lines)


def show(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    template = client.template_named(args.name, args.version)
    return Outcome(to_dict(template), _template_text(template))


def push(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Store the folder as the next version of its template."""
    folder = _folder(args.folder)
    name = args.name or folder.resolve().name
    texts = folder_texts(folder)
    files = folder_assets(folder)
    stored = client.create_template(
        name, texts["body"] or "", texts["header"], texts["footer"], files=files or None
    )
    print(f"pressroom: stored {name} version {stored.version}", file=io.stderr)
    return Outcome(to_dict(stored), f"{stored.name}  version {stored.version}  {stored.id}")


def _pull_files(client: Client, template: Template, folder: Path) -> list[str]:
    """Download the files the version bundles into `folder/assets/`, each at its name
    (a name that would land outside it is refused); their paths in the folder."""
    assets = (folder / ASSETS).resolve()
    written = []
    for file in template.files:
        path = (assets / file.name).resolve()
        if not path.is_relative_to(assets):
            raise UsageError(f"the bundled file {file.name!r} would be written outside {assets}")
        path.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(file, path)
        written.append(f"{ASSETS}/{file.name}")
    return written


def pull(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Write a version's body, header and footer into a folder, with the files it bundles
    under `assets/` and `template.json` (its id, name, version and those files)."""
    template = client.template_named(args.name, args.version)
    folder = Path(args.dir) if args.dir else Path(_safe_name(args.name, "the template name"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for part in PARTS:
            text = getattr(template, part)
            if text is not None:
                (folder / f"{part}.html").write_text(text)
                written.append(f"{part}.html")
        written += _pull_files(client, template, folder)
        manifest = {k: v for k, v in to_dict(template).items() if k not in PARTS}
        for entry in manifest.get("files", []):
            entry.pop("url", None)  # a signed link that expires: not worth keeping
        (folder / "template.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {folder}: {exc.strerror or exc}") from None
    answer: dict[str, Any] = {"folder": os.path.abspath(folder), "name": template.name}
    answer.update(id=template.id, version=template.version, files=[*written, "template.json"])
    return Outcome(answer, f"{folder}: {template.name} version {template.version}")


def preview(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Render a folder (as it is, nothing stored) or a stored template with sample data;
    save the PDF and, with `--open`, open it."""
    if Path(args.target).is_dir():
        folder = _folder(args.target)
        texts = folder_texts(folder)
        options = {f"{part}_template": texts[part] for part in ("header", "footer") if texts[part]}
        job = client.submit(
            template=texts["body"],
            data=folder_sample(folder, args.data),
            options=options or None,
            files=folder_assets(folder) or None,
            preview=True,
        )
        default = folder.resolve().name
    else:
        data = folder_sample(Path("."), args.data) if args.data else {}
        job = client.submit(
            template_name=args.target, template_version=args.version, data=data, preview=True
        )
        default = args.target
    job = client.wait(job.id, timeout=args.timeout)
    if job.status != "done":
        why = job.error.message if job.error else job.status
        return Outcome(to_dict(job), "", ENDED_BADLY, f"the preview {job.status}: {why}")
    path = args.output or _safe_name(default, "the template name") + "-preview.pdf"
    size = client.download(job, path)
    if args.open:
        webbrowser.open(Path(path).resolve().as_uri())
    answer = {**to_dict(job), "file": os.path.abspath(path)}
    return Outcome(answer, f"{path}: {job.pages or 0} page(s), {size} bytes")


def diff(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """A unified diff of body, header and footer between two versions (the second
    default the latest)."""
    old = client.template_named(args.name, args.old)
    new = client.template_named(args.name, args.new)
    changes: dict[str, list[str]] = {}
    for part in PARTS:
        before = (getattr(old, part) or "").splitlines(keepends=True)
        after = (getattr(new, part) or "").splitlines(keepends=True)
        label = f"{args.name}/{part}.html"
        lines = list(
            difflib.unified_diff(before, after, f"{label}@{old.version}", f"{label}@{new.version}")
        )
        if lines:
            changes[part] = [line.rstrip("\n") for line in lines]
    data = {"name": args.name, "from": old.version, "to": new.version, "changes": changes}
    text = "\n".join(line for lines in changes.values() for line in lines)
    if not changes:
        print(f"pressroom: versions {old.version} and {new.version} are the same", file=io.stderr)
    return Outcome(data, text)


def rename(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Rename a stored template; its id and versions stay."""
    renamed = client.rename_template(client.template_named(args.name).id, args.new_name)
    print(f"pressroom: renamed {args.name} to {renamed.name}", file=io.stderr)
    return Outcome(to_dict(renamed), f"{renamed.name}  version {renamed.latest_version}")


def add_parser(commands: Any, add: Add, exit_text: str) -> None:
    """`pressroom templates …` under `commands`; `add` makes a command's parser."""
    actions = commands.add_parser(
        "templates", help="stored templates: list, show, push, pull, preview, diff",
        description="Stored templates, and template folders.", epilog=exit_text,
    ).add_subparsers(dest="action", required=True, metavar="ACTION")  # fmt: skip
    add(actions, "list", list_, "the stored templates, most recently updated first")
    shown = add(actions, "show", show, "one version of a stored template")
    shown.add_argument("name", metavar="NAME")
    shown.add_argument("--version", type=int, metavar="N", help="default the latest")
    pushed = add(actions, "push", push, "store a template folder as the next version")
    pushed.add_argument(
        "folder", metavar="DIR", help="body.html, header.html, footer.html, assets/"
    )
    pushed.add_argument("--name", help="the template's name (default: DIR's name)")
    pulled = add(actions, "pull", pull, "write a stored version into a folder")
    pulled.add_argument("name", metavar="NAME")
    pulled.add_argument("dir", nargs="?", metavar="DIR", help="default: ./NAME")
    pulled.add_argument("--version", type=int, metavar="N", help="default the latest")
    previewed = add(actions, "preview", preview, "render a folder or a stored template")
    previewed.add_argument("target", metavar="DIR|NAME", help="a template folder or a name")
    previewed.add_argument("--data", metavar="FILE", help="default: the folder's sample.json")
    previewed.add_argument("--version", type=int, metavar="N", help="of a stored template")
    previewed.add_argument("-o", "--output", metavar="FILE", help="default: NAME-preview.pdf")
    previewed.add_argument("--open", action="store_true", help="open the PDF when saved")
    previewed.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
    renamed = add(actions, "rename", rename, "rename a stored template (its versions stay)")
    renamed.add_argument("name", metavar="NAME")
    renamed.add_argument("new_name", metavar="NEW_NAME")
    diffed = add(actions, "diff", diff, "what changed between two versions")
    diffed.add_argument("name", metavar="NAME")
    diffed.add_argument("old", type=int, metavar="V1")
    diffed.add_argument("new", type=int, nargs="?", metavar="V2", help="default the latest")
