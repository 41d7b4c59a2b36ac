"""The request/answer layer both clients share: each API operation as a `Call` (what to
send, which answer decodes how), the answer checks, and the pure parts of waiting
(deadlines, backoff, Server-Sent Events). `Client` and `AsyncClient` only do the I/O.

Size: one `Call` per API operation with its answer's decoding, and the pure parts of waiting
both clients share. The Server-Sent Events parsing (`SseParser`, `stream_verdict`, `Resume`)
is the part that would split out next.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Generic, NamedTuple, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from pressroom.client import errors
from pressroom.client.models import Batch, BatchItem, Job, JobEvent, Template, Usage

T = TypeVar("T")
PAGE_MAX = 200
"""The largest `limit` of `GET /jobs` (the listings of batches and items take more)."""
STREAM_READ_TIMEOUT = 20.0
"""Longest silence on a stream before it is given up: the gateway sends `: keep-alive`
every 15 s while idle."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and how its (2xx) answer decodes."""

    method: str
    path: str
    decode: Callable[[bytes], T]
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    files: tuple[tuple[str, bytes], ...] = ()
    """Files sent with the body as `multipart/form-data`, the JSON as the part `part`."""
    part: str = "job"
    content: bytes | None = None
    """A raw body (its type in `headers`) instead of a JSON one."""

    def request(self, http: httpx.Client | httpx.AsyncClient, key: str | None) -> httpx.Request:
        """The httpx request of this call, with the key's `Authorization` header."""
        headers = {**self.headers, **auth_header(key)}
        content = self.content if self.body is None else msgspec.json.encode(self.body)
        if self.files:  # the JSON as a form field, each file a part named by its filename
            data = {self.part: content.decode()} if content is not None else None
            parts = [
                ("file", (name, data_, "application/octet-stream")) for name, data_ in self.files
            ]
            return http.build_request(
                self.method, self.path, params=self.params, data=data, files=parts, headers=headers
            )
        if self.body is not None:
            headers["Content-Type"] = "application/json"
        return http.build_request(
            self.method, self.path, params=self.params, content=content, headers=headers
        )


class Page(msgspec.Struct, Generic[T]):
    """One page of a listing: its entries and where the next page starts (None: last)."""

    entries: list[T]
    next_offset: int | None = None


class JobsPage(Page[Job]):
    entries: list[Job] = msgspec.field(name="jobs")


class ItemsPage(Page[BatchItem]):
    entries: list[BatchItem] = msgspec.field(name="items")


class TemplatesPage(Page[Template]):
    entries: list[Template] = msgspec.field(name="templates")


