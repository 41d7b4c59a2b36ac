"""What each public route takes and answers: one small entry per route, which
`openapi.py` turns into the OpenAPI document, read top to bottom like docs/api.md.

Entries are keyed by method and path as docs/api.md names them (`/jobs/{id}`); the
router's own names (`/jobs/{job_id}`) are mapped by `public_path`. Bodies and answers are
the msgspec Structs the handlers decode and encode (`requests.py`, `answers.py`,
`jobanswers.py`, the admin and account modules), so the schemas are the code's; what the
table adds is what a type cannot say: a summary, the parameters, the statuses and an
example. Which key a route needs, and its scope, are read from the route's own guard
(`auth.guard_of`).

Size: one entry per public route and nothing else; a split would scatter one table that is
read top to bottom.
"""

from __future__ import annotations

from services.core.model import outputs
from services.core.model.status import BatchStatus, JobStatus
from services.gateway import (
    account,
    admin,
    adminanswers,
    answers,
    assetcontract,
    batches,
    jobanswers,
    joblist,
    pdfcontract,
    requests,
    streamdocs,
    templaterequests,
    templates,
)
from services.gateway.gotenberg.docs import FORMS
from services.gateway.routedocs import (
    Body,
    Media,
    Param,
    Route,
    page_params,
    path_id,
    query_enum,
    query_int,
)
from services.gateway.routedocs import public_path as public_path  # docs/api.md's names

IDEMPOTENCY_KEY = Param(
    "Idempotency-Key",
    "header",
    {"type": "string", "minLength": 1, "maxLength": 255},
    "the same key with the same body gives the first answer back, with another body a 422",
)
MONTH = Param(
    "month",
    "query",
    {"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}$"},
    "the month, `YYYY-MM` (UTC); this month by default",
)
LAST_EVENT_ID = Param(
    "Last-Event-ID",
    "header",
    {"type": "string", "pattern": r"^[0-9]{1,19}$"},
    "resume after this event id (a stream sequence): only later events are sent",
)
LAST_EVENT_QUERY = Param(
    "last_event_id",
    "query",
    {"type": "string", "pattern": r"^[0-9]{1,19}$"},
    "the same as the `Last-Event-ID` header, for clients that cannot set it",
)

JOB_STATUSES = [str(s) for s in JobStatus]
BATCH_STATUSES = [str(s) for s in BatchStatus]
JOB_ID = path_id("job", requests.JOB_ID)
BATCH_ID = path_id("batch", requests.BATCH_ID)
TENANT_ID = path_id("tenant")

EVENTS_TEXT = (
    "Server-Sent Events (`text/event-stream`): messages of `id: <stream sequence>`, "
    "`event: <name>` and `data: <one-line JSON>` lines, `: keep-alive` comments while idle; "
    "the stream closes after the terminal event, or with a last `event: error` (data "
    '`{"error": {...}}`) once its key is revoked. The schema lists the messages in order'
)
JOB_STREAM = Media(
    ("text/event-stream",),
    EVENTS_TEXT,
    streamdocs.stream_of("JobStreamMessage"),
    streamdocs.JOB_EXAMPLE,
)
BATCH_STREAM = Media(
    ("text/event-stream",),
    EVENTS_TEXT,
    streamdocs.stream_of("BatchStreamMessage"),
    streamdocs.BATCH_EXAMPLE,
)
HTML = Media(("text/html",), "an HTML page")
DOCUMENT_TYPES = tuple(outputs.CONTENT_TYPES.values())
"""What a job's document is: a PDF or an image (`options.output`)."""
STATIC = Media(("text/html", "text/javascript", "text/css"), "a static file")

READ_ERRORS = (401, 403, 404, 503)
WRITE_ERRORS = (400, 401, 403, 408, 413, 503)

