"""What the `Merger` and its two copies of a document share: how a source object is
named, the number the merged page tree takes, and the one failure callers see."""

Key = tuple[int, int]  # a source object's number and generation

PAGES = 1  # the page tree's number, taken first so that each page can name its /Parent


class NotMergeable(Exception):
    """The document could not be read as a PDF (an image, a truncated or encrypted file);
    nothing of it was written."""
