"""The OpenAPI entries of the Gotenberg-compatible routes (`contract.ROUTES` holds
them with the others). A form's fields are Gotenberg's, listed with their Pressroom
meaning in docs/gotenberg.md; errors are plain text, as Gotenberg answers them."""

from __future__ import annotations

from services.gateway.routedocs import Media, Route

TEXT = Media(("text/plain",), "what was wrong, in words (Gotenberg's error answers)")
FILE = Media(
    ("application/pdf", "image/png", "image/jpeg", "image/webp", "application/zip"),
    "the document; `Content-Disposition` names it from `Gotenberg-Output-Filename`",
)
FORM_ERRORS = {400: TEXT, 401: TEXT, 403: TEXT, 409: TEXT, 429: TEXT, 503: TEXT}
FORM_TEXT = (
    "A Gotenberg multipart form (docs/gotenberg.md lists every field), made one Pressroom "
    "job; the answer waits for the job's end (`PRESSROOM_GOTENBERG_TIMEOUT`, then a 503 "
    "naming the job, which goes on). `Authorization: Basic` with the API key as password, "
    "or `Bearer`. `Gotenberg-Trace` is echoed; `Pressroom-Job-Id` names the job."
)


def _form(summary: str) -> Route:
    return Route(summary, "gotenberg", {200: FILE, **FORM_ERRORS}, description=FORM_TEXT)


PDF_ROUTES = (
    "merge", "split", "flatten", "convert", "metadata/write", "metadata/read", "encrypt",
    "rotate", "watermark", "stamp", "embed", "optimize", "bookmarks/write", "factur-x",
)  # fmt: skip
"""The PDF engine routes (`pdfengines.ROUTES`), under `/forms/pdfengines/` (Gotenberg 8)
and `/forms/pdf/` (Gotenberg 9)."""

FORMS: dict[tuple[str, str], Route] = {
    **{
        ("POST", f"/forms/{prefix}/{name}"): _form(f"Gotenberg: PDF engines, {name}")
        for prefix in ("pdfengines", "pdf")
        for name in PDF_ROUTES
    },
    **{
        ("POST", f"/forms/{prefix}/bookmarks/read"): Route(
            "Gotenberg: PDF engines, bookmarks/read",
            "gotenberg",
            {
                200: Media(("application/json",), "each file's outline", {"type": "object"}),
                **FORM_ERRORS,
            },
            description=FORM_TEXT,
        )
        for prefix in ("pdfengines", "pdf")
    },
    ("POST", "/forms/pdf/pipe"): _form(
        "Gotenberg 9: the form's PDFs through its stages, as one PDF-tools job"
    ),
    ("POST", "/forms/pdf/sign"): _form(
        "Gotenberg 9: PDFs signed with the form's certificate (PKCS#12 or PEM)"
    ),
    ("POST", "/forms/pdf/validate"): Route(
        "Gotenberg 9: PDFs checked against a profile by Pressroom's validation",
        "gotenberg",
        {
            200: Media(
                ("application/json",),
                "each file's profile, compliant and violations",
                {"type": "object"},
            ),
            400: TEXT,
            401: TEXT,
            403: TEXT,
            429: TEXT,
            503: TEXT,
        },
        description="Answered at once (no job): docs/gotenberg.md maps each profile onto "
        "Pressroom's checks.",
    ),
    ("POST", "/forms/chromium/convert/html"): _form("Gotenberg: HTML (index.html) to PDF"),
    ("POST", "/forms/chromium/convert/url"): _form("Gotenberg: a URL to PDF"),
    ("POST", "/forms/chromium/convert/markdown"): _form("Gotenberg: Markdown files to PDF"),
    ("POST", "/forms/chromium/screenshot/html"): _form("Gotenberg: HTML to an image"),
    ("POST", "/forms/chromium/screenshot/url"): _form("Gotenberg: a URL to an image"),
    ("POST", "/forms/chromium/screenshot/markdown"): _form("Gotenberg: Markdown to an image"),
    ("POST", "/forms/libreoffice/convert"): Route(
        "Gotenberg: office files (not converted: 501)",
        "gotenberg",
        {501: TEXT},
        description="Pressroom has no LibreOffice; convert office files to PDF first.",
    ),
    ("GET", "/health"): Route(
        "Gotenberg's health check: Chromium and the PDF engines, up while jobs are taken",
        "gotenberg",
        {
            200: Media(("application/json",), "up", {"type": "object"}),
            503: Media(("application/json",), "down", {"type": "object"}),
        },
    ),
    ("GET", "/version"): Route(
        "The Gotenberg version these routes follow", "gotenberg", {200: TEXT}
    ),
}