JOB_EXAMPLE = {
    "template": "<h1>Invoice {{ number }}</h1><p>{{ customer }}</p>",
    "data": {"number": "2026-0042", "customer": "Ana"},
    "options": {"format": "A4", "margin": {"top": "15mm", "bottom": "15mm"}},
    "webhook_url": "https://example.com/hooks/pressroom",
}
MARKDOWN_EXAMPLE = {
    "markdown": "# Delivery note 2041\n\n| Item | Qty |\n|------|----:|\n| Paper A4 | 12 |\n",
    "stylesheet": "th { background: #eef }",
    "options": {"format": "A5"},
}
BATCH_EXAMPLE = {
    "template": "<h1>Invoice {{ number }}</h1>",
    "items": [
        {"data": {"number": 1}, "filename": "invoice-1.pdf"},
        {"data": {"number": 2}, "filename": "invoice-2.pdf"},
    ],
    "output": "zip",
}
BATCH_LINES = (
    '{"template": "<h1>Invoice {{ number }}</h1>", "output": "zip"}\n'
    '{"data": {"number": 1}, "filename": "invoice-1.pdf"}\n'
    '{"data": {"number": 2}, "filename": "invoice-2.pdf"}\n'
)
NAMED_TEMPLATE_EXAMPLE = {
    "template_name": "invoice",
    "template_version": 1,
    "data": {"number": "2026-0042", "customer": "Ana"},
}
TEMPLATE_EXAMPLE = {
    "name": "invoice",
    "body": "<h1>Invoice {{ number }}</h1>",
    "footer": '<div style="font-size:8px">page <span class="pageNumber"></span></div>',
}

JOBS: dict[tuple[str, str], Route] = {
    ("POST", "/jobs"): Route(
        "Submit a job",
        "jobs",
        {202: jobanswers.JobAccepted},
        (*WRITE_ERRORS, 404, 422, 429),
        params=(IDEMPOTENCY_KEY,),
        body=Body(
            requests.JobRequest,
            JOB_EXAMPLE,
            more_examples=(
                ("markdown", "A Markdown document with a table", MARKDOWN_EXAMPLE),
                (
                    "template_name",
                    "Version 1 of the stored template `invoice`",
                    NAMED_TEMPLATE_EXAMPLE,
                ),
            ),
            multipart=assetcontract.JOB_FILES,
            multipart_example=assetcontract.JOB_FILES_EXAMPLE,
        ),
        description="Exactly one of `template`, `template_id` (or `template_name`), `html`, "
        "`url` and `markdown` is the source (`template` or a stored template may wrap "
        "`markdown`, given its HTML as `content`). A stored template is named by its id or "
        "by the name it was stored under, the caller's own only; `template_version` picks a "
        "version (the latest by default). 202 once the job is durable in the log; poll `url`, "
        "or follow "
        "`/jobs/{id}/stream`. As `multipart/form-data`, the part `job` is the JSON and "
        "every other part a file the page refers to by its filename; `template_files` gives "
        "an inline template a stored version's files (404 for a template the tenant does not "
        "have)." + pdfcontract.PDF_JOB_TEXT,
    ),
    ("GET", "/jobs"): Route(
        "List the tenant's jobs, newest first",
        "jobs",
        {200: jobanswers.JobPage},
        (400, 401, 403, 503),
        params=(
            query_enum("status", JOB_STATUSES, "only jobs with this status"),
            *page_params(joblist.MAX_LIMIT, joblist.MAX_OFFSET, joblist.DEFAULT_LIMIT),
            Param(
                "q",
                "query",
                {"type": "string", "pattern": "^[A-Za-z0-9_-]{0,64}$"},
                "jobs whose id starts with this",
            ),
        ),
        description="Single jobs only (a batch's items are listed by its `/items`).",
    ),
    ("GET", "/jobs/{id}"): Route(
        "A job's status",
        "jobs",
        {200: jobanswers.Job},
        READ_ERRORS,
        params=(JOB_ID,),
        description="`done` carries a fresh signed `url`, `failed` the root-cause `error`.",
    ),
    ("DELETE", "/jobs/{id}"): Route(
        "Cancel an unfinished job, or delete a finished job's file",
        "jobs",
        {200: jobanswers.JobRemoved},
        READ_ERRORS,
        params=(JOB_ID,),
        description="Idempotent.",
    ),
    ("GET", "/jobs/{id}/events"): Route(
        "A job's timeline, read from the log",
        "jobs",
        {200: jobanswers.Timeline},
        READ_ERRORS,
        params=(JOB_ID,),
    ),
    ("GET", "/jobs/{id}/stream"): Route(
        "A job's events as they happen (Server-Sent Events)",
        "jobs",
        {200: JOB_STREAM},
        (400, *READ_ERRORS, 429),
        params=(JOB_ID, LAST_EVENT_ID, LAST_EVENT_QUERY),
        description="Each message's data is a timeline entry plus the job's `status` "
        "after it (and `url` on `done`). At most `PRESSROOM_MAX_STREAMS` open streams "
        "per tenant (429 `too_many_streams`).",
    ),
    ("GET", "/jobs/{id}/webhooks"): Route(
        "Every delivery attempt of a job's webhook",
        "jobs",
        {200: jobanswers.WebhookAttempts},
        READ_ERRORS,
        params=(JOB_ID,),
    ),
    ("POST", "/jobs/{id}/webhooks/redeliver"): Route(
        "Send a finished job's webhook again",
        "jobs",
        {202: jobanswers.Redelivery},
        (*READ_ERRORS, 409),
        params=(JOB_ID,),
        description="Same `webhook-id`, same retry schedule; 409 if the job has not "
        "finished or has no webhook.",
    ),
    ("GET", "/jobs/{id}/diagnostics"): Route(
        "What the page did on each failed attempt (or on one that asked)",
        "jobs",
        {200: jobanswers.Diagnostics},
        READ_ERRORS,
        params=(JOB_ID,),
        description="Console lines, uncaught errors, requests with their refusals, the "
        "pending `wait_for` and a signed screenshot URL, per attempt; 404 `no_diagnosis` "
        "when no attempt kept one.",
    ),
    ("GET", "/files/{key}"): Route(
        "Download a document through its signed link (local storage only)",
        "jobs",
        {
            200: Media(DOCUMENT_TYPES, "the document"),
            206: Media(DOCUMENT_TYPES, "the part a `Range` asked for"),
        },
        (400, 404, 416),
        params=(
            Param(
                "key",
                "path",
                {"type": "string"},
                "the object's key, as the signed link spells it (it may hold `/`)",
                required=True,
            ),
            Param("expires", "query", {"type": "string"}, "the link's expiry (Unix time)"),
            Param("sig", "query", {"type": "string"}, "the link's signature"),
            Param(
                "Range",
                "header",
                {"type": "string", "pattern": "^bytes=[0-9]*-[0-9]*$"},
                "one range of bytes (`bytes=0-1023`, `bytes=1024-`, `bytes=-512`)",
            ),
        ),
        description="The signed link is its own permission: no key needed.",
    ),
}

