"""`pressroom render|batch|jobs`: Pressroom from the command line, through `Client`.

    pressroom render invoice.html.j2 --data data.json -o invoice.pdf [--option format=A4]
    pressroom render https://example.com/report -o report.pdf      # a page, by its URL
    pressroom render --html page.html | --template-id ID [--template-version N]
    pressroom render --markdown notes.md [--stylesheet notes.css] [wrapper.html.j2]
    pressroom render --html page.html --asset logo.png --asset fonts/brand.woff2=brand.woff2
                     [--stored-asset style.css]       # files the page names relatively
    pressroom batch submit items.jsonl --template invoice.html.j2 [--output zip|merged]
                                       [--wait [-o archive.zip]]
    pressroom batch pause|resume|cancel|status ID
    pressroom jobs ls [--status S] [--limit N] | show ID | events ID
    pressroom templates list | show NAME | push DIR | pull NAME [DIR] | diff NAME V1 [V2]
    pressroom templates preview DIR|NAME [--data FILE] [-o FILE] [--open]

The gateway is `--url`, else `PRESSROOM_URL`, else the one `make up` runs from this folder
(the settings' `base_url`); the key is `--key`, else `PRESSROOM_API_KEY`, else
`<PRESSROOM_DATA_DIR or ./.pressroom>/api-key`.

Data goes to stdout: a table or lines for people, or JSON with `--json` (the job, batch
or listing, even when the job failed). Messages go to stderr: progress, why a job or
batch did not end `done`, and errors (with `--json`, an error is one line of JSON,
`{"error": {"type", "message", "field", "status"}}`). Exit status, for scripts:

    0    done
    1    the job or batch ended failed or cancelled
    2    usage error: bad arguments, an unreadable file, a bad setting
    3    the API refused the request (4xx: invalid, unknown id, bad key, …)
    4    the gateway is unavailable or did not answer, or --timeout passed
    130  interrupted (Ctrl-C)

Size: the `render`, `batch` and `jobs` commands share the parser's common options, the
reporting to stdout and stderr and the exit statuses above; a split by command would scatter
those.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pressroom import pdfcli, progress, templatecli
from pressroom.clibase import (
    API_ERROR,
    ENDED_BADLY,
    EXIT_TEXT,
    INTERRUPTED,
    OK,
    UNAVAILABLE,
    USAGE,
    Command,
    Io,
    Outcome,
    UsageError,
    table,
)
from pressroom.client import Batch, Client, Job, target
from pressroom.client.errors import ConfigurationError, PressroomError, Unavailable
from pressroom.client.models import to_dict

__all__ = ["API_ERROR", "ENDED_BADLY", "INTERRUPTED", "OK", "UNAVAILABLE", "USAGE", "Io"]


def exit_status(exc: PressroomError) -> int:
    """The exit status of an error: the one place errors become statuses."""
    if isinstance(exc, ConfigurationError):
        return USAGE
    if isinstance(exc, Unavailable) or exc.status == 0:
        return UNAVAILABLE
    return API_ERROR


# Reading the command's inputs


def read_text(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def read_json(path: str) -> Any:
    try:
        return json.loads(read_text(path))
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None


def read_items(path: str) -> list[dict[str, Any]]:
    """The items of a JSON Lines file, one object a line (blank lines skipped)."""
    items = []
    for number, raw in enumerate(read_text(path).splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{path} line {number} is not JSON: {exc}") from None
        if not isinstance(item, dict):
            raise UsageError(f"{path} line {number} is not a JSON object")
        items.append(item)
    if not items:
        raise UsageError(f"{path} holds no items")
    return items


def option(raw: str) -> tuple[list[str], Any]:
    """`--option key=value`: the key's path (`margin.top` → two levels) and the value,
    read as JSON when it is JSON (`true`, `2`, `{"a": 1}`), else as a string."""
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {raw!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip().split("."), parsed


def options_of(pairs: Sequence[tuple[list[str], Any]] | None) -> dict[str, Any] | None:
    """The print options the `--option` flags build (None without any)."""
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for path, value in pairs:
        node = options
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return options


# render


def render_source(args: argparse.Namespace) -> dict[str, Any]:
    """The job's source from the arguments: exactly one of a template file (or a page's
    http(s) URL) as SOURCE, `--html FILE`, `--template-id ID`; or `--markdown FILE`,
    which a template file or `--template-id` may wrap."""
    if args.markdown is not None:
        return markdown_source(args)
    if args.stylesheet is not None:
        raise UsageError("--stylesheet styles --markdown; give --markdown FILE too")
    given = [args.source is not None, args.html is not None, args.template_id is not None]
    if sum(given) != 1:
        raise UsageError("give one source: a template file or page URL, --html or --template-id")
    if args.template_id is not None:
        return {"template_id": args.template_id, "template_version": args.template_version}
    if args.html is not None:
        return {"html": read_text(args.html)}
    if args.source.startswith(("http://", "https://")):
        return {"url": args.source}
    return {"template": read_text(args.source)}


def markdown_source(args: argparse.Namespace) -> dict[str, Any]:
    """`--markdown FILE` (and `--stylesheet FILE`), wrapped by the template file SOURCE or
    by `--template-id`, or by neither."""
    if args.html is not None or str(args.source).startswith(("http://", "https://")):
        raise UsageError("--markdown is the source: --html or a URL cannot go with it")
    if args.source is not None and args.template_id is not None:
        raise UsageError("wrap --markdown in a template file or --template-id, not both")
    body: dict[str, Any] = {"markdown": read_text(args.markdown)}
    if args.stylesheet is not None:
        body["stylesheet"] = read_text(args.stylesheet)
    if args.template_id is not None:
        body.update(template_id=args.template_id, template_version=args.template_version)
    elif args.source is not None:
        body["template"] = read_text(args.source)
    return body


IMAGE_EXTENSIONS = {"png": "png", "jpeg": "jpg", "webp": "webp"}
"""The file name extension of each image `options.output` (any other is a PDF)."""


def assets_of(given: Sequence[str] | None) -> dict[str, bytes] | None:
    """`--asset FILE` (named as its base name) or `--asset NAME=FILE`, read."""
    files: dict[str, bytes] = {}
    for raw in given or ():
        name, _, path = raw.partition("=") if "=" in raw else (Path(raw).name, "", raw)
        try:
            files[name] = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read --asset {path}: {exc.strerror or exc}") from None
    return files or None


def output_path(args: argparse.Namespace, job: Job) -> str:
    """`-o`, else the source file's name with the output's extension, else `<job id>.pdf`."""
    if args.output:
        return str(args.output)
    output = (options_of(args.option) or {}).get("output")
    extension = "." + IMAGE_EXTENSIONS.get(str(output), "pdf")
    local = args.markdown or args.html
    local = local or (args.source if not str(args.source).startswith("http") else None)
    if local and local != "-":
        return Path(local).name.split(".")[0] + extension
    return job.id + extension


def render(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Submit one job, wait for it, download its file."""
    data = read_json(args.data) if args.data else None
    if data is not None and not isinstance(data, dict):
        raise UsageError(f"{args.data} must hold a JSON object (the template's variables)")
    job = client.submit(
        **render_source(args),
        data=data,
        options=options_of(args.option),
        files=assets_of(args.asset),
        assets=args.stored_asset,
    )
    job = client.wait(job.id, timeout=args.timeout)
    if job.status != "done":
        return Outcome(to_dict(job), job_text(job), ENDED_BADLY, job_ended(job))
    path = output_path(args, job)
    size = client.download(job, path)
    answer = {**to_dict(job), "file": os.path.abspath(path)}
    return Outcome(answer, f"{path}: {plural(job.pages or 0, 'page')}, {size} bytes ({job.id})")


