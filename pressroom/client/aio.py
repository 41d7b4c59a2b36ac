"""`AsyncClient`: the API from asyncio code; the same calls as `Client`, awaited.

Size: one method per API operation, each only the awaited I/O around a `calls.Call`; its
length follows the API's breadth, and it mirrors `Client` method for method, which a split
by operation would blur.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
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


class AsyncClient:
    """A Pressroom gateway from asyncio code, acting for the tenant of `key`.

    >>> from pressroom.client import AsyncClient
    >>> async def hello() -> None:  # doctest: +SKIP
    ...     async with AsyncClient("http://127.0.0.1:8080", "prk_…") as pressroom:
    ...         job = await pressroom.submit(html="<h1>Hi</h1>")
    ...         job = await pressroom.wait(job.id, timeout=60)
    ...         await pressroom.download(job, "hi.pdf")

    Every method is the awaitable twin of `Client`'s (listings and `progress()` are
    async iterators); both build their requests and read their answers in
    `pressroom.client.calls`.
    """

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = calls.RETRIES,
    ) -> None:
        self.url, self.key, self.retries = url.rstrip("/"), key, retries
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport)
        self._streams = True  # False once the gateway said it has no stream routes

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> AsyncClient:
        """As `Client.from_env`."""
        found = target.resolve(None, None, os.environ if environ is None else environ)
        return cls(found.url, found.key, **kwargs)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: Call[T]) -> T:
        """`call`'s decoded answer; sent again while `calls.retry_wait` says to."""
        for attempt in itertools.count():
            try:
                with calls.transport_errors(self.url):
                    response = await self._http.send(call.request(self._http, self.key))
                calls.check(response)
                return call.decode(response.content)
            except errors.PressroomError as exc:
                wait = calls.retry_wait(call, exc, attempt, self.retries)
                if wait is None:
                    raise
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # itertools.count() never ends

    # Jobs

    async def submit(
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
        """As `Client.submit`."""
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
        return await self._run(call)

    async def get(self, job_id: str) -> Job:
        return await self._run(calls.get_job(job_id))

    async def cancel(self, job_id: str) -> Job:
        return await self._run(calls.cancel(job_id))

    async def events(self, job_id: str) -> list[JobEvent]:
        return await self._run(calls.job_events(job_id))

    def jobs(self, status: str | None = None, limit: int | None = None) -> AsyncIterator[Job]:
        """As `Client.jobs`: `async for job in pressroom.jobs(status="failed"): …`."""
        return self._paged(lambda size, offset: calls.jobs_page(status, size, offset), limit)

    async def wait(self, job_id: str, timeout: float | None = 300.0) -> Job:
        """As `Client.wait`; the deadline holds exactly (the stream is read under it)."""
        deadline = Deadline(timeout)
        try:
            async with asyncio.timeout(deadline.remaining()):
                ended = await self._follow_job(job_id, deadline)
                first = calls.ENDED_POLL_FIRST if ended else calls.POLL_FIRST
                return await self._poll_job(job_id, deadline, first)
        except TimeoutError:
            raise deadline.expired(f"job {job_id}") from None

    async def _follow_job(self, job_id: str, deadline: Deadline) -> bool:
        """Whether the job's stream told its end."""
        path = f"/jobs/{calls.segment(job_id)}/stream"
        async for message in self._stream(path, deadline, f"job {job_id}"):
            if calls.job_status_of(message) in {"done", "failed", "cancelled"}:
                return True
        return False

    async def _poll_job(
        self, job_id: str, deadline: Deadline, first: float = calls.POLL_FIRST
    ) -> Job:
        for delay in calls.backoff(first):
            job = await self.get(job_id)
            if job.terminal:
                return job
            if deadline.passed():
                raise deadline.expired(f"job {job_id}")
            await asyncio.sleep(deadline.sleep_for(delay))
        raise AssertionError("unreachable")  # backoff() never ends

    async def download(self, job: str | Job | Batch, to: str | os.PathLike[str] | BinaryIO) -> int:
        """As `Client.download`."""
        found = await self.get(job) if isinstance(job, str) else job
        url = calls.download_url(found)
        with calls.transport_errors(self.url):
            async with self._http.stream("GET", url) as response:
                if response.status_code >= 400:
                    await response.aread()
                    calls.check(response)
                with calls.Sink(to) as sink:
                    async for chunk in response.aiter_bytes():
                        sink.write(chunk)
        return sink.written

    async def download_file(self, file: BundledFile, to: str | os.PathLike[str] | BinaryIO) -> int:
        """As `Client.download_file`."""
        if not file.url:
            raise ValueError(f"{file.name}: no link to its bytes; read the template again")
        with calls.transport_errors(self.url):
            async with self._http.stream("GET", file.url) as response:
                if response.status_code >= 400:
                    await response.aread()
                    calls.check(response)
                with calls.Sink(to) as sink:
                    async for chunk in response.aiter_bytes():
                        sink.write(chunk)
        return sink.written

    # PDF tools (`pdf.py`)

    async def pdf_job(
        self,
        inputs: Sequence[pdf.InputLike],
        steps: Sequence[Mapping[str, Any]],
        *,
        files: Sequence[pdf.Source] = (),
        webhook_url: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """As `Client.pdf_job` (the files are read before the request is sent)."""
        parts, _ = pdf.parts_of(inputs, files)
        return await self._run(pdf.pdf_job(parts, steps, webhook_url, idempotency_key))

    async def pdf_step(self, name: str, *inputs: pdf.InputLike, **fields: Any) -> Job:
        """As `Client.pdf_step`."""
        return await self.pdf_job(inputs, [pdf.step(name, **fields)])

    async def merge(self, *inputs: pdf.InputLike, outline: bool = True) -> Job:
        """As `Client.merge`."""
        return await self.pdf_step("merge", *inputs, outline=outline)

    async def split(
        self,
        source: pdf.InputLike,
        *,
        ranges: Sequence[str] | None = None,
        every: int | None = None,
        outline: bool | None = None,
    ) -> Job:
        """As `Client.split`."""
        found = list(ranges) if ranges is not None else None
        return await self.pdf_step("split", source, ranges=found, every=every, outline=outline)

    async def validate(self, source: pdf.Source, password: str | None = None) -> dict[str, Any]:
        """As `Client.validate`."""
        name, data = pdf.read(source)
        return await self._run(pdf.validate(data, name, password))

    async def report(self, job: str | Job) -> dict[str, Any]:
        """As `Client.report`."""
        return await self._run(pdf.report(job if isinstance(job, str) else job.id))

    # Batches

    async def submit_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Batch:
        """As `Client.submit_batch`."""
        body = {"items": list(items), **{k: v for k, v in fields.items() if v is not None}}
        return await self._run(calls.submit_batch(body, idempotency_key))

    async def batch(self, batch_id: str) -> Batch:
        return await self._run(calls.get_batch(batch_id))

    async def pause_batch(self, batch_id: str) -> str:
        """No item of the batch starts from about a second on; the status answered."""
        return await self._run(calls.control_batch(batch_id, "pause"))

    async def resume_batch(self, batch_id: str) -> str:
        """The batch goes on where it stopped; the status answered."""
        return await self._run(calls.control_batch(batch_id, "resume"))

    async def cancel_batch(self, batch_id: str) -> str:
        """Unfinished items are cancelled and the batch ends `cancelled`."""
        return await self._run(calls.control_batch(batch_id, "cancel"))

    def batch_items(self, batch_id: str, status: str | None = None) -> AsyncIterator[BatchItem]:
        def page(size: int, offset: int) -> Call[calls.ItemsPage]:
            return calls.batch_items_page(batch_id, status, size, offset)

        return self._paged(page, None, largest=1000)

    async def progress(
        self, batch_id: str, timeout: float | None = None, interval: float = 1.0
    ) -> AsyncIterator[Batch]:
        """As `Client.progress`: `async for batch in pressroom.progress(id): …`."""
        deadline = Deadline(timeout)
        path = f"/batches/{calls.segment(batch_id)}/stream"
        async for message in self._stream(path, deadline, f"batch {batch_id}"):
            batch = calls.batch_of(message)
            if batch is not None:
                yield batch
                if batch.terminal:
                    return
        async for batch in self._poll_batch(batch_id, deadline, interval):
            yield batch

    async def _poll_batch(
        self, batch_id: str, deadline: Deadline, interval: float
    ) -> AsyncIterator[Batch]:
        while True:
            batch = await self.batch(batch_id)
            yield batch
            if batch.terminal:
                return
            if deadline.passed():
                raise deadline.expired(f"batch {batch_id}")
            await asyncio.sleep(deadline.sleep_for(interval))

    # Templates and usage

    async def create_template(
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
        call = calls.create_template(
            name, body, header, footer, read_files(files), names(assets), keep_files
        )
        return await self._run(call)

    def templates(self) -> AsyncIterator[Template]:
        return self._paged(calls.templates_page, None, largest=100)

    async def template(self, template_id: str, version: int | None = None) -> Template:
        return await self._run(calls.get_template(template_id, version))

    async def rename_template(self, template_id: str, name: str) -> Template:
        """As `Client.rename_template`."""
        return await self._run(calls.rename_template(template_id, name))

    async def template_named(self, name: str, version: int | None = None) -> Template:
        """As `Client.template_named`."""
        async for found in self.templates():
            if found.name == name:
                return await self.template(found.id, version)
        raise calls.no_template_named(name)

    async def store_assets(self, files: Files) -> list[Asset]:
        """As `Client.store_assets`."""
        return await self._run(filecalls.store_assets(read_files(files)))

    def assets(self) -> AsyncIterator[AssetSummary]:
        return self._paged(filecalls.assets_page, None, largest=100)

    async def asset_versions(self, name: str) -> list[Asset]:
        return await self._run(filecalls.asset_versions(name))

    async def delete_asset(self, name: str) -> int:
        return await self._run(filecalls.delete_asset(name))

    async def usage(self, month: str | None = None) -> Usage:
        return await self._run(calls.usage(month))

    # The I/O of listings and streams

    async def _paged(
        self,
        page: Callable[[int, int], Call[Any]],
        limit: int | None,
        largest: int = calls.PAGE_MAX,
    ) -> AsyncIterator[Any]:
        cursor = calls.Cursor(limit, largest)
        while size := cursor.size():
            found: Page[Any] = await self._run(page(size, cursor.offset))
            for entry in cursor.take(found):
                yield entry

    async def _stream(self, path: str, deadline: Deadline, what: str) -> AsyncIterator[SseMessage]:
        """As `Client._stream`."""
        if not self._streams:
            return
        resume = calls.Resume()
        for attempt in range(calls.STREAM_RESUMES + 1):
            if attempt:
                await asyncio.sleep(deadline.sleep_for(calls.STREAM_RESUME_DELAY * attempt))
            resume.broke = False
            async for message in self._connection(path, deadline, what, resume):
                yield message
            if not resume.broke:
                return

    async def _connection(
        self, path: str, deadline: Deadline, what: str, resume: calls.Resume
    ) -> AsyncIterator[SseMessage]:
        """As `Client._connection`."""
        request = calls.stream_call(path, resume.last_id).request(self._http, self.key)
        request.extensions["timeout"] = calls.stream_timeout(deadline).as_dict()
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError:
            resume.broke = True
            return
        parser = calls.SseParser()
        try:
            if response.status_code != 200:
                await response.aread()
                self._streams = calls.stream_verdict(response) != calls.ABSENT
                return
            async for line in response.aiter_lines():
                if (message := parser.feed(line)) is not None:
                    yield message
                if deadline.passed():
                    raise deadline.expired(what)
        except httpx.TransportError:
            if deadline.passed():
                raise deadline.expired(what) from None
            resume.broke, resume.last_id = True, parser.last_id or resume.last_id
        finally:
            await response.aclose()