BATCHES: dict[tuple[str, str], Route] = {
    ("POST", "/batches"): Route(
        "Submit a batch: many documents, one archive",
        "batches",
        {202: jobanswers.BatchAccepted},
        (*WRITE_ERRORS, 422, 429),
        params=(IDEMPOTENCY_KEY,),
        body=Body(requests.BatchRequest, BATCH_EXAMPLE, lines_example=BATCH_LINES),
        description="JSON, or JSON Lines (`application/x-ndjson`, `application/jsonl`): "
        "the batch's fields on the first line, then one item per line. The body may be "
        "up to `PRESSROOM_MAX_BATCH_BYTES`.",
    ),
    ("GET", "/batches"): Route(
        "List the tenant's batches, newest first",
        "batches",
        {200: jobanswers.BatchPage},
        (400, 401, 403, 503),
        params=(
            query_enum("status", BATCH_STATUSES, "only batches with this status"),
            *page_params(batches.MAX_LIST_LIMIT, batches.MAX_OFFSET),
        ),
    ),
    ("GET", "/batches/{id}"): Route(
        "A batch's progress",
        "batches",
        {200: jobanswers.Batch},
        READ_ERRORS,
        params=(BATCH_ID,),
    ),
    ("GET", "/batches/{id}/items"): Route(
        "Every item's outcome, by index",
        "batches",
        {200: jobanswers.ItemPage},
        (400, *READ_ERRORS),
        params=(
            BATCH_ID,
            query_enum("status", JOB_STATUSES, "only items with this status"),
            *page_params(batches.MAX_LIST_LIMIT, batches.MAX_OFFSET),
        ),
    ),
    ("GET", "/batches/{id}/events"): Route(
        "A batch's own timeline, read from the log",
        "batches",
        {200: jobanswers.Timeline},
        READ_ERRORS,
        params=(BATCH_ID,),
    ),
    ("GET", "/batches/{id}/stream"): Route(
        "A batch's progress as it happens (Server-Sent Events)",
        "batches",
        {200: BATCH_STREAM},
        (400, *READ_ERRORS, 429),
        params=(BATCH_ID, LAST_EVENT_ID, LAST_EVENT_QUERY),
        description="`progress` messages carry the batch as `GET /batches/{id}` shows it, "
        "at most once a second; each batch event is a message too.",
    ),
    ("GET", "/batches/{id}/webhooks"): Route(
        "Every delivery attempt of a batch's webhooks",
        "batches",
        {200: jobanswers.WebhookAttempts},
        READ_ERRORS,
        params=(BATCH_ID,),
    ),
    **{
        ("POST", f"/batches/{{id}}/{action}"): Route(
            f"{action.capitalize()} a batch",
            "batches",
            {200: jobanswers.BatchControl, 202: jobanswers.BatchControl},
            (*READ_ERRORS, 409),
            params=(BATCH_ID,),
            description=f"Idempotent; 409 once the batch has ended{note}.",
        )
        for action, note in (
            ("pause", ", or after a cancel"),
            ("resume", ", or after a cancel"),
            ("cancel", ""),
        )
    },
}

