"""What a render takes and what it gives: the document (`Html` or `Url`) and the
`RenderResult`, whose content type is `PDF` or `PNG`."""

from __future__ import annotations

from dataclasses import dataclass

PDF = "application/pdf"
PNG = "image/png"


@dataclass(frozen=True)
class Html:
    """A document given as HTML, written into a fresh about:blank realm."""

    text: str


@dataclass(frozen=True)
class Url:
    """A document the browser loads from an http(s) address (waits for `load`)."""

    address: str


Source = Html | Url


@dataclass(frozen=True)
class RenderResult:
    """A rendered document: its bytes, page count (1 for an image) and content type."""

    data: bytes
    pages: int
    content_type: str = PDF
    # Requests the egress policy refused while rendering ({"url", "reason"}); the document
    # was made without them.
    refused: tuple[dict[str, str], ...] = ()

    @property
    def extension(self) -> str:
        """`pdf` or `png`: the file name extension of `content_type`."""
        return "png" if self.content_type == PNG else "pdf"
