"""What a job makes (`options.output`): a PDF or an image, each with its content type and
the file name extension its document is stored and downloaded under.

One table for the gateway (checks, batch file names, downloads), the renderer (what
Chromium is asked for, the stored content type) and the CLI's default file name.
"""

from __future__ import annotations

from enum import StrEnum


class Output(StrEnum):
    """A value of `options.output`."""

    PDF = "pdf"
    PNG = "png"
    JPEG = "jpeg"
    WEBP = "webp"


CONTENT_TYPES: dict[str, str] = {
    Output.PDF: "application/pdf",
    Output.PNG: "image/png",
    Output.JPEG: "image/jpeg",
    Output.WEBP: "image/webp",
}
"""The content type of each output's document."""

EXTENSIONS: dict[str, str] = {
    Output.PDF: "pdf",
    Output.PNG: "png",
    Output.JPEG: "jpg",
    Output.WEBP: "webp",
}
"""The file name extension of each output's document (`jobs/<id>.jpg`)."""

IMAGES = (Output.PNG, Output.JPEG, Output.WEBP)
"""The outputs that are a screenshot of the page."""

WITH_QUALITY = (Output.JPEG, Output.WEBP)
"""Lossy images: `options.quality` applies to them."""

WITH_ALPHA = (Output.PNG, Output.WEBP)
"""Images with an alpha channel: `options.omit_background` applies to them."""


def is_image(output: str) -> bool:
    """Whether `output` is a screenshot (PNG, JPEG or WebP) rather than a PDF."""
    return output in IMAGES


def extension_of(output: str) -> str:
    """`pdf`, `png`, `jpg` or `webp`; an unknown output (refused at the gateway) is `pdf`."""
    return EXTENSIONS.get(output, "pdf")


def content_type_of_key(key: str) -> str:
    """The content type of a stored document from its key's extension (`.jpg`: JPEG)."""
    extension = key.rsplit(".", 1)[-1].lower()
    for output, known in EXTENSIONS.items():
        if known == extension:
            return CONTENT_TYPES[output]
    return CONTENT_TYPES[Output.PDF]