TEMPLATES: dict[tuple[str, str], Route] = {
    ("POST", "/templates"): Route(
        "Store a template, or the next version of one with that name",
        "templates",
        {201: answers.TemplateCreated},
        (*WRITE_ERRORS, 404, 409, 429),
        body=Body(
            templaterequests.TemplateRequest,
            TEMPLATE_EXAMPLE,
            multipart=assetcontract.TEMPLATE_FILES,
            multipart_example=assetcontract.TEMPLATE_FILES_EXAMPLE,
        ),
        description="The body, header and footer must compile as Jinja2, within the "
        "tenant's share of the gateway's template workers (429 `compile_limited` over it). "
        "`keep_files` keeps an earlier version's files by reference (404 for a version the "
        'tenant does not have). With `"new": true` a name the tenant has already is a 409 '
        "`conflict` (field `name`) instead of its next version.",
    ),
    ("GET", "/templates"): Route(
        "List the tenant's templates, most recently updated first",
        "templates",
        {200: answers.TemplatePage},
        (400, 401, 403, 503),
        params=page_params(templates.MAX_LIST_LIMIT, templates.MAX_OFFSET),
    ),
    ("GET", "/templates/{id}"): Route(
        "One version of a template (the latest by default) and the list of versions",
        "templates",
        {200: answers.Template},
        (400, *READ_ERRORS),
        params=(
            path_id("template", requests.TEMPLATE_ID),
            query_int("version", 1, requests.MAX_VERSION, None, "which version"),
        ),
    ),
    ("PATCH", "/templates/{id}"): Route(
        "Rename a template, keeping its id and every version",
        "templates",
        {200: answers.TemplateSummary},
        (400, 401, 403, 404, 409, 503),
        params=(path_id("template", requests.TEMPLATE_ID),),
        body=Body(templaterequests.RenameRequest, {"name": "invoice-2027"}),
        description="Jobs naming the template by id are unaffected; `template_name` "
        "finds it by its new name from now on. 409 if another of the tenant's templates "
        "has the name.",
    ),
}

ACCOUNT: dict[tuple[str, str], Route] = {
    ("GET", "/usage"): Route(
        "The tenant's usage of a month",
        "account",
        {200: answers.TenantUsage},
        (400, 401, 403, 503),
        params=(MONTH,),
    ),
    ("POST", "/webhook-secrets"): Route(
        "A new webhook signing secret (shown once), or one of the tenant's choosing",
        "account",
        {201: answers.SecretCreated},
        WRITE_ERRORS,
        body=Body(account.SecretRequest, {}, required=False),
        description=f"At most {account.MAX_SECRETS} secrets; every one signs. With "
        "`retire_others_after` (seconds) it is a rotation: the other secrets go on signing "
        "beside the new one for that long, then stop.",
    ),
    ("GET", "/webhook-secrets"): Route(
        "The tenant's signing secrets (ids and times, never a secret)",
        "account",
        {200: answers.SecretList},
        (401, 403, 503),
    ),
    ("DELETE", "/webhook-secrets/{id}"): Route(
        "Delete a signing secret (not the last one)",
        "account",
        {204: None},
        (*READ_ERRORS, 409),
        params=(path_id("secret"),),
    ),
}

