"""What a pipeline is given besides its documents and steps: `Context` (the service's
settings the steps need) and `Limits` (how much one job may ask of a worker)."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.settings import Settings
from services.pdftools.signer import SigningKey, signing_key_of


@dataclass(frozen=True)
class Context:
    """What the steps need from the service's settings. It crosses to the worker
    process, so it holds only picklable values; a step with a setting of its own adds a
    field here (with a default) and a line in `of`."""

    icc_profile: str = Settings.icc_profile
    # Per job, not a setting: the watermark and stamp pages Chromium printed for a
    # rendered job (kind, PDF), added by `renderer/marks.with_marks` before finishing.
    marks: tuple[tuple[str, bytes], ...] = ()
    # The signing certificate and key (`PRESSROOM_SIGNING_*`), read at start: a worker
    # never reads the environment. None: `sign` fails its jobs.
    signing: SigningKey | None = None

    @classmethod
    def of(cls, settings: Settings) -> Context:
        """The context of `settings`; `SettingsError` for an unusable signing file."""
        return cls(icc_profile=settings.icc_profile, signing=signing_key_of(settings))


@dataclass(frozen=True)
class Limits:
    """What one pipeline may take and make: input bytes, pages over all inputs (each
    error names the setting that raises it), output documents and bytes per output."""

    input_bytes: int = Settings.pdf_max_input_bytes
    pages: int = Settings.pdf_max_pages
    outputs: int = Settings.pdf_max_outputs
    output_bytes: int = Settings.max_output_bytes

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.pdf_max_input_bytes,
            settings.pdf_max_pages,
            settings.pdf_max_outputs,
            settings.max_output_bytes,
        )
