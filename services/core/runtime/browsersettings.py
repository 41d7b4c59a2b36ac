"""Settings of the browser the renderer drives: which Chromium, as whom, how sandboxed.

A base of `Settings` (its fields are `Settings`' fields, read the same way from
`PRESSROOM_*` variables), kept apart with the lookup of the Chromium executable.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from services.core.runtime.settingvalues import choice, int_in, var
from services.core.runtime.valuefiles import SettingsError


@dataclass(frozen=True)
class BrowserSettings:
    """Which Chromium the renderer starts, and how."""

    chromium: str = var(
        "PRESSROOM_CHROMIUM",
        "",
        doc="Chromium binary (default: chromium-headless-shell if installed, else chromium)",
    )
    fonts_dir: str = var(
        "PRESSROOM_FONTS_DIR", "", doc="folder of extra fonts usable from templates by family"
    )
    chromium_uid: int = var(
        "PRESSROOM_CHROMIUM_UID",
        64123,
        int_in(1, 2**32 - 2),
        "user and group id Chromium runs as when the renderer runs as root",
    )
    chromium_sandbox: str = var(
        "PRESSROOM_CHROMIUM_SANDBOX",
        "auto",
        choice("auto", "require", "off"),
        "Chromium's own sandbox: auto (on where user namespaces allow, else --no-sandbox "
        "with a warning), require (refuse to start Chromium without it, or without the wall "
        "around the renderer's secret files), off (--no-sandbox)",
    )
    chromium_nice: int = var(
        "PRESSROOM_CHROMIUM_NICE",
        19,
        int_in(0, 19),
        "CPU niceness of Chromium (0-19): the services go first when the cores are busy",
    )

    def chromium_path(self) -> str:
        """The Chromium executable: `PRESSROOM_CHROMIUM`, else the headless shell where
        installed, else the first Chromium on PATH.

        The headless shell (Chromium's headless-only build) prints a PDF for much less
        CPU than a full Chromium in `--headless` mode, which makes every PDF in a print
        compositor process of its own (docs/benchmarks.md). Debian's
        `/usr/bin/chromium-headless-shell` is a shell script that does not `exec`, so
        the binary behind it is named: Chromium must be the launcher's own child."""
        if self.chromium:
            return self.chromium
        for path in HEADLESS_SHELLS:
            if os.access(path, os.X_OK):
                return path
        for name in ("chrome-headless-shell", *FULL_CHROMIUMS):
            found = shutil.which(name)
            if found:
                return found
        raise SettingsError(
            "PRESSROOM_CHROMIUM is not set and no chromium is on PATH "
            "(Debian/Ubuntu: apt-get install chromium-headless-shell)"
        )


HEADLESS_SHELLS = ("/usr/lib/chromium/chromium-headless-shell",)
"""Where Debian's and Ubuntu's `chromium-headless-shell` package puts the binary."""

FULL_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "chrome")
"""Names of a full Chromium on PATH, used when no headless shell is installed."""
