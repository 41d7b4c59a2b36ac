"""`pressroom pdf STEP INPUT… -o OUT`: the PDF tools from the command line, one step a
command, through `Client.pdf_job` (inputs uploaded) and `Client.validate`.

    pressroom pdf merge a.pdf b.pdf -o out.pdf
    pressroom pdf split book.pdf --every 10 -o chapters.zip
    pressroom pdf rotate scan.pdf --angle 90 [--pages 1-3]
    pressroom pdf flatten form.pdf
    pressroom pdf metadata a.pdf --title "Annual report" --author Ana
    pressroom pdf pdfa scan.pdf --level 2b
    pressroom pdf encrypt a.pdf --owner-password … [--user-password …] [--permission print]
    pressroom pdf attach invoice.pdf --file data.csv
    pressroom pdf stamp a.pdf --text PAID | --image logo.png | --pdf mark.pdf
    pressroom pdf watermark a.pdf --text DRAFT
    pressroom pdf sign a.pdf [--reason …]
    pressroom pdf optimise a.pdf [--recompress]
    pressroom pdf validate a.pdf [--password …]

An INPUT is a file, `job:<id>` (an earlier job's PDF) or `asset:<name>` (a stored
asset); `--password` opens encrypted inputs; `--set key=value` sets any other field of
the step (JSON values). The output is `-o`, else named after the step and first input
(`.zip` when the step makes several documents). `validate` exits 1 when a check
fails. Other statuses are the CLI's (`clibase`): 3 the API refused, 4 unreachable.
"""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pressroom.clibase import ENDED_BADLY, Io, Outcome, UsageError
from pressroom.client import Client, Job, pdf
from pressroom.client.models import to_dict

Add = Callable[[Any, str, Any, str], argparse.ArgumentParser]

STEPS: dict[str, str] = {
    "merge": "join PDFs into one, an outline entry for each",
    "split": "cut a PDF into several (a ZIP): by ranges, every N pages or the outline",
    "rotate": "turn pages clockwise",
    "flatten": "draw form fields and annotations into the pages",
    "metadata": "set the title, author… (Info and XMP together)",
    "pdfa": "convert to PDF/A-1b, 2b or 3b",
    "encrypt": "AES-256 with an owner and an optional user password",
    "attach": "embed files",
    "stamp": "a mark over the pages: text, image or a PDF's first page",
    "watermark": "a mark under the pages' content",
    "sign": "a PAdES signature with the service's key",
    "optimise": "object streams, compressed structure, unused objects dropped",
}


_METADATA = ("title", "author", "subject", "keywords", "creator", "producer", "created",
             "modified")  # fmt: skip


def input_of(token: str, password: str | None) -> pdf.InputLike:
    """A command-line input: `job:<id>`, `asset:<name>` or a file path."""
    kind, colon, rest = token.partition(":")
    source: pdf.Source = token
    if colon and kind in ("job", "asset") and rest:
        source = {kind: rest}
    elif not Path(token).is_file():
        raise UsageError(f"cannot read {token}: no such file (or give job:<id>, asset:<name>)")
    return pdf.Input(source, password) if password is not None else source