ADMIN_ERRORS = (401, 403, 503)
ADMIN: dict[tuple[str, str], Route] = {
    ("POST", "/admin/tenants"): Route(
        "Create a tenant (with its first signing secret, shown once)",
        "admin",
        {201: adminanswers.TenantCreated},
        (400, 408, 409, 413, *ADMIN_ERRORS),
        body=Body(
            admin.TenantRequest,
            {"name": "acme", "rate_limit": {"per_second": 10, "burst": 50}},
        ),
    ),
    ("GET", "/admin/tenants"): Route(
        "Every tenant", "admin", {200: adminanswers.TenantList}, ADMIN_ERRORS
    ),
    ("GET", "/admin/tenants/{id}"): Route(
        "One tenant",
        "admin",
        {200: adminanswers.Tenant},
        (404, *ADMIN_ERRORS),
        params=(TENANT_ID,),
    ),
    ("PATCH", "/admin/tenants/{id}"): Route(
        "Change a tenant's limits (`null`: back to the default)",
        "admin",
        {200: adminanswers.Tenant},
        (400, 404, 408, 413, *ADMIN_ERRORS),
        params=(TENANT_ID,),
        body=Body(admin.TenantChange, {"monthly_quota": 10000}),
    ),
    ("POST", "/admin/tenants/{id}/keys"): Route(
        "Create an API key (shown once)",
        "admin",
        {201: adminanswers.KeyCreated},
        (400, 404, 408, 413, *ADMIN_ERRORS),
        params=(TENANT_ID,),
        body=Body(admin.KeyRequest, {"scopes": ["jobs:read", "jobs:write"]}, required=False),
    ),
    ("GET", "/admin/tenants/{id}/keys"): Route(
        "A tenant's keys (never a key, only its prefix)",
        "admin",
        {200: adminanswers.KeyList},
        (404, *ADMIN_ERRORS),
        params=(TENANT_ID,),
    ),
    ("DELETE", "/admin/keys/{key_id}"): Route(
        "Revoke an API key",
        "admin",
        {204: None},
        (404, *ADMIN_ERRORS),
        params=(Param("key_id", "path", {"type": "string"}, "the key's id", required=True),),
    ),
    ("GET", "/admin/usage"): Route(
        "Every tenant's usage of a month",
        "admin",
        {200: adminanswers.AllUsage},
        (400, *ADMIN_ERRORS),
        params=(MONTH,),
    ),
}

META: dict[tuple[str, str], Route] = {
    ("GET", "/healthz"): Route("Liveness: the event loop answers", "meta", {200: answers.Health}),
    ("GET", "/readyz"): Route(
        "Readiness: NATS connected (PostgreSQL's state reported, not required)",
        "meta",
        {200: answers.Readiness, 503: answers.Readiness},
    ),
    ("GET", "/openapi.json"): Route(
        "This document (OpenAPI 3.1)",
        "meta",
        {200: Media(("application/json",), "the OpenAPI document", {"type": "object"})},
    ),
    ("GET", "/docs"): Route("This document as a page", "meta", {200: HTML}),
    ("GET", "/docs/{file}"): Route(
        "The documentation page's script and style sheet",
        "meta",
        {200: STATIC},
        (404,),
        params=(Param("file", "path", {"type": "string"}, "the file's name", required=True),),
    ),
    ("GET", "/console"): Route(
        "The web console (it asks for an API key and calls this API with it)",
        "console",
        {200: HTML},
    ),
    ("GET", "/console/{file}"): Route(
        "The console's scripts and style sheets",
        "console",
        {200: STATIC},
        (404,),
        params=(Param("file", "path", {"type": "string"}, "the file's name", required=True),),
    ),
}

ROUTES: dict[tuple[str, str], Route] = {
    **JOBS, **pdfcontract.ROUTES, **BATCHES, **TEMPLATES, **assetcontract.ROUTES, **ACCOUNT,
    **ADMIN, **META, **FORMS,
}  # fmt: skip
"""Every public route, by (method, path as docs/api.md names it)."""

TAGS = {
    "jobs": "One document per request: submit, follow, cancel, download.",
    "batches": "Many documents in one request, and one archive of them.",
    "templates": "Stored Jinja2 templates, every version kept.",
    **assetcontract.TAG,
    "account": "The tenant's usage and webhook signing secrets.",
    "admin": "Tenants, API keys and everyone's usage, for `PRESSROOM_ADMIN_KEY`.",
    "meta": "Health, readiness, and this document.",
    "console": "The web console's static files.",
    "gotenberg": "Gotenberg 8 and 9's API (docs/gotenberg.md): each form one job, answered"
    " with its file once done; errors in plain text.",
}
