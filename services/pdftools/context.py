"""What every finishing step is given: `Context` (the renderer's settings the steps
need) and the `Step` protocol a step module meets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from services.core.pageoptions import PageOptions
from services.core.settings import Settings
from services.pdftools.signer import SigningKey, signing_key_of


@dataclass(frozen=True)
class Context:
    """What the steps need from the renderer's settings. It crosses to the finishing
    worker, so it holds only picklable values; a step with a setting of its own adds a
    field here (with a default) and a line in `of`."""

    icc_profile: str = Settings.icc_profile
    # Per job, not a setting: the watermark and stamp pages Chromium printed for it
    # (kind, PDF), added by `renderer/marks.with_marks` before finishing.
    marks: tuple[tuple[str, bytes], ...] = ()
    # The signing certificate and key (`PRESSROOM_SIGNING_*`), read at start: the
    # finishing worker never reads the environment. None: `sign` fails its jobs.
    signing: SigningKey | None = None

    @classmethod
    def of(cls, settings: Settings) -> Context:
        """The context of `settings`; `SettingsError` for an unusable signing file."""
        return cls(icc_profile=settings.icc_profile, signing=signing_key_of(settings))


class Step(Protocol):
    """A finishing step: a module of this package with these two functions."""

    def applies(self, options: PageOptions) -> bool:
        """Whether `options` ask for this step (cheap: called for every job)."""
        ...

    def apply(self, pdf: bytes, options: PageOptions, context: Context) -> bytes:
        """`pdf` with this step done; `FinishingError` for an input it refuses."""
        ...
