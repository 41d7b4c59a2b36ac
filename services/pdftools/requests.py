"""The steps as a request gives them: strict forms of `steps.py`'s structs (unknown
fields are an error naming them), for the gateway to decode a PDF-tool job's `steps`
with, as `gateway/requests.py` does for `options`. Events keep the tolerant forms."""

from __future__ import annotations

import msgspec

from services.pdftools import steps


class MergeStep(steps.Merge, forbid_unknown_fields=True):
    __doc__ = steps.Merge.__doc__


class SplitStep(steps.Split, forbid_unknown_fields=True):
    __doc__ = steps.Split.__doc__


class RotateStep(steps.Rotate, forbid_unknown_fields=True):
    __doc__ = steps.Rotate.__doc__


class FlattenStep(steps.Flatten, forbid_unknown_fields=True):
    __doc__ = steps.Flatten.__doc__


class MetadataStep(steps.Metadata, forbid_unknown_fields=True):
    __doc__ = steps.Metadata.__doc__


class ReadMetadataStep(steps.ReadMetadata, forbid_unknown_fields=True):
    __doc__ = steps.ReadMetadata.__doc__


class PdfAStep(steps.PdfA, forbid_unknown_fields=True):
    __doc__ = steps.PdfA.__doc__


class PdfUAStep(steps.PdfUA, forbid_unknown_fields=True):
    __doc__ = steps.PdfUA.__doc__


class EncryptStep(steps.Encrypt, forbid_unknown_fields=True):
    __doc__ = steps.Encrypt.__doc__


class AttachedFileItem(steps.AttachedFile, forbid_unknown_fields=True):
    __doc__ = steps.AttachedFile.__doc__


class AttachStep(steps.Attach, forbid_unknown_fields=True):
    __doc__ = steps.Attach.__doc__
    files: list[AttachedFileItem]  # type: ignore[assignment]  # strict items (msgspec)


class FacturXStep(steps.FacturX, forbid_unknown_fields=True):
    __doc__ = steps.FacturX.__doc__


class WatermarkStep(steps.Watermark, forbid_unknown_fields=True):
    __doc__ = steps.Watermark.__doc__


class StampStep(steps.Stamp, forbid_unknown_fields=True):
    __doc__ = steps.Stamp.__doc__


class SignStep(steps.Sign, forbid_unknown_fields=True):
    """`sign` as a request gives it: a key or certificate in it is an unknown field."""


class OptimiseStep(steps.Optimise, forbid_unknown_fields=True):
    __doc__ = steps.Optimise.__doc__


class ReadBookmarksStep(steps.ReadBookmarks, forbid_unknown_fields=True):
    __doc__ = steps.ReadBookmarks.__doc__


class BookmarkItem(steps.Bookmark, forbid_unknown_fields=True):
    __doc__ = steps.Bookmark.__doc__
    children: list[BookmarkItem] = msgspec.field(default_factory=list)  # type: ignore[assignment]


class WriteBookmarksStep(steps.WriteBookmarks, forbid_unknown_fields=True):
    __doc__ = steps.WriteBookmarks.__doc__
    bookmarks: list[BookmarkItem]  # type: ignore[assignment]  # strict items (msgspec)


class ValidateStep(steps.Validate, forbid_unknown_fields=True):
    __doc__ = steps.Validate.__doc__


StepRequest = (
    MergeStep
    | SplitStep
    | RotateStep
    | FlattenStep
    | MetadataStep
    | ReadMetadataStep
    | PdfAStep
    | PdfUAStep
    | EncryptStep
    | AttachStep
    | FacturXStep
    | WatermarkStep
    | StampStep
    | SignStep
    | OptimiseStep
    | ValidateStep
    | ReadBookmarksStep
    | WriteBookmarksStep
)
"""Every step, as a request's `steps` list holds them."""