def auth_header(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def segment(value: str) -> str:
    """An id as one path segment (a `/` in it cannot reach another route)."""
    return quote(value, safe="")


def decoder(kind: type[T]) -> Callable[[bytes], T]:
    def decode(raw: bytes) -> T:
        try:
            return msgspec.json.decode(raw, type=kind)
        except msgspec.DecodeError as exc:
            raise errors.ProtocolError(f"unexpected answer: {exc}", type="protocol") from None

    return decode


def events_decoder(raw: bytes) -> list[JobEvent]:
    """`{"events": [...]}`, each entry also kept whole in `JobEvent.details`."""
    entries = decoder(dict[str, Any])(raw).get("events") or []
    return [job_event(entry) for entry in entries]


def job_event(entry: dict[str, Any]) -> JobEvent:
    try:
        event = msgspec.convert(entry, JobEvent)
    except msgspec.ValidationError as exc:
        raise errors.ProtocolError(f"unexpected event: {exc}", type="protocol") from None
    event.details = entry
    return event


def accepted(raw: bytes) -> Job:
    """`POST /jobs`' answer: its `url` is the job's address, not a download, so it goes."""
    job = decoder(Job)(raw)
    job.url = None
    return job


def accepted_batch(raw: bytes) -> Batch:
    batch = decoder(Batch)(raw)
    batch.url = None
    return batch


def nothing(raw: bytes) -> None:
    return None


def check(response: httpx.Response) -> None:
    """Raise the mapped error of an error answer (its body must have been read)."""
    if response.status_code >= 400:
        raise errors.from_answer(response.status_code, response.content, response.headers)


@contextlib.contextmanager
def transport_errors(base_url: str) -> Iterator[None]:
    """httpx's own failures (no connection, a timeout) as `Unavailable`."""
    try:
        yield
    except httpx.TimeoutException as exc:
        what = type(exc).__name__
        raise errors.Unavailable(
            f"{base_url} did not answer in time ({what})", type="timeout"
        ) from None
    except httpx.TransportError as exc:
        raise errors.Unavailable(
            f"cannot reach the gateway at {base_url}: {exc}", type="unreachable"
        ) from None


# The calls, one per API operation.


class Source(NamedTuple):
    """What a job renders: exactly one of `template`, `html`, `url`, `template_id` (or
    `template_name`), `markdown` (which `template` or a stored template may wrap;
    `stylesheet` styles it)."""

    template: str | None = None
    html: str | None = None
    url: str | None = None
    template_id: str | None = None
    template_version: int | None = None
    markdown: str | None = None
    stylesheet: str | None = None
    template_name: str | None = None
    """A stored template by its name, instead of `template_id`."""


def submit(
    source: Source,
    data: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    webhook_url: str | None = None,
    idempotency_key: str | None = None,
    files: tuple[tuple[str, bytes], ...] = (),
    assets: list[str] | None = None,
    preview: bool = False,
) -> Call[Job]:
    fields = {**source._asdict(), "data": data, "options": options, "webhook_url": webhook_url}
    fields["assets"] = assets
    fields["preview"] = preview or None
    body = {name: value for name, value in fields.items() if value is not None}
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call("POST", "/jobs", accepted, body=body, headers=headers, files=files)


def get_job(job_id: str) -> Call[Job]:
    return Call("GET", f"/jobs/{segment(job_id)}", decoder(Job))


def cancel(job_id: str) -> Call[Job]:
    return Call("DELETE", f"/jobs/{segment(job_id)}", decoder(Job))


def job_events(job_id: str) -> Call[list[JobEvent]]:
    return Call("GET", f"/jobs/{segment(job_id)}/events", events_decoder)


def jobs_page(status: str | None, limit: int, offset: int) -> Call[JobsPage]:
    params = listing_params(status, limit, offset)
    return Call("GET", "/jobs", decoder(JobsPage), params=params)


def listing_params(status: str | None, limit: int, offset: int) -> dict[str, str]:
    params = {"limit": str(limit), "offset": str(offset)}
    if status is not None:
        params["status"] = status
    return params


def submit_batch(body: Mapping[str, Any], idempotency_key: str | None) -> Call[Batch]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call("POST", "/batches", accepted_batch, body=dict(body), headers=headers)


def get_batch(batch_id: str) -> Call[Batch]:
    return Call("GET", f"/batches/{segment(batch_id)}", decoder(Batch))


class _Controlled(msgspec.Struct):
    status: str


def controlled(raw: bytes) -> str:
    return decoder(_Controlled)(raw).status


def control_batch(batch_id: str, action: str) -> Call[str]:
    """`pause`, `resume` or `cancel`; the batch's status the gateway answers."""
    return Call("POST", f"/batches/{segment(batch_id)}/{action}", controlled)


def batch_items_page(batch_id: str, status: str | None, limit: int, offset: int) -> Call[ItemsPage]:
    params = listing_params(status, limit, offset)
    path = f"/batches/{segment(batch_id)}/items"
    return Call("GET", path, decoder(ItemsPage), params=params)


def create_template(
    name: str,
    body: str,
    header: str | None = None,
    footer: str | None = None,
    files: tuple[tuple[str, bytes], ...] = (),
    assets: list[str] | None = None,
    keep_files: Mapping[str, Any] | None = None,
) -> Call[Template]:
    fields: dict[str, Any] = {
        "name": name, "body": body, "header": header, "footer": footer, "assets": assets,
        "keep_files": dict(keep_files) if keep_files is not None else None,
    }  # fmt: skip
    sent = {name: value for name, value in fields.items() if value is not None}
    return Call("POST", "/templates", decoder(Template), body=sent, files=files, part="template")


def templates_page(limit: int, offset: int) -> Call[TemplatesPage]:
    params = {"limit": str(limit), "offset": str(offset)}
    return Call("GET", "/templates", decoder(TemplatesPage), params=params)


def get_template(template_id: str, version: int | None = None) -> Call[Template]:
    params = {} if version is None else {"version": str(version)}
    return Call("GET", f"/templates/{segment(template_id)}", decoder(Template), params=params)


def rename_template(template_id: str, name: str) -> Call[Template]:
    path = f"/templates/{segment(template_id)}"
    return Call("PATCH", path, decoder(Template), body={"name": name})


def no_template_named(name: str) -> errors.NotFound:
    """What `template_named` raises when the tenant has no template called `name`."""
    return errors.NotFound(f"no template named {name!r}", type="not_found", status=404)


def usage(month: str | None = None) -> Call[Usage]:
    params = {} if month is None else {"month": month}
    return Call("GET", "/usage", decoder(Usage), params=params)


class Cursor:
    """Where a listing is: its next offset, and how many entries are still wanted
    (None: all). `size()` is the next page's `limit`, 0 once done."""

    def __init__(self, limit: int | None, largest: int = PAGE_MAX) -> None:
        self.offset, self.left, self.largest, self.done = 0, limit, largest, False

    def size(self) -> int:
        if self.done or self.left == 0:
            return 0
        return self.largest if self.left is None else max(1, min(self.left, self.largest))

    def take(self, page: Page[T]) -> list[T]:
        """The entries of `page` to yield; moves on to the next page."""
        entries = page.entries if self.left is None else page.entries[: self.left]
        if self.left is not None:
            self.left -= len(entries)
        self.done = page.next_offset is None or not page.entries
        self.offset = page.next_offset or self.offset
        return entries


def download_url(target: Job | Batch) -> str:
    """The signed link of a finished job or batch; `Conflict` if it has none (yet)."""
    if target.url:
        return target.url
    kind = "job" if isinstance(target, Job) else "batch"
    raise errors.Conflict(
        f"{kind} {target.id} is {target.status}: it has no file to download",
        type="not_done",
    )


class Sink:
    """Where a download goes: a path (written to `<path>.part`, renamed when whole, so a
    broken download leaves no half file under the name) or an open binary file."""

    def __init__(self, to: str | os.PathLike[str] | BinaryIO) -> None:
        self.to, self.written = to, 0
        self._file: BinaryIO | None = None

    def __enter__(self) -> Sink:
        if isinstance(self.to, str | os.PathLike):
            self._file = open(f"{os.fspath(self.to)}.part", "wb")
        return self

    def write(self, chunk: bytes) -> None:
        target = self._file if self._file is not None else self.to
        assert not isinstance(target, str | os.PathLike)
        target.write(chunk)
        self.written += len(chunk)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self._file is None:
            return
        self._file.close()
        part = f"{os.fspath(self.to)}.part"  # type: ignore[arg-type]
        if kind is None:
            os.replace(part, os.fspath(self.to))  # type: ignore[arg-type]
        else:
            os.unlink(part)


# Waiting: deadlines, backoff, streams.


class Deadline:
    """A point in time `seconds` from now (never, for None)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def passed(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def expired(self, what: str) -> errors.WaitTimeout:
        return errors.WaitTimeout(f"{what} did not end within {self.seconds:g} s", type="timeout")

    def sleep_for(self, delay: float) -> float:
        """`delay`, cut short by the deadline."""
        left = self.remaining()
        return delay if left is None else min(delay, left)


RETRIES = 2
"""How many times a client sends a request again, by default, after an answer or a
failure that says to try later (`retry_wait`)."""
RETRY_WAIT_MAX = 30.0
"""The longest a client waits by itself before sending a request again. A longer
`Retry-After` (a monthly quota, a full job log) is raised at once for the caller to
decide."""


def repeatable(call: Call[Any]) -> bool:
    """Whether sending `call` twice does what sending it once does: reads, cancels and
    deletes, and a POST with an `Idempotency-Key` (the gateway answers a repeat with the
    first one's job)."""
    return call.method in {"GET", "HEAD", "DELETE"} or "Idempotency-Key" in call.headers


def retry_wait(
    call: Call[Any], error: errors.PressroomError, attempt: int, retries: int
) -> float | None:
    """Seconds to wait before sending `call` again, after its try number `attempt` (0 is
    the first) failed with `error`; None: raise `error`, because it will not get better
    by itself, the `retries` are used up, or `call` might already have taken effect.

    - `RateLimited` (429) is an answer given before anything was done, so any call is
      sent again, after its `Retry-After`; without one, or with one over
      `RETRY_WAIT_MAX`, it is raised.
    - `Unavailable` (a 503 or other 5xx, no connection, a timeout) may come after the
      gateway acted (a job stored whose answer was lost), so only a `repeatable` call is
      sent again: after the answer's `Retry-After`, else after a backoff from 0.5 s
      doubling to 8 s, with jitter so that many clients do not all come back at once.
    """
    if attempt >= retries or isinstance(error, errors.WaitTimeout):
        return None
    if isinstance(error, errors.RateLimited):
        wait = error.retry_after
    elif isinstance(error, errors.Unavailable) and repeatable(call):
        wait = error.retry_after
        if wait is None:
            wait = min(8.0, 0.5 * 2**attempt) * random.uniform(0.5, 1.0)
    else:
        return None
    return wait if wait is not None and 0 <= wait <= RETRY_WAIT_MAX else None


POLL_FIRST = 0.1
"""Seconds before the second look at a job that has not ended."""
ENDED_POLL_FIRST = 0.005
"""The same once the job's stream told its end (read from the log): its row, projected
into PostgreSQL, follows within milliseconds (the projector applies a single job's end
at once), and a merge that takes 0.3 s should not wait tens of milliseconds more for
it. The doubling keeps the extra looks to a few."""


def backoff(first: float = POLL_FIRST, cap: float = 2.0) -> Iterator[float]:
    """Delays between polls: `first`, doubling, never more than `cap`."""
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * 2)


def stream_timeout(deadline: Deadline) -> httpx.Timeout:
    """A stream's timeouts: each read waits for the next keep-alive at most, and no
    longer than the deadline."""
    left = deadline.remaining()
    read = STREAM_READ_TIMEOUT if left is None else max(0.05, min(left, STREAM_READ_TIMEOUT))
    return httpx.Timeout(10.0, read=read)


STREAM_RESUMES = 3
"""How many times a client opens a broken stream again (from its last message) before it
polls instead."""
STREAM_RESUME_DELAY = 0.25
"""Seconds before the first reopening of a broken stream; the next wait twice, three times
as long."""


@dataclass
class Resume:
    """Where a stream stands across its connections: the id of the last message it had,
    and whether its last connection broke (so it is opened again from there)."""

    last_id: str | None = None
    broke: bool = False


def stream_call(path: str, last_event_id: str | None = None) -> Call[None]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    return Call("GET", path, nothing, headers=headers)


OPEN, ABSENT, BUSY = "open", "absent", "busy"


def stream_verdict(response: httpx.Response) -> str:
    """`OPEN`; `ABSENT` if this gateway has no such stream route (an older one), `BUSY`
    if the tenant has too many streams open: then the caller polls instead. An unknown
    job or batch, and any other error, is raised (the body must have been read)."""
    status = response.status_code
    if status == 200:
        return OPEN
    if status == 429:
        return BUSY
    if status in {405, 501} or (status == 404 and route_missing(response)):
        return ABSENT
    check(response)
    raise errors.ProtocolError(f"the stream answered HTTP {status}", type="protocol")


def route_missing(response: httpx.Response) -> bool:
    """A 404 of the router itself (`error.type` `http`), not of an unknown id."""
    return errors.from_answer(404, response.content, {}).type == "http"


class SseMessage(msgspec.Struct):
    event: str = "message"
    data: str = ""
    id: str | None = None

    def json(self) -> Any:
        return msgspec.json.decode(self.data) if self.data else None


class SseParser:
    """Server-Sent Events, one line at a time (the WHATWG rules this API uses: `id`,
    `event`, `data` lines; a blank line ends a message; `:` starts a comment)."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.last_id: str | None = None

    def feed(self, line: str) -> SseMessage | None:
        """The message that `line` completes, if any."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None

    def _dispatch(self) -> SseMessage | None:
        event, data, ident = self._event or "message", self._data, self._id
        self._event, self._data, self._id = "", [], None
        if ident is not None:
            self.last_id = ident
        if not data:
            return None
        return SseMessage(event, "\n".join(data), ident)


def job_status_of(message: SseMessage) -> str | None:
    """The job's status after a job-stream message (None if it does not say)."""
    data = message.json()
    return data.get("status") if isinstance(data, dict) else None


def batch_of(message: SseMessage) -> Batch | None:
    """The batch document a batch-stream message carries (None for another kind)."""
    try:
        return msgspec.json.decode(message.data, type=Batch)
    except msgspec.DecodeError:
        return None