def setting(raw: str) -> tuple[str, Any]:
    """`--set key=value`: the value as JSON when it is JSON, else as a string."""
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {raw!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def _fields(args: argparse.Namespace) -> tuple[dict[str, Any], list[pdf.Source]]:
    """The step's fields from its flags, and the files it reads (uploaded by name)."""
    files: list[pdf.Source] = []
    made = _FIELDS.get(args.step)
    fields = made(args, files) if made is not None else {}
    fields.update(dict(args.set or ()))
    return fields, files


def _attach(args: argparse.Namespace, files: list[pdf.Source]) -> dict[str, Any]:
    files += args.file
    return {"files": [{"name": Path(f).name, "source": Path(f).name} for f in args.file]}


_FIELDS: dict[str, Callable[[argparse.Namespace, list[pdf.Source]], dict[str, Any]]] = {
    "merge": lambda args, files: {"outline": not args.no_outline},
    "split": lambda args, files: {
        "ranges": args.ranges, "every": args.every, "outline": args.outline or None
    },
    "rotate": lambda args, files: {"angle": args.angle, "pages": args.pages},
    "metadata": lambda args, files: {f: getattr(args, f) for f in _METADATA},
    "pdfa": lambda args, files: {"level": args.level},
    "encrypt": lambda args, files: {
        "owner_password": args.owner_password, "user_password": args.user_password,
        "permissions": args.permission,
    },
    "attach": _attach,
    "stamp": lambda args, files: _mark(args, files),
    "watermark": lambda args, files: _mark(args, files),
    "sign": lambda args, files: {
        "reason": args.reason, "location": args.location, "visible": args.visible or None
    },
    "optimise": lambda args, files: {"recompress": args.recompress or None},
}  # fmt: skip
"""Each step's fields, from its flags (None: left out, the step's default)."""


def _mark(args: argparse.Namespace, files: list[pdf.Source]) -> dict[str, Any]:
    given = [v for v in (args.text, args.image, args.pdf) if v is not None]
    if len(given) != 1:
        raise UsageError("give one of --text, --image or --pdf")
    fields: dict[str, Any] = {
        "text": args.text, "opacity": args.opacity, "rotation": args.rotation,
        "position": args.position, "size": args.size, "pages": args.pages,
    }  # fmt: skip
    if args.image is not None:
        name, data = pdf.read(args.image)
        kind = mimetypes.guess_type(name)[0] or "image/png"
        fields["image"] = f"data:{kind};base64,{base64.b64encode(data).decode()}"
    if args.pdf is not None:
        fields["pdf"] = Path(args.pdf).name
        files.append(args.pdf)
    return fields


def run_step(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Submit the step's job with the inputs uploaded, wait, download what it made."""
    fields, files = _fields(args)
    inputs = [input_of(token, args.password) for token in args.inputs]
    job = client.pdf_job(inputs, [pdf.step(args.step, **fields)], files=files)
    job = client.wait(job.id, timeout=args.timeout)
    if job.status != "done":
        reason = f": {job.error.type}: {job.error.message}" if job.error else ""
        return Outcome(to_dict(job), "", ENDED_BADLY, f"job {job.id} {job.status}{reason}")
    path = args.output or _default_output(args, job)
    size = client.download(job, path)
    report = client.report(job)
    outputs = ", ".join(f"{o['name']} ({o['pages']} p.)" for o in report.get("outputs", []))
    answer = {**to_dict(job), "file": os.path.abspath(path), "report": report}
    return Outcome(answer, f"{path}: {size} bytes; {outputs} ({job.id})")


def _default_output(args: argparse.Namespace, job: Job) -> str:
    """`merged.pdf`, else `<first input's stem>-<step>.pdf`; `.zip` for several."""
    extension = Path(urlsplit(job.url or "").path).suffix or ".pdf"
    first = args.inputs[0].partition(":")[2] if ":" in args.inputs[0] else args.inputs[0]
    stem = "merged" if args.step == "merge" else f"{Path(first).stem}-{args.step}"
    return stem + extension


def run_validate(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """The validation of one local PDF: each check on a line; exit 1 if any failed."""
    answer = client.validate(args.input, args.password)
    found = answer["validation"]
    claims = [f"PDF {found['version']}, {found['pages']} pages"]
    claims += [f"{k} {found[k]}" for k in ("pdfa", "pdfua") if found.get(k)]
    if found.get("encryption"):
        claims.append(f"encrypted ({found['encryption']['method']})")
    if found.get("signatures"):
        claims.append(f"{len(found['signatures'])} signature(s)")
    lines = [f"{found['document']}: " + ", ".join(claims)]
    failed = [c for c in found.get("checks", []) if c["status"] == "failed"]
    for check in found.get("checks", []):
        reason = f": {check['reason']}" if check.get("reason") else ""
        lines.append(f"  {check['status']:<15} {check['name']}{reason}")
    lines += [f"  warning: {w}" for w in answer.get("warnings", [])]
    if failed:
        names = ", ".join(c["name"] for c in failed)
        return Outcome(answer, "\n".join(lines), ENDED_BADLY, f"checks failed: {names}")
    return Outcome(answer, "\n".join(lines))


def add_parser(commands: Any, add: Add, exit_text: str) -> None:
    """`pressroom pdf …` under `commands`; `add` makes a command's parser (`cli._add`)."""
    steps = commands.add_parser(
        "pdf", help="PDF tools: merge, split, rotate, pdfa, validate…",
        description="PDF tools on your PDFs, run by the service.", epilog=exit_text,
    ).add_subparsers(dest="step", required=True, metavar="STEP")  # fmt: skip
    for name, doc in STEPS.items():
        parser = add(steps, name, run_step, doc)
        parser.add_argument("inputs", nargs="+", metavar="INPUT",
                            help="a PDF file, job:<id> or asset:<name>")  # fmt: skip
        parser.add_argument("-o", "--output", metavar="FILE", help="where to save the result")
        parser.add_argument("--password", help="the password that opens the inputs")
        parser.add_argument("--set", action="append", type=setting, metavar="KEY=VALUE",
                            help="any other field of the step (repeatable)")  # fmt: skip
        parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
        flags = _STEP_FLAGS.get(name)
        if flags is not None:
            flags(parser)
    check = add(steps, "validate", run_validate, "what a PDF claims and whether it holds")
    check.add_argument("input", metavar="FILE", help="the PDF")
    check.add_argument("--password", help="the password that opens it")


def _flags_merge(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-outline", action="store_true", help="no outline entry per input")


def _flags_split(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranges", action="append", metavar="RANGE", help="'1-3' (repeatable)")
    p.add_argument("--every", type=int, metavar="N", help="N pages a document")
    p.add_argument("--outline", action="store_true", help="one per top-level outline entry")


def _flags_rotate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--angle", type=int, required=True, choices=(90, 180, 270))
    p.add_argument("--pages", metavar="RANGES", help="'1-3, 5' (default: all)")


def _flags_metadata(p: argparse.ArgumentParser) -> None:
    for name in _METADATA:
        p.add_argument(f"--{name}")


def _flags_pdfa(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", default="2b", choices=("1b", "2b", "3b"))


def _flags_encrypt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--owner-password", required=True)
    p.add_argument("--user-password")
    p.add_argument("--permission", action="append", help="print, copy… (repeatable)")


def _flags_attach(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", action="append", required=True, help="a file to embed")


def _flags_mark(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text")
    p.add_argument("--image", metavar="FILE", help="a PNG or JPEG")
    p.add_argument("--pdf", metavar="FILE", help="a PDF whose first page is the mark")
    for name, kind in (("opacity", float), ("rotation", float), ("size", float)):
        p.add_argument(f"--{name}", type=kind)
    p.add_argument("--position")
    p.add_argument("--pages", metavar="RANGES")


def _flags_sign(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason")
    p.add_argument("--location")
    p.add_argument("--visible", action="store_true")


def _flags_optimise(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recompress", action="store_true")


_STEP_FLAGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "merge": _flags_merge, "split": _flags_split, "rotate": _flags_rotate,
    "metadata": _flags_metadata, "pdfa": _flags_pdfa, "encrypt": _flags_encrypt,
    "attach": _flags_attach, "stamp": _flags_mark, "watermark": _flags_mark,
    "sign": _flags_sign, "optimise": _flags_optimise,
}  # fmt: skip