def job_text(job: Job) -> str:
    """A job as `name: value` lines, its empty fields left out."""
    shown = {k: v for k, v in to_dict(job).items() if v is not None}
    return "\n".join(f"{name + ':':<13} {value}" for name, value in shown.items())


def job_ended(job: Job) -> str:
    """Why a job did not end `done`."""
    reason = f": {job.error.type}: {job.error.message}" if job.error else ""
    return f"job {job.id} {job.status}{reason}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# batch


def batch_submit(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """Submit a batch from a JSON Lines file of items; with `--wait`, follow it to its end."""
    if (args.template is None) == (args.template_id is None):
        raise UsageError("give --template FILE or --template-id ID")
    source: dict[str, Any] = {"template_id": args.template_id}
    if args.template is not None:
        source = {"template": read_text(args.template)}
    batch = client.submit_batch(
        read_items(args.items), **source, output=args.output, options=options_of(args.option)
    )
    accepted = f"batch {batch.id} queued: {plural(batch.total, 'item')}"
    if not args.wait:
        return Outcome(to_dict(batch), accepted)
    print(f"{accepted}; following it (Ctrl-C to stop)", file=io.stderr, flush=True)
    return follow(client, batch.id, args, io)


def follow(client: Client, batch_id: str, args: argparse.Namespace, io: Io) -> Outcome:
    """Show the batch's progress until it ends (Ctrl-C offers to pause it); download its
    archive with `-o`."""
    shown = progress.Progress(io.stderr)
    batch = None
    try:
        for batch in client.progress(batch_id, timeout=args.timeout):
            shown.show(batch)
    except KeyboardInterrupt:
        shown.end()
        return interrupted(client, batch_id, io)
    shown.end()
    assert batch is not None  # progress() yields the batch at least once, ended
    if args.archive and batch.url:
        client.download(batch, args.archive)
    return batch_outcome(batch, args.archive)


def batch_outcome(batch: Batch, archive: str | None = None) -> Outcome:
    text = f"batch {batch.id} {batch.status}: {progress.counts(batch)}"
    if archive and batch.url:
        text += f"; archive in {archive}"
    if batch.status == "done":
        return Outcome(to_dict(batch), text)
    return Outcome(to_dict(batch), text, ENDED_BADLY, batch_ended(batch))


def batch_ended(batch: Batch) -> str:
    """Why a batch did not end `done`."""
    reason = f": {batch.error.type}: {batch.error.message}" if batch.error else ""
    return f"batch {batch.id} {batch.status}{reason}"


def interrupted(client: Client, batch_id: str, io: Io) -> Outcome:
    """Ctrl-C while following a batch: ask whether to pause it (no answer is no). The
    batch goes on either way unless paused; the exit status is 130 both ways."""
    try:
        answer = io.ask("pause the batch? [y/N] ").strip().lower()
    except (EOFError, KeyboardInterrupt):
        answer = ""
    if answer in {"y", "yes"}:
        client.pause_batch(batch_id)
        text = f"batch {batch_id} paused; go on with: pressroom batch resume {batch_id}"
        return Outcome({"id": batch_id, "paused": True}, "", INTERRUPTED, text)
    text = f"batch {batch_id} goes on; follow it with: pressroom batch status {batch_id}"
    return Outcome({"id": batch_id, "paused": False}, "", INTERRUPTED, text)


def batch_control(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """`pause`, `resume` or `cancel`."""
    act = {"pause": client.pause_batch, "resume": client.resume_batch}
    status = act.get(args.action, client.cancel_batch)(args.id)
    asked = {"pause": "paused", "resume": "resumed", "cancel": "cancelling"}[args.action]
    return Outcome({"id": args.id, "status": status}, f"batch {args.id} {asked} ({status})")


def batch_status(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """The batch's progress line, and its failed items (ten at most)."""
    batch = client.batch(args.id)
    lines = [f"batch {batch.id} {batch.status}", progress.line(batch)]
    for item in itertools.islice(client.batch_items(batch.id, "failed"), 10 if batch.failed else 0):
        reason = item.error.message if item.error else "-"
        lines.append(f"  item {item.index} ({item.filename}) failed: {reason}")
    if batch.url:
        lines.append(f"archive: {batch.url}")
    if batch.status in {"failed", "cancelled"}:
        return Outcome(to_dict(batch), "\n".join(lines), ENDED_BADLY, batch_ended(batch))
    return Outcome(to_dict(batch), "\n".join(lines))


# jobs


def jobs_ls(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    found = list(client.jobs(status=args.status, limit=args.limit))
    rows = [
        (j.id, j.status, j.pages, j.created_at and j.created_at.isoformat(timespec="seconds"),
         j.error and j.error.type)
        for j in found
    ]  # fmt: skip
    text = table(rows, ("ID", "STATUS", "PAGES", "CREATED", "ERROR")) if rows else "no jobs"
    return Outcome([to_dict(j) for j in found], text)


def jobs_show(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    """The job on stdout whatever its status; a failed or cancelled one also says so on
    stderr and exits 1."""
    job = client.get(args.id)
    if job.status in {"failed", "cancelled"}:
        return Outcome(to_dict(job), job_text(job), ENDED_BADLY, job_ended(job))
    return Outcome(to_dict(job), job_text(job))


def jobs_events(client: Client, args: argparse.Namespace, io: Io) -> Outcome:
    found = client.events(args.id)
    rows = [
        (e.seq, e.at and e.at.isoformat(timespec="milliseconds"), e.type,
         e.error.message if e.error else (f"attempt {e.attempt}" if e.attempt else None))
        for e in found
    ]  # fmt: skip
    return Outcome([e.details for e in found], table(rows, ("SEQ", "AT", "TYPE", "DETAIL")))


# The parser


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the gateway (default: PRESSROOM_URL, else make up's)")
    common.add_argument("--key", help="the API key (default: PRESSROOM_API_KEY, else make up's)")
    common.add_argument("--json", action="store_true", help="print JSON on stdout")
    return common


def _add(parent: Any, name: str, run: Command, doc: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parent.add_parser(
        name, parents=[_common()], help=doc, description=doc, epilog=EXIT_TEXT
    )
    parser.set_defaults(run=run)
    return parser


def _job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--option", action="append", type=option, metavar="KEY=VALUE",
        help="a print option (repeatable): format=A4, landscape=true, margin.top=1cm",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="wait at most this long"
    )


def _render_parser(commands: Any) -> None:
    render_ = _add(commands, "render", render, "render one document and download it")
    render_.add_argument("source", nargs="?", metavar="SOURCE",
                         help="a Jinja2 template file, or an http(s) URL to print")  # fmt: skip
    render_.add_argument("--data", metavar="FILE", help="the template's variables (JSON; - stdin)")
    render_.add_argument("--html", metavar="FILE", help="HTML printed as it is")
    render_.add_argument("--markdown", metavar="FILE", help="Markdown (SOURCE may wrap it)")
    render_.add_argument("--stylesheet", metavar="FILE", help="CSS for --markdown")
    render_.add_argument("--template-id", metavar="ID", help="a stored template")
    render_.add_argument("--template-version", type=int, metavar="N", help="default the latest")
    render_.add_argument("-o", "--output", metavar="FILE", help="default: SOURCE's name + .pdf")
    render_.add_argument(
        "--asset",
        action="append",
        metavar="[NAME=]FILE",
        help="a file the page refers to by NAME (default: FILE's base name)",
    )
    render_.add_argument(
        "--stored-asset",
        action="append",
        metavar="NAME[@N]",
        help="a stored asset (POST /assets) the page refers to by NAME",
    )
    _job_options(render_)


def _batch_parser(commands: Any) -> None:
    batch = commands.add_parser(
        "batch",
        help="submit and control batches",
        description="Batches of documents.",
        epilog=EXIT_TEXT,
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    submit = _add(batch, "submit", batch_submit, "submit a batch from a JSON Lines file")
    submit.add_argument("items", metavar="ITEMS.jsonl", help='one {"data", "filename"?} a line')
    submit.add_argument("--template", metavar="FILE", help="the Jinja2 template of every item")
    submit.add_argument("--template-id", metavar="ID", help="a stored template instead")
    submit.add_argument("--output", choices=("zip", "merged"), help="one ZIP, or one merged PDF")
    submit.add_argument("--wait", action="store_true", help="show progress until it ends")
    submit.add_argument("-o", dest="archive", metavar="FILE", help="with --wait: save the archive")
    _job_options(submit)
    for action in ("pause", "resume", "cancel"):
        _add(batch, action, batch_control, f"{action} a batch").add_argument("id", metavar="ID")
    _add(batch, "status", batch_status, "a batch's progress").add_argument("id", metavar="ID")


def _jobs_parser(commands: Any) -> None:
    jobs = commands.add_parser(
        "jobs",
        help="list and inspect jobs",
        description="Single jobs.",
        epilog=EXIT_TEXT,
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = _add(jobs, "ls", jobs_ls, "the newest jobs")
    ls.add_argument("--status", choices=("queued", "running", "done", "failed", "cancelled"))
    ls.add_argument("--limit", type=int, default=20, metavar="N", help="at most N (default 20)")
    _add(jobs, "show", jobs_show, "one job's status").add_argument("id", metavar="ID")
    _add(jobs, "events", jobs_events, "one job's timeline").add_argument("id", metavar="ID")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pressroom",
        description="Render documents with Pressroom.",
        epilog=EXIT_TEXT,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _render_parser(commands)
    _batch_parser(commands)
    _jobs_parser(commands)
    pdfcli.add_parser(commands, _add, EXIT_TEXT)
    templatecli.add_parser(commands, _add, EXIT_TEXT)
    return parser


# Running


def run(argv: Sequence[str], environ: Mapping[str, str], io: Io | None = None) -> int:
    """Run one command (`argv` starts with `render`, `batch` or `jobs`); its exit status."""
    io = io or Io()
    args = build_parser().parse_args(argv)  # a usage error exits 2 here
    found = None
    try:
        found = target.resolve(args.url, args.key, environ)
        with Client(found.url, found.key) as client:
            outcome: Outcome = args.run(client, args, io)
    except UsageError as exc:
        return fail(io, args, str(exc), USAGE, {"type": "usage", "message": str(exc)})
    except KeyboardInterrupt:
        return fail(io, args, "interrupted", INTERRUPTED, {"type": "interrupted"})
    except PressroomError as exc:
        said = describe(exc, found)
        return fail(io, args, said, exit_status(exc), error_json(exc, said))
    report(io, args, outcome)
    return outcome.status


def report(io: Io, args: argparse.Namespace, outcome: Outcome) -> None:
    """The data on stdout (JSON with `--json`, else the text); the note on stderr, so a
    person sees why a job failed even under `--json`."""
    if args.json:
        print(json.dumps(outcome.data, indent=2, default=str), file=io.stdout)
    elif outcome.text:
        print(outcome.text, file=io.stdout)
    if outcome.note:
        print(f"pressroom: {outcome.note}", file=io.stderr)


def describe(exc: PressroomError, found: target.Target | None) -> str:
    """The error for people; a refused key says where it came from."""
    text = str(exc)
    if exc.status == 401 and found is not None:
        text += f" (key from {found.key_source}; gateway {found.url})"
    return text


def error_json(exc: PressroomError, message: str) -> dict[str, Any]:
    return {"type": exc.type, "message": message, "field": exc.field, "status": exc.status}


def fail(io: Io, args: argparse.Namespace, message: str, status: int, error: Any) -> int:
    """An error on stderr: one line for people, or with `--json` one line of JSON; stdout
    stays empty, so a script never reads an error as data."""
    if args.json:
        print(json.dumps({"error": error}), file=io.stderr)
    else:
        print(f"pressroom: {message}", file=io.stderr)
    return status


def main() -> None:
    # `pressroom render …`: services/cli.py leaves sys.argv as it was; the command is argv[1].
    raise SystemExit(run(sys.argv[1:], os.environ))
