"""`Client`: the API from ordinary (blocking) Python code.

Size: one method per API operation, each only the blocking I/O around a `calls.Call`; its
length follows the API's breadth, and `AsyncClient` mirrors it method for method, which a
split by operation would blur.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, TypeVar

import httpx

from pressroom.client import calls, errors, pdf, target
from pressroom.client import files as filecalls
from pressroom.client.calls import Call, Deadline, Page, SseMessage
from pressroom.client.files import Files, names, read_files
from pressroom.client.models import (
    Asset,
    AssetSummary,
    Batch,
    BatchItem,
    BundledFile,
    Job,
    JobEvent,
    Template,
    Usage,
)

T = TypeVar("T")


class Client:
    """A Pressroom gateway, acting for the tenant of `key`.

    >>> from pressroom.client import Client
    >>> with Client("http://127.0.0.1:8080", "prk_…") as pressroom:  # doctest: +SKIP
    ...     job = pressroom.submit(template="<h1>Hi {{ name }}</h1>", data={"name": "Ana"})
    ...     job = pressroom.wait(job.id, timeout=60)
    ...     pressroom.download(job, "hi.pdf")

    Every error answer raises a subclass of `pressroom.client.PressroomError` (see
    `pressroom.client.errors`); `Client.from_env()` finds the gateway and key as the
    `pressroom` command does. A request refused for now (429, 503, no connection) is
    sent again up to `retries` times, when that cannot do it twice (`calls.retry_wait`:
    a submission only with an `idempotency_key`).
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retries: int = calls.RETRIES,
    ) -> None:
        self.url, self.key, self.retries = url.rstrip("/"), key, retries
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)
        self._streams = True  # False once the gateway said it has no stream routes

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> Client:
        """A client of `PRESSROOM_URL` with `PRESSROOM_API_KEY`, else of the `make up`
        run of this folder (its `.pressroom/api-key`)."""
        found = target.resolve(None, None, os.environ if environ is None else environ)
        return cls(found.url, found.key, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: Call[T]) -> T:
        """`call`'s decoded answer; sent again while `calls.retry_wait` says to."""
        for attempt in itertools.count():
            try:
                with calls.transport_errors(self.url):
                    response = self._http.send(call.request(self._http, self.key))
                calls.check(response)
                return call.decode(response.content)
            except errors.PressroomError as exc:
                wait = calls.retry_wait(call, exc, attempt, self.retries)
                if wait is None:
                    raise
                time.sleep(wait)
        raise AssertionError("unreachable")  # itertools.count() never ends

    # Jobs

    def submit(
        self,
        *,
        template: str | None = None,
        html: str | None = None,
        url: str | None = None,
        template_id: str | None = None,
        template_name: str | None = None,
        template_version: int | None = None,
        markdown: str | None = None,
        stylesheet: str | None = None,
        data: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        webhook_url: str | None = None,
        idempotency_key: str | None = None,
        files: Files | None = None,
        assets: Sequence[str] | None = None,
        preview: bool = False,
    ) -> Job:
        """Submit one job; the accepted job (`queued`). Give exactly one source:
        `template` (Jinja2, with `data`), `html`, `url`, `template_id` or `template_name`
        (with `template_version`, default the latest) or `markdown` (styled by
        `stylesheet`, and wrapped by `template` or a stored template if given, as
        `{{ content }}`).

        `preview=True` makes it a template preview: not listed, not billed, superseded
        by a newer preview of the same template.

        `files` go with the job (paths or open files, named by their base names, or a
        mapping from the name the page uses to a path, bytes or open file), and `assets`
        names stored ones (`"logo.png"`, `"brand.woff2@2"`); the page refers to both by
        relative name (`<img src="logo.png">`).

        >>> job = pressroom.submit(html="<p>Hello</p>", options={"format": "A4"})  # doctest: +SKIP
        >>> job = pressroom.submit(html='<img src="a.png">', files=["a.png"])  # doctest: +SKIP
        """
        source = calls.Source(
            template,
            html,
            url,
            template_id,
            template_version,
            markdown,
            stylesheet,
            template_name=template_name,
        )
        call = calls.submit(
            source,
            data,
            options,
            webhook_url,
            idempotency_key,
            read_files(files),
            names(assets),
            preview,
        )
        return self._run(call)

    def get(self, job_id: str) -> Job:
        """The job's status now (`url` is its signed download link once `done`)."""
        return self._run(calls.get_job(job_id))

    def cancel(self, job_id: str) -> Job:
        """Cancel an unfinished job, or delete a finished one's file (idempotent)."""
        return self._run(calls.cancel(job_id))

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's timeline, oldest first."""
        return self._run(calls.job_events(job_id))

    def jobs(self, status: str | None = None, limit: int | None = None) -> Iterator[Job]:
        """The tenant's single jobs, newest first, at most `limit` (all when None),
        fetched page by page as the iteration goes on."""
        return self._paged(lambda size, offset: calls.jobs_page(status, size, offset), limit)

    def wait(self, job_id: str, timeout: float | None = 300.0) -> Job:
        """The job once it has ended (`done`, `failed` or `cancelled`: check `status`);
        `WaitTimeout` after `timeout` seconds. Follows the job's live stream where the
        gateway has one, else polls with backoff (0.1 s doubling up to 2 s)."""
        deadline = Deadline(timeout)
        path = f"/jobs/{calls.segment(job_id)}/stream"
        first = calls.POLL_FIRST
        for message in self._stream(path, deadline, f"job {job_id}"):
            if calls.job_status_of(message) in {"done", "failed", "cancelled"}:
                first = calls.ENDED_POLL_FIRST
                break
        return self._poll_job(job_id, deadline, first)

    def _poll_job(self, job_id: str, deadline: Deadline, first: float = calls.POLL_FIRST) -> Job:
        for delay in calls.backoff(first):
            job = self.get(job_id)
            if job.terminal:
                return job
            if deadline.passed():
                raise deadline.expired(f"job {job_id}")
            time.sleep(deadline.sleep_for(delay))
        raise AssertionError("unreachable")  # backoff() never ends

    def download(self, job: str | Job | Batch, to: str | os.PathLike[str] | BinaryIO) -> int:
        """Stream the file of a done job (an id or a `Job`), or a finished batch's
        archive, to a path or an open binary file; the bytes written."""
        found = self.get(job) if isinstance(job, str) else job
        url = calls.download_url(found)
        with calls.transport_errors(self.url), self._http.stream("GET", url) as response:
            if response.status_code >= 400:
                response.read()
                calls.check(response)
            with calls.Sink(to) as sink:
                for chunk in response.iter_bytes():
                    sink.write(chunk)
        return sink.written

    def download_file(self, file: BundledFile, to: str | os.PathLike[str] | BinaryIO) -> int:
        """Stream the bytes of a file a template version bundles (from `template()` or
        `template_named()`, whose links expire) to a path or an open binary file."""
        if not file.url:
            raise ValueError(f"{file.name}: no link to its bytes; read the template again")
        with calls.transport_errors(self.url), self._http.stream("GET", file.url) as response:
            if response.status_code >= 400:
                response.read()
                calls.check(response)
            with calls.Sink(to) as sink:
                for chunk in response.iter_bytes():
                    sink.write(chunk)
        return sink.written

    # PDF tools (`pdf.py`)

    def pdf_job(
        self,
        inputs: Sequence[pdf.InputLike],
        steps: Sequence[Mapping[str, Any]],
        *,
        files: Sequence[pdf.Source] = (),
        webhook_url: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """Submit a PDF-tools job: `inputs` (paths, binary files, `(name, bytes)`,
        `pdf.Input(source, password)`, `{"job": id}`, `{"asset": name}`) run through
        `steps` (`pdf.step("rotate", angle=90)`); `files` are uploaded beside them for
        steps that read a file by name (`attach`, a PDF `stamp`). The accepted job.

        >>> job = pressroom.pdf_job(["a.pdf", "b.pdf"], [pdf.step("merge")])  # doctest: +SKIP
        """
        parts, _ = pdf.parts_of(inputs, files)
        return self._run(pdf.pdf_job(parts, steps, webhook_url, idempotency_key))

    def pdf_step(self, name: str, *inputs: pdf.InputLike, **fields: Any) -> Job:
        """A job of one step: `pressroom.pdf_step("pdfa", "scan.pdf", level="2b")`."""
        return self.pdf_job(inputs, [pdf.step(name, **fields)])

    def merge(self, *inputs: pdf.InputLike, outline: bool = True) -> Job:
        """One PDF of `inputs`, in order, an outline entry for each."""
        return self.pdf_step("merge", *inputs, outline=outline)

    def split(
        self,
        source: pdf.InputLike,
        *,
        ranges: Sequence[str] | None = None,
        every: int | None = None,
        outline: bool | None = None,
    ) -> Job:
        """Several PDFs (a ZIP) of one: by `ranges`, `every` N pages, or by `outline`."""
        found = list(ranges) if ranges is not None else None
        return self.pdf_step("split", source, ranges=found, every=every, outline=outline)

    def validate(self, source: pdf.Source, password: str | None = None) -> dict[str, Any]:
        """What a PDF claims and whether it holds (`validation`, `warnings`), at once."""
        name, data = pdf.read(source)
        return self._run(pdf.validate(data, name, password))

    def report(self, job: str | Job) -> dict[str, Any]:
        """The report of a done PDF-tools job: its steps, outputs and validations."""
        return self._run(pdf.report(job if isinstance(job, str) else job.id))

    # Batches

    def submit_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Batch:
        """Submit a batch: `items` (each `{"data"?, "filename"?, "url"?}`) and the
        fields of `POST /batches` (`template=` or `template_id=`, `options=`,
        `output="zip"|"merged"`, `webhook_url=`, `progress_webhooks=`)."""
        body = {"items": list(items), **{k: v for k, v in fields.items() if v is not None}}
        return self._run(calls.submit_batch(body, idempotency_key))

    def batch(self, batch_id: str) -> Batch:
        """The batch's progress now."""
        return self._run(calls.get_batch(batch_id))

    def pause_batch(self, batch_id: str) -> str:
        """No item of the batch starts from about a second on; the status answered."""
        return self._run(calls.control_batch(batch_id, "pause"))

    def resume_batch(self, batch_id: str) -> str:
        """The batch goes on where it stopped; the status answered."""
        return self._run(calls.control_batch(batch_id, "resume"))

    def cancel_batch(self, batch_id: str) -> str:
        """Unfinished items are cancelled and the batch ends `cancelled`."""
        return self._run(calls.control_batch(batch_id, "cancel"))

    def batch_items(self, batch_id: str, status: str | None = None) -> Iterator[BatchItem]:
        """Every item of the batch by index (only those of `status` if given)."""

        def page(size: int, offset: int) -> Call[calls.ItemsPage]:
            return calls.batch_items_page(batch_id, status, size, offset)

        return self._paged(page, None, largest=1000)

    def progress(
        self, batch_id: str, timeout: float | None = None, interval: float = 1.0
    ) -> Iterator[Batch]:
        """Snapshots of the batch until it has ended (the last one is terminal), from
        its live stream where the gateway has one, else polled every `interval` s.

        >>> for batch in pressroom.progress(batch.id):  # doctest: +SKIP
        ...     print(f"{batch.done}/{batch.total}")
        """
        deadline = Deadline(timeout)
        path = f"/batches/{calls.segment(batch_id)}/stream"
        for message in self._stream(path, deadline, f"batch {batch_id}"):
            batch = calls.batch_of(message)
            if batch is not None:
                yield batch
                if batch.terminal:
                    return
        yield from self._poll_batch(batch_id, deadline, interval)

    def _poll_batch(self, batch_id: str, deadline: Deadline, interval: float) -> Iterator[Batch]:
        while True:
            batch = self.batch(batch_id)
            yield batch
            if batch.terminal:
                return
            if deadline.passed():
                raise deadline.expired(f"batch {batch_id}")
            time.sleep(deadline.sleep_for(interval))

    # Templates and usage

    def create_template(
        self,
        name: str,
        body: str,
        header: str | None = None,
        footer: str | None = None,
        *,
        files: Files | None = None,
        assets: Sequence[str] | None = None,
        keep_files: Mapping[str, Any] | None = None,
    ) -> Template:
        """Store a template (the same `name` again stores its next version); `keep_files`
        (`{"version": 1, "names": [...]}`) keeps an earlier version's files by reference."""
        call = calls.create_template(
            name, body, header, footer, read_files(files), names(assets), keep_files
        )
        return self._run(call)

    def templates(self) -> Iterator[Template]:
        """The stored templates, most recently updated first."""
        return self._paged(calls.templates_page, None, largest=100)

    def template(self, template_id: str, version: int | None = None) -> Template:
        """One version of a stored template (the latest by default)."""
        return self._run(calls.get_template(template_id, version))

    def rename_template(self, template_id: str, name: str) -> Template:
        """Rename a stored template; its id and versions stay (`Conflict` if the name is
        another template's)."""
        return self._run(calls.rename_template(template_id, name))

    def template_named(self, name: str, version: int | None = None) -> Template:
        """One version of the stored template called `name` (the latest by default);
        `NotFound` if there is none of that name."""
        for found in self.templates():
            if found.name == name:
                return self.template(found.id, version)
        raise calls.no_template_named(name)

    def store_assets(self, files: Files) -> list[Asset]:
        """Store files as assets (each the next version of its name; the same bytes
        again, the same version): what was stored, in order."""
        return self._run(filecalls.store_assets(read_files(files)))

    def assets(self) -> Iterator[AssetSummary]:
        """The tenant's stored assets by name, each with its latest version."""
        return self._paged(filecalls.assets_page, None, largest=100)

    def asset_versions(self, name: str) -> list[Asset]:
        """Every version of a stored asset, oldest first."""
        return self._run(filecalls.asset_versions(name))

    def delete_asset(self, name: str) -> int:
        """Delete every version of a stored asset; how many there were."""
        return self._run(filecalls.delete_asset(name))

    def usage(self, month: str | None = None) -> Usage:
        """The tenant's usage of `month` (`YYYY-MM`, default this one)."""
        return self._run(calls.usage(month))

    # The I/O of listings and streams

    def _paged(
        self,
        page: Callable[[int, int], Call[Any]],
        limit: int | None,
        largest: int = calls.PAGE_MAX,
    ) -> Iterator[Any]:
        cursor = calls.Cursor(limit, largest)
        while size := cursor.size():
            found: Page[Any] = self._run(page(size, cursor.offset))
            yield from cursor.take(found)

    def _stream(self, path: str, deadline: Deadline, what: str) -> Iterator[SseMessage]:
        """The messages of a stream until it closes. After a broken connection it is
        opened again from the last message it had (`Last-Event-ID`, so nothing is missed
        or repeated), up to `calls.STREAM_RESUMES` times. Ends early, and the caller polls
        on, if this gateway has no such stream, has too many open, closes it, or it keeps
        breaking; `WaitTimeout` once `deadline` passes."""
        if not self._streams:
            return
        resume = calls.Resume()
        for attempt in range(calls.STREAM_RESUMES + 1):
            if attempt:
                time.sleep(deadline.sleep_for(calls.STREAM_RESUME_DELAY * attempt))
            resume.broke = False
            yield from self._connection(path, deadline, what, resume)
            if not resume.broke:
                return

    def _connection(
        self, path: str, deadline: Deadline, what: str, resume: calls.Resume
    ) -> Iterator[SseMessage]:
        """One connection of a stream, from `resume.last_id`; `resume.broke` if it broke."""
        request = calls.stream_call(path, resume.last_id).request(self._http, self.key)
        request.extensions["timeout"] = calls.stream_timeout(deadline).as_dict()
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError:
            resume.broke = True
            return
        parser = calls.SseParser()
        with contextlib.closing(response):
            if response.status_code != 200:
                response.read()
                self._streams = calls.stream_verdict(response) != calls.ABSENT
                return
            try:
                for line in response.iter_lines():
                    if (message := parser.feed(line)) is not None:
                        yield message
                    if deadline.passed():
                        raise deadline.expired(what)
            except httpx.TransportError:
                if deadline.passed():
                    raise deadline.expired(what) from None
                resume.broke, resume.last_id = True, parser.last_id or resume.last_id
