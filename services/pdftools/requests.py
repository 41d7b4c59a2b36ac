"""The steps as a request gives them: strict forms of `steps.py`'s structs (unknown
fields are an error naming them), for the gateway to decode a PDF-tool job's `steps`
with, as `gateway/requests.py` does for `options`. Events keep the tolerant forms."""

from __future__ import annotations

from services.pdftools import steps


class MergeRequest(steps.Merge, forbid_unknown_fields=True):
    pass


class SplitRequest(steps.Split, forbid_unknown_fields=True):
    pass


class RotateRequest(steps.Rotate, forbid_unknown_fields=True):
    pass


class FlattenRequest(steps.Flatten, forbid_unknown_fields=True):
    pass


class MetadataRequest(steps.Metadata, forbid_unknown_fields=True):
    pass


class ReadMetadataRequest(steps.ReadMetadata, forbid_unknown_fields=True):
    pass


class PdfARequest(steps.PdfA, forbid_unknown_fields=True):
    pass


class PdfUARequest(steps.PdfUA, forbid_unknown_fields=True):
    pass


class EncryptRequest(steps.Encrypt, forbid_unknown_fields=True):
    pass


class AttachedFileRequest(steps.AttachedFile, forbid_unknown_fields=True):
    pass


class AttachRequest(steps.Attach, forbid_unknown_fields=True):
    files: list[AttachedFileRequest]  # type: ignore[assignment]  # strict items (msgspec)


class FacturXRequest(steps.FacturX, forbid_unknown_fields=True):
    pass


class WatermarkRequest(steps.Watermark, forbid_unknown_fields=True):
    pass


class StampRequest(steps.Stamp, forbid_unknown_fields=True):
    pass


class SignRequest(steps.Sign, forbid_unknown_fields=True):
    """`sign` as a request gives it: a key or certificate in it is an unknown field."""


class OptimiseRequest(steps.Optimise, forbid_unknown_fields=True):
    pass


class ValidateRequest(steps.Validate, forbid_unknown_fields=True):
    pass


StepRequest = (
    MergeRequest
    | SplitRequest
    | RotateRequest
    | FlattenRequest
    | MetadataRequest
    | ReadMetadataRequest
    | PdfARequest
    | PdfUARequest
    | EncryptRequest
    | AttachRequest
    | FacturXRequest
    | WatermarkRequest
    | StampRequest
    | SignRequest
    | OptimiseRequest
    | ValidateRequest
)
"""Every step, as a request's `steps` list holds them."""
