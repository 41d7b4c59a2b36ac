"""What a render takes and what it gives: the document (`Html` or `Url`) and the
`RenderResult`, whose content type is `PDF` or an image's (`outputs.CONTENT_TYPES`)."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.model.outputs import CONTENT_TYPES, Output, extension_of

PDF = CONTENT_TYPES[Output.PDF]
PNG = CONTENT_TYPES[Output.PNG]


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
        """`pdf`, `png`, `jpg` or `webp`: the file name extension of `content_type`."""
        for output, content_type in CONTENT_TYPES.items():
            if content_type == self.content_type:
                return extension_of(output)
        return "pdf"
